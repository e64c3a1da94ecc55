/**
 * A Redis Cluster master killed under a steady stream of driver pods: three masters with one replica each
 * (Debian's redis-server, cluster node timeout 2 s, no persistence), three replica processes of the cleaner in
 * `redisMode: cluster` over three targets (three queues, three hash slots), real etcd, the sandbox API server.
 *
 * The master holding the first target's queue is SIGKILLed; its replica is promoted. After settling: every pod
 * deleted, at most one accepted DELETE per pod, none before its deadline; cleaning resumed on the promoted
 * master (no wedged worker). Printed: the time from the kill to the first DELETE of a pod due after it, and the
 * lateness of the pods pending at the kill.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedisCluster, startRedisCluster } from '../../harness/sandbox/redis-cluster.ts';
import { queueName } from '../../src/queue/job-identity.ts';
import {
  CLEAN,
  checkInvariants,
  firstLeader,
  replicaEnv,
  stopAll,
  targetIn,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';
import { diagnose, failoverReport, medianWorst, startPodStream, waitForDeletesAfter } from './redis-ha.ts';

const cluster = useFailureCluster();
let redis: LocalRedisCluster;
beforeAll(async () => {
  redis = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 2000 });
}, 60_000);
afterAll(async () => {
  await redis?.stop();
});

const RETENTION_MS = 3000;
const NAMESPACES = ['clu-a', 'clu-b', 'clu-c'];

describe('Redis Cluster failover', () => {
  it('the master of a queue’s slot SIGKILLed → its replica promoted; every pod deleted once, none early; cleaning resumes', async () => {
    const server = cluster().server;
    const env = {
      ...replicaEnv(cluster(), NAMESPACES[0] as string, 'clu', { SDC_RETENTION: `${RETENTION_MS}ms` }),
      SDC_TARGETS: NAMESPACES.map((ns) => `${cluster().context}:${ns}`).join(','),
      SDC_REDIS_MODE: 'cluster',
      SDC_REDIS_CLUSTER_NODES: redis.nodes.map((n) => `${n.host}:${n.port}`).join(','),
    };
    const replicas = ['c1', 'c2', 'c3'].map((id) => cluster().startReplica(id, env));
    const stream = startPodStream(server, NAMESPACES, 'clu', 150);
    try {
      for (const ns of NAMESPACES) await firstLeader(replicas, ns);
      await waitForDeletesAfter(server, 0, 10, 'cleaning under way before the kill');

      const key = `clu:${queueName(targetIn(cluster(), NAMESPACES[0] as string))}:x`;
      const master = redis.masterPortOf(key) as number;
      const others = NAMESPACES.filter(
        (ns) => redis.masterPortOf(`clu:${queueName(targetIn(cluster(), ns))}:x`) === master,
      );
      const killAt = server.clock.now();
      await redis.servers.find((s) => s.port === master)?.kill();
      const promoted = await redis.waitForFailover(key, master);
      const promotedAt = server.clock.now();
      await waitForDeletesAfter(server, promotedAt, 20, 'cleaning resumed after the failover');

      stream.stop();
      await waitGone(server, stream.pods, 'every pod deleted after the failover', 60_000).catch((err) => {
        console.info(diagnose(server, stream.pods, replicas));
        throw err;
      });
      if (process.env.HA_DEBUG) console.info(diagnose(server, stream.pods, replicas));
      const report = failoverReport(server, stream, RETENTION_MS, killAt);
      expect(report.repeated).toEqual([]);
      expect(report.early).toEqual([]);
      for (const ns of NAMESPACES) {
        const uids = stream.pods.filter((p) => p.metadata?.namespace === ns).map(uidOf);
        expect(checkInvariants(server, ns, uids, { retentionMs: RETENTION_MS, acceptedOnly: true })).toEqual(
          CLEAN,
        );
      }
      for (const r of replicas) expect(r.child.exitCode).toBeNull();
      // No wedged worker: no leader had to be stepped down by the self-check for processing nothing.
      expect(replicas.flatMap((r) => r.lines.filter((l) => /leader is stuck/.test(String(l.msg))))).toEqual(
        [],
      );
      console.info(
        `[failure] cluster: ${stream.pods.length} pods; master ${master} (queues of ${others.join(', ')}) killed → ` +
          `${promoted} promoted ${promotedAt - killAt} ms later; first DELETE of a pod due after the kill ` +
          `${report.killToFirstDeleteMs} ms after it; pods pending at the kill (${report.pendingLatenessMs.length}) ` +
          `late ${medianWorst(report.pendingLatenessMs)} (median / worst)`,
      );
    } finally {
      stream.stop();
      await stopAll(replicas);
    }
  }, 180_000);
});
