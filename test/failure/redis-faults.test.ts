/**
 * Failure modes: Redis restarted with its data lost, and Redis unreachable for a while.
 * Real Redis (restart keeps nothing; pause = SIGSTOP, a hung server as seen by its clients), replica
 * processes, real etcd, the sandbox API server.
 */
import { describe, expect, it } from 'vitest';
import { deletesPer } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  bystandersIntact,
  CLEAN,
  checkInvariants,
  createBystanders,
  createDrivers,
  firstLeader,
  httpUrl,
  linesSince,
  replicaEnv,
  SOAK,
  statusOf,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();

/** `/readyz` of the replica at `base`: its status and its `redis` field (undefined when it cannot connect). */
async function readyzOf(base: string): Promise<{ status: number; redis?: unknown }> {
  try {
    const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(3000) });
    const body = (await res.json()) as { redis?: unknown };
    return { status: res.status, redis: body.redis };
  } catch {
    return { status: 0 };
  }
}

describe('Redis faults', () => {
  it('Redis restarted with its data lost → the leader’s periodic reconcile restores the jobs; each pod DELETEd once', async () => {
    const ns = 'redis-lost';
    const env = replicaEnv(cluster(), ns, 'rf1', { SDC_RETENTION: '5s', SDC_RECONCILE_INTERVAL: '2s' });
    const replicas = [cluster().startReplica('l1', env), cluster().startReplica('l2', env)];
    try {
      const leader = await firstLeader(replicas, ns);
      const pods = createDrivers(cluster().server, ns, 20, 'lost');
      const uids = pods.map(uidOf);
      await waitFor('both replicas enqueued every pod', () =>
        replicas.every((r) => r.lines.filter((l) => l.msg === 'enqueue' && l.namespace === ns).length >= 20),
      );
      const restartedAt = Date.now();
      await cluster().redis.restart(); // a new, empty redis-server on the same port
      const restored = await leader.waitForLine(
        (l) =>
          l.msg === 'reconciled' && l.namespace === ns && timeOf(l) >= restartedAt && Number(l.added) > 0,
        30_000,
      );
      await waitGone(cluster().server, pods, 'pods deleted after the data loss', 60_000);
      expect(restored.added).toBe(20);
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 5000 })).toEqual(CLEAN);
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      for (const r of replicas) expect(r.child.exitCode).toBeNull();
      console.info(
        `[failure] Redis data lost: jobs restored by the reconcile ${timeOf(restored) - restartedAt} ms after the restart`,
      );
    } finally {
      await stopAll(replicas);
    }
  }, 150_000);

  it('Redis restarted empty while the watch lags → the stale cache re-enqueues the deleted pods; no second DELETE', async () => {
    const ns = 'redis-lost-stale';
    const env = replicaEnv(cluster(), ns, 'rf3', { SDC_RETENTION: '3s', SDC_RECONCILE_INTERVAL: '2s' });
    const replicas = [cluster().startReplica('s1', env)];
    let held: string | undefined;
    try {
      const leader = await firstLeader(replicas, ns);
      const pods = createDrivers(cluster().server, ns, 5, 'stale');
      const uids = pods.map(uidOf);
      await waitFor(
        'the leader enqueued every pod',
        () =>
          leader.lines.some((l) => l.msg === 'enqueue' && l.namespace === ns) &&
          uids.every((u) => leader.lines.some((l) => l.msg === 'enqueue' && l.uid === u)),
      );
      // A slow API server: the leader's next watch is held for a minute, so its cache never sees the
      // deletions; a pending watch is no failure, so the cache stays trusted.
      held = cluster().server.faults.inject({
        verb: 'watch',
        path: `/namespaces/${ns}/pods$`,
        latencyMs: 60_000,
      });
      cluster().server.dropWatches();
      await waitGone(cluster().server, pods, 'pods deleted by the leader', 30_000);
      await waitFor('every DELETE accepted', () =>
        uids.every((u) => leader.lines.some((l) => l.msg === 'driver pod deleted' && l.uid === u)),
      );
      const restartedAt = Date.now();
      await cluster().redis.restart(); // a new, empty redis-server: the finished jobs and tombstones are gone
      const after = (u: string) =>
        linesSince(leader, restartedAt, (l) => l.uid === u && typeof l.outcome === 'string')[0];
      await waitFor(
        'each pod re-enqueued from the stale cache and its job run',
        () => uids.every(after),
        30_000,
      );
      // The sandbox's DELETE log: one per pod (before the fix: a second one, answered 404).
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      expect(uids.map((u) => after(u)?.outcome)).toEqual(uids.map(() => 'already-deleting'));
      expect(leader.child.exitCode).toBeNull();
    } finally {
      if (held) cluster().server.faults.clear(held);
      await stopAll(replicas);
    }
  }, 150_000);

  it(`Redis unreachable for ${SOAK ? 60 : 10} s → no crash, /readyz ready reporting Redis down, cleanup resumes, nothing leaked`, async () => {
    const ns = 'redis-down';
    const outageMs = SOAK ? 60_000 : 10_000;
    const env = replicaEnv(cluster(), ns, 'rf2', { SDC_RETENTION: '2s', SDC_RECONCILE_INTERVAL: '5s' });
    const replicas = [cluster().startReplica('d1', env), cluster().startReplica('d2', env)];
    try {
      await firstLeader(replicas, ns);
      const urls = await Promise.all(replicas.map(httpUrl));
      await waitFor('both replicas ready', async () =>
        (await Promise.all(urls.map((u) => statusOf(`${u}/readyz`)))).every((s) => s === 200),
      );
      const before = createDrivers(cluster().server, ns, 10, 'pre');
      await waitFor('jobs of the first pods enqueued', () =>
        replicas.every((r) => r.lines.filter((l) => l.msg === 'enqueue' && l.namespace === ns).length >= 10),
      );
      const downAt = Date.now();
      cluster().redis.pause();
      // Pods that finish during the outage: their enqueue waits for Redis (or the reconcile adds them).
      const during = createDrivers(cluster().server, ns, 10, 'mid');
      const bystanders = createBystanders(cluster().server, ns);
      // Still ready (evictable by a drain), with Redis reported down.
      await waitFor(
        'both replicas report Redis down on /readyz, still 200',
        async () =>
          (await Promise.all(urls.map((u) => readyzOf(u)))).every(
            (r) => r.status === 200 && r.redis === false,
          ),
        15_000,
      );
      // Hold the outage (well past every deadline) while checking the processes stay up.
      await waitFor(
        `outage of ${outageMs} ms held`,
        () => {
          for (const r of replicas) if (r.child.exitCode !== null) throw new Error(`${r.id} exited`);
          return Date.now() - downAt >= outageMs;
        },
        outageMs + 5000,
        250,
      );
      cluster().redis.resume();
      const upAt = Date.now();
      const all = [...before, ...during];
      await waitGone(cluster().server, all, 'every pod deleted after the outage', 60_000);
      const cleanedAt = Date.now();
      await waitFor('both replicas ready, Redis reported up again', async () =>
        (await Promise.all(urls.map((u) => readyzOf(u)))).every((r) => r.status === 200 && r.redis === true),
      );
      const uids = all.map(uidOf);
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 2000 })).toEqual(CLEAN);
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      for (const r of replicas) expect(r.child.exitCode).toBeNull();
      expect(bystandersIntact(cluster().server, bystanders)).toBe(true);
      const errors = replicas.flatMap((r) =>
        linesSince(r, downAt, (l) => l.level === 'error' || l.level === 'fatal'),
      );
      console.info(
        `[failure] Redis unreachable ${upAt - downAt} ms: all cleaned ${cleanedAt - upAt} ms after it came back; ` +
          `${errors.length} error lines`,
      );
      expect(await stopAll(replicas)).toEqual([0, 0]);
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);
});
