/**
 * Failure modes on the pods' side: a pod re-created with the same name, a finalizer holding a pod, a pod
 * deleted by a person during retention, a pod relabelled out of the selector, and thousands of pods
 * terminating at once. Real replica processes, Redis, etcd and the sandbox API server.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  bystandersIntact,
  CLEAN,
  checkInvariants,
  createBystanders,
  createDrivers,
  firstLeader,
  linesSince,
  nameOf,
  remember,
  replicaEnv,
  SOAK,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();

const deletesOf = (uid: string) => cluster().server.requests.deletesByUid().get(uid) ?? [];
const enqueued = (ns: string, uid: string) =>
  cluster().replicas.some((r) =>
    r.lines.some((l) => l.msg === 'enqueue' && l.namespace === ns && l.uid === uid),
  );

/** The driver container's terminated state, as the kubelet writes it when Spark exits 0. */
function finishedStatus(nowMs: number): NonNullable<V1Pod['status']> {
  const at = new Date(nowMs).toISOString();
  return {
    phase: 'Succeeded',
    containerStatuses: [
      {
        name: 'spark-kubernetes-driver',
        image: 'apache/spark:3.5.3',
        imageID: '',
        ready: false,
        restartCount: 0,
        state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: at, finishedAt: at } },
      } as unknown as NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>[number],
    ],
  };
}

describe('pod edge cases', () => {
  it('a pod re-created with the same name while its old job waits → the old job never deletes the new pod', async () => {
    const ns = 'pod-reborn';
    const env = replicaEnv(cluster(), ns, 'pe1', { SDC_RETENTION: '4s' });
    const first = cluster().startReplica('rb1', env);
    await firstLeader([first], ns);
    const [old] = createDrivers(cluster().server, ns, 1, 'reborn');
    const name = nameOf(old);
    await waitFor('old pod enqueued', () => enqueued(ns, uidOf(old)));
    // The cleaners are down while someone deletes the pod and starts a new one with the same name.
    first.kill('SIGKILL');
    await first.exited;
    cluster().server.pods.delete(ns, name);
    const fresh = sparkDriverPod({
      namespace: ns,
      appName: 'reborn',
      phase: 'Running',
      nowMs: cluster().server.clock.now(),
    });
    fresh.metadata = { ...fresh.metadata, name };
    const reborn = remember(cluster().server.pods.create(fresh));
    const second = cluster().startReplica('rb2', env);
    try {
      const replaced = await second.waitForLine(
        (l) => l.outcome === 'replaced' && l.uid === uidOf(old),
        30_000,
      );
      expect(replaced).toMatchObject({ level: 'debug', pod: name });
      expect(cluster().server.pods.get(ns, name)?.metadata?.uid).toBe(uidOf(reborn));
      expect(deletesOf(uidOf(reborn))).toEqual([]);
      // When the new pod finishes, its own job deletes it, once.
      cluster().server.pods.patchStatus(ns, name, finishedStatus(cluster().server.clock.now()));
      await waitGone(cluster().server, [reborn], 'the new pod deleted by its own job', 60_000);
      expect(deletesOf(uidOf(reborn))).toEqual([200]);
      expect(deletesOf(uidOf(old))).toEqual([]);
      expect(checkInvariants(cluster().server, ns, [uidOf(reborn)], { retentionMs: 4000 })).toEqual(CLEAN);
    } finally {
      await stopAll([second]);
    }
  }, 150_000);

  it('a finalizer holds a deleted pod → one DELETE, no repeat across reconciles and a leader change', async () => {
    const ns = 'pod-finalizer';
    const env = replicaEnv(cluster(), ns, 'pe2', { SDC_RECONCILE_INTERVAL: '1s' });
    const replicas = [cluster().startReplica('fz1', env), cluster().startReplica('fz2', env)];
    try {
      const leader = await firstLeader(replicas, ns);
      const held = sparkDriverPod({
        namespace: ns,
        appName: 'held',
        phase: 'Succeeded',
        nowMs: cluster().server.clock.now(),
      });
      held.metadata = { ...held.metadata, finalizers: ['example.com/audit-export'] };
      const pod = remember(cluster().server.pods.create(held));
      const uid = uidOf(pod);
      await waitFor('the DELETE was accepted', () => deletesOf(uid).length === 1, 60_000);
      expect(cluster().server.pods.get(ns, nameOf(pod))?.metadata?.deletionTimestamp).toBeDefined();
      // Three periodic reconciles later, then a new leader's reconcile: still one DELETE.
      const after = Date.now();
      await waitFor(
        'three reconciles after the DELETE',
        () => linesSince(leader, after, (l) => l.msg === 'reconciled' && l.namespace === ns).length >= 3,
        20_000,
      );
      const handover = Date.now();
      leader.kill('SIGTERM');
      const next = replicas.find((r) => r !== leader);
      await next?.waitForLine(
        (l) => l.msg === 'reconciled' && l.namespace === ns && Date.parse(String(l.time)) >= handover,
        20_000,
      );
      expect(deletesOf(uid)).toEqual([200]);
      expect(cluster().server.pods.get(ns, nameOf(pod))).toBeDefined();
      // The finalizer's owner finishes: the pod goes, still with our single DELETE.
      const cur = cluster().server.pods.get(ns, nameOf(pod));
      if (cur) cluster().server.pods.update({ ...cur, metadata: { ...cur.metadata, finalizers: [] } });
      await waitGone(cluster().server, [pod], 'pod removed once the finalizer is gone');
      expect(deletesOf(uid)).toEqual([200]);
      expect(checkInvariants(cluster().server, ns, [uid], { retentionMs: 1000 })).toEqual(CLEAN);
    } finally {
      await stopAll(replicas);
    }
  }, 150_000);

  it('a pod deleted by a person during retention, and one relabelled out of the selector → jobs removed (the deleted one tombstoned), never DELETEd', async () => {
    const ns = 'pod-manual';
    const env = replicaEnv(cluster(), ns, 'pe3', { SDC_RETENTION: '3s', SDC_RECONCILE_INTERVAL: '1s' });
    const replicas = [cluster().startReplica('mn1', env), cluster().startReplica('mn2', env)];
    try {
      await firstLeader(replicas, ns);
      const [byPerson, relabelled, control] = createDrivers(cluster().server, ns, 3, 'manual');
      await waitFor('all three enqueued', () =>
        [byPerson, relabelled, control].every((p) => enqueued(ns, uidOf(p))),
      );
      // kubectl delete (in-process: not one of the API requests we count).
      cluster().server.pods.delete(ns, nameOf(byPerson));
      // Someone takes the pod out of the cleaner's hands: the selector no longer matches.
      const cur = cluster().server.pods.get(ns, nameOf(relabelled));
      const labels = { ...(cur?.metadata?.labels ?? {}) };
      delete labels['kyuubi-unique-tag'];
      if (cur) cluster().server.pods.update({ ...cur, metadata: { ...cur.metadata, labels } });
      // The control pod has the same deadline; once it is gone, the other two were due too.
      await waitGone(cluster().server, control ? [control] : [], 'control pod deleted', 60_000);
      // And a couple of reconciles later, still nothing.
      const after = Date.now();
      await waitFor('two reconciles after the deadline', () =>
        replicas.some(
          (r) => linesSince(r, after, (l) => l.msg === 'reconciled' && l.namespace === ns).length >= 2,
        ),
      );
      expect(deletesOf(uidOf(byPerson))).toEqual([]);
      expect(deletesOf(uidOf(relabelled))).toEqual([]);
      expect(cluster().server.pods.get(ns, nameOf(relabelled))?.metadata?.uid).toBe(uidOf(relabelled));
      expect(deletesOf(uidOf(control))).toEqual([200]);
      const linesOf = (msg: string) =>
        cluster().replicas.flatMap((r) =>
          r.lines.filter((l) => l.msg === msg && l.namespace === ns).map((l) => l.uid),
        );
      // The deleted pod was cancelled and tombstoned (the control pod's own DELETE event tombstones it too).
      // The relabelled one is not deleted: its job was removed without a tombstone (tombstones.test.ts).
      const cancelled = linesOf('cleanup cancelled: tombstoned');
      expect(cancelled).toContain(uidOf(byPerson));
      expect(cancelled).not.toContain(uidOf(relabelled));
      expect(linesOf('cleanup unscheduled: pending job removed, no tombstone')).toContain(uidOf(relabelled));
      expect(checkInvariants(cluster().server, ns, [uidOf(control)], { retentionMs: 3000 })).toEqual(CLEAN);
    } finally {
      await stopAll(replicas);
    }
  }, 150_000);

  it(`${SOAK ? '10,000' : '2,000'} pods terminating at once → each DELETEd once, within a couple of minutes`, async () => {
    const ns = 'pod-mass';
    const n = SOAK ? 10_000 : 2_000;
    const env = replicaEnv(cluster(), ns, 'pe4', {
      SDC_API_QPS: '2000',
      SDC_API_BURST: '500',
      SDC_CONCURRENCY: '50',
      SDC_LOG_LEVEL: 'info',
    });
    const replicas = [cluster().startReplica('ms1', env), cluster().startReplica('ms2', env)];
    try {
      await firstLeader(replicas, ns);
      const startedAt = Date.now();
      const bystanders = createBystanders(cluster().server, ns);
      const pods = createDrivers(cluster().server, ns, n, 'mass');
      await waitGone(cluster().server, pods, `${n} pods deleted`, SOAK ? 600_000 : 150_000);
      const tookMs = Date.now() - startedAt;
      const uids = pods.map(uidOf);
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      const m = cluster().server.requests.deletesByUid();
      expect(uids.filter((u) => m.get(u)?.length !== 1)).toEqual([]);
      expect(bystandersIntact(cluster().server, bystanders)).toBe(true);
      console.info(
        `[failure] ${n} pods at once: all deleted in ${tookMs} ms (${Math.round((n * 1000) / tookMs)} pods/s)`,
      );
    } finally {
      await stopAll(replicas);
    }
  }, 660_000);
});
