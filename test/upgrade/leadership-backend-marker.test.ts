/**
 * The leadership-backend marker (src/cleaner/cluster-claims.ts, src/leadership/open-backend.ts
 * `leadershipMarker`): a replica that finds replicas of its cluster electing through another backend refuses
 * to consume, loudly, and so do they. What a rollback to a release that does not run the fleet's backend
 * looks like to the releases from this one on, and what half a fleet configured otherwise looks like: here an
 * etcd fleet and a replica of the same cluster on ZooKeeper (real processes, Redis, etcd, ZooKeeper and the
 * sandbox API server). Resuming once the other backend's replicas are gone is in
 * test/integration/cluster-claims.test.ts (with a short claim period).
 */
import { describe, expect, it } from 'vitest';
import type { LogLine, ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import {
  createDrivers,
  firstLeader,
  replicaEnv,
  replicaMetric,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from '../failure/helpers.ts';
import { deletesPer } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';

const cluster = useFailureCluster({ context: 'mk' });
const zk = useZooKeeper();

/** The refusal's error line (src/cleaner/cluster-claims.ts `backendConflictMessage`). */
const refusal = (l: LogLine) =>
  l.level === 'error' && String(l.msg).includes('elect their leaders through two backends');

describe('replicas of one cluster on two leadership backends', () => {
  it('an etcd fleet and a ZooKeeper replica: both refuse the targets, with an error line and sdc_target_refused; the newcomer never deletes; due pods wait', async () => {
    const ns = 'marker';
    const server = cluster().server;
    const common = { SDC_OVERDUE_GRACE: '2s' };
    const onEtcd = cluster().startReplica('e1', replicaEnv(cluster(), ns, 'mk', common));
    let onZk: ReplicaProcess | undefined;
    try {
      await firstLeader([onEtcd], ns);
      const before = createDrivers(server, ns, 3, 'before', 1000);
      await waitGone(server, before, 'the etcd fleet cleans');

      onZk = cluster().startReplica(
        'z1',
        replicaEnv(cluster(), ns, 'mk', { ...common, SDC_ETCD_ENDPOINTS: '', SDC_ZOOKEEPER: zk().connect }),
      );
      // The newcomer refuses from its first look at the claims; the fleet at its next refresh (every 30 s).
      const zkLine = await onZk.waitForLine(refusal, 30_000);
      const etcdLine = await onEtcd.waitForLine(refusal, 45_000);
      expect(zkLine).toMatchObject({
        namespaces: [ns],
        leadership: 'zookeeper /spark-driver-cleaner',
        otherLeadership: ['etcd spark-driver-cleaner/'],
      });
      expect(etcdLine).toMatchObject({
        namespaces: [ns],
        leadership: 'etcd spark-driver-cleaner/',
        otherLeadership: ['zookeeper /spark-driver-cleaner'],
      });
      for (const r of [onEtcd, onZk])
        await waitFor(
          `${r.id} reports the refusal`,
          async () => (await replicaMetric(r, 'sdc_target_refused', ns)) === 1,
        );

      // Pods that fall due now wait on both sides: overdue on both replicas' self-checks, never deleted.
      const after = createDrivers(server, ns, 3, 'after', 1000);
      const both = [onEtcd, onZk];
      await waitFor(
        'both replicas count the new pods overdue',
        async () =>
          (await Promise.all(both.map((r) => replicaMetric(r, 'sdc_overdue_pods', ns)))).every((n) => n >= 3),
        60_000,
      );
      expect(deletesPer(server, after.map(uidOf))).toEqual([0, 0, 0]);
      expect(onZk.lines.filter((l) => l.msg === 'driver pod deleted')).toEqual([]);
    } finally {
      await stopAll([onEtcd, ...(onZk ? [onZk] : [])]);
    }
  }, 180_000);
});
