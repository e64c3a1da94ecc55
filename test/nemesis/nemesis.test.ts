/**
 * The nemesis: three replica processes clean up a steady stream of driver pods over three
 * targets while a seeded random schedule injects faults one after another and overlapping — SIGKILL,
 * SIGSTOP/SIGCONT and SIGTERM+restart of replicas, a replica's wall clock stepped (libfaketime), the
 * leadership store (etcd, or ZooKeeper) killed and restarted, its answers lost after the request was applied,
 * Redis restarted empty and paused, API 403/429/5xx, resets, slow answers, dropped and stalled watches, a replica
 * restarted with another retention than the fleet's. Then
 * the faults end, the system settles, and the invariants (invariants.ts) are judged from the sandbox's DELETE
 * log and store, with the per-replica proxies telling who sent what — never from the product's own counters.
 *
 * CI size: a 75 s schedule (every kind of fault at least once). `NEMESIS_MINUTES=N` or `SOAK=1` (30 min)
 * for the soak. `SEED=…` replays a run's schedule exactly; the seed and the schedule are printed at the
 * start and in every failure. `NEMESIS_REDIS=sentinel|cluster` runs the replicas on a Sentinel setup or a
 * Redis Cluster instead of one server, with that mode's failover among the faults (default `single`).
 * `NEMESIS_LEADERSHIP=zookeeper` elects the leaders on a three-server ZooKeeper ensemble instead of etcd, with
 * its kill, lost answers (zookeeper-proxy.ts) and a follower cut off from its peers among the faults.
 * `NEMESIS_CLUSTERS=2` runs two clusters (two sandbox API servers whose kubeconfigs name their context the
 * same, same namespaces, two replicas each) on the one Redis and the one etcd or ZooKeeper, judged per cluster.
 * docs/failure-modes.md has the figures.
 */
import {
  type Leadership,
  parseClusters,
  parseLeadership,
  parseRedisMode,
  type RedisMode,
} from './schedule.ts';
import { describeNemesis, plainSuite } from './suite.ts';

// The plain suite (and CI, seed 7 pinned) runs two CI-size runs, one after another in this one file so that
// two nemesis runs never share the machine's cores: one Redis server on etcd, and two clusters on ZooKeeper —
// both backends, one and two clusters. `NEMESIS_ALL=1` adds the other four (Sentinel on etcd, Redis Cluster on
// etcd, one cluster on ZooKeeper, two clusters on etcd); each mode's seed sweep is in docs/failure-modes.md. A
// replay or a soak is the one run asked for.
const ALL: [RedisMode, Leadership, 1 | 2][] = [
  ['single', 'etcd', 1],
  ['single', 'zookeeper', 2],
  ['sentinel', 'etcd', 1],
  ['cluster', 'etcd', 1],
  ['single', 'zookeeper', 1],
  ['single', 'etcd', 2],
];
const runs: [RedisMode, Leadership, 1 | 2][] = plainSuite()
  ? ALL.slice(0, process.env.NEMESIS_ALL === '1' ? ALL.length : 2)
  : [
      [
        parseRedisMode(process.env.NEMESIS_REDIS),
        parseLeadership(process.env.NEMESIS_LEADERSHIP),
        parseClusters(process.env.NEMESIS_CLUSTERS),
      ],
    ];
for (const [mode, leadership, clusters] of runs) describeNemesis(mode, leadership, clusters);
