import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalService, startRedis } from '../../harness/sandbox/local-services.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import { cleanupJobDataOf, createCleanupQueue, JOB_FORMAT } from '../../src/queue/cleanup-queue.ts';
import { createQueueConsumer } from '../../src/queue/queue-consumer.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let redis: LocalService;
const conns: Redis[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const c of conns) c.disconnect();
  await redis?.stop();
});

const target = { cluster: 'eks-a', context: 'arn:aws:eks:x:1:cluster/a', namespace: 'spark' };

function connect() {
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  conns.push(connection);
  return connection;
}

function replicaQueue(prefix: string, tombstoneTtlMs = 60_000) {
  return createCleanupQueue({
    target,
    connection: connect(),
    prefix,
    tombstoneTtlMs,
    log: memoryLogger().log,
    now: Date.now,
  });
}

const data = (uid: string): CleanupJobData => ({
  context: 'arn:aws:eks:x:1:cluster/a',
  namespace: 'spark',
  pod: `p-${uid.slice(0, 4)}`,
  uid,
  deadlineMs: Date.now() + 60_000,
  finishedAtMs: Date.now(),
  enqueuedBy: 'r',
});

describe('cleanup queue (real Redis)', () => {
  it('N replicas adding the same pod → exactly one delayed job', async () => {
    const replicas = [replicaQueue('t1'), replicaQueue('t1'), replicaQueue('t1')];
    const uid = '0b1c1a52-2c4e-4c55-9a0e-000000000001';
    await Promise.all(replicas.flatMap((q) => [q.enqueue(data(uid)), q.enqueue(data(uid))]));
    const q = replicas[0]?.bullQueue;
    expect(await q?.getDelayedCount()).toBe(1);
    const job = await q?.getJob(uid);
    expect(job && cleanupJobDataOf(target, job)).toMatchObject({ uid, pod: data(uid).pod });
    // Sequential adds after the first answer 'exists' without writing.
    expect(await replicas[1]?.enqueue(data(uid))).toBe('exists');
    // The queue name is a Redis Cluster hash tag of the cluster's name and the namespace (the context, an
    // EKS ARN here, is in none): every key of the queue shares one slot.
    const keys = await conns[0]?.keys('t1:*');
    expect(keys?.length).toBeGreaterThan(0);
    for (const k of keys ?? []) expect(k).toMatch(/^t1:\{eks-a\/spark\}:/);
  });

  it('workerNames lists the replica id of each worker connected to the queue', async () => {
    const q = replicaQueue('t9');
    expect(await q.workerNames()).toEqual([]);
    const workers = ['replica-a', 'replica-b'].map(
      (name) => new Worker(q.name, async () => undefined, { connection: connect(), prefix: 't9', name }),
    );
    try {
      // A worker names its Redis connections when it starts consuming.
      const names = await waitFor('both workers listed', async () => {
        const n = new Set(await q.workerNames());
        return n.size === 2 ? [...n].sort() : undefined;
      });
      expect(names).toEqual(['replica-a', 'replica-b']);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  });

  it('cancel removes the pending job and tombstones the UID for every replica', async () => {
    const [a, b] = [replicaQueue('t2'), replicaQueue('t2')];
    const uid = '0b1c1a52-2c4e-4c55-9a0e-000000000002';
    expect(await a?.enqueue(data(uid))).toBe('added');
    expect(await b?.cancel(uid)).toBe('removed');
    expect(await a?.bullQueue.getJob(uid)).toBeUndefined();
    expect(await a?.enqueue(data(uid))).toBe('tombstoned');
    expect(await b?.enqueue(data(uid))).toBe('tombstoned');
    expect(await a?.bullQueue.getDelayedCount()).toBe(0);
    const ttl = await conns[0]?.pttl(`t2:${a?.name}:tombstone:${uid}`);
    expect(ttl).toBeGreaterThan(55_000);
  });

  it('replicas cancelling the same deletion at once: at most one answers removed, and the first does', async () => {
    const qs = [replicaQueue('t4'), replicaQueue('t4'), replicaQueue('t4')];
    let removed = 0;
    for (let i = 0; i < 20; i++) {
      const uid = `0b1c1a52-2c4e-4c55-9a0e-2000000000${String(i).padStart(2, '0')}`;
      expect(await qs[0]?.enqueue(data(uid))).toBe('added');
      // Each replica's informer sees the deletion twice (deletionTimestamp, then DELETED).
      const answers = await Promise.all(qs.flatMap((q) => [q.cancel(uid), q.cancel(uid)]));
      expect(answers.filter((a) => a === 'removed').length, answers.join(' ')).toBeLessThanOrEqual(1);
      removed += answers.filter((a) => a === 'removed').length;
      expect(await qs[0]?.bullQueue.getJob(uid)).toBeUndefined();
      // Later cancels of the same UID: the job is gone, and they are not the first.
      expect(await qs[1]?.cancel(uid)).toBe('none');
    }
    // BullMQ's remove answers 1 for a job already removed: without the first-tombstone rule all six would say removed.
    expect(removed).toBe(20);
  });

  it('a cancel racing with adds never leaves a pending job', async () => {
    const qs = [replicaQueue('t3'), replicaQueue('t3'), replicaQueue('t3')];
    for (let i = 0; i < 20; i++) {
      const uid = `0b1c1a52-2c4e-4c55-9a0e-1000000000${String(i).padStart(2, '0')}`;
      await Promise.all([qs[0]?.enqueue(data(uid)), qs[1]?.cancel(uid), qs[2]?.enqueue(data(uid))]);
    }
    expect(await qs[0]?.bullQueue.getDelayedCount()).toBe(0);
  });
});

describe('compact jobs (Redis memory)', () => {
  it('stores only the format and the deadline as data and the pod name as job name: a listpack hash', async () => {
    const q = replicaQueue('m1');
    const uid = '5e0c2f4a-6a1d-4d7e-9b1a-000000000001';
    const d = { ...data(uid), pod: 'kyuubi-spark-sql-engine-analytics-3f2a9c8e1b7d4a60-driver' };
    expect(await q.enqueue(d)).toBe('added');
    const key = `m1:${q.name}:${uid}`;
    const hash = await conns[0]?.hgetall(key);
    expect(hash?.name).toBe(d.pod);
    expect(JSON.parse(hash?.data ?? '')).toEqual({ v: JOB_FORMAT, deadlineMs: d.deadlineMs });
    const opts = JSON.parse(hash?.opts ?? '');
    expect(opts).toMatchObject({ attempts: 15, backoff: { type: 'cleanup' } });
    expect(opts).not.toHaveProperty('jobId');
    expect(opts).not.toHaveProperty('removeOnComplete');
    for (const v of Object.values(hash ?? {})) expect(v.length).toBeLessThanOrEqual(64);
    expect(await conns[0]?.object('ENCODING', key)).toBe('listpack');
    // The handler's view comes back whole, but for what is not stored.
    const job = await q.bullQueue.getJob(uid);
    expect(job && cleanupJobDataOf(target, job)).toEqual({
      context: d.context,
      namespace: d.namespace,
      pod: d.pod,
      uid,
      deadlineMs: d.deadlineMs,
    });
    // A traceparent is kept (the hash is then larger, which is fine).
    const traced = '5e0c2f4a-6a1d-4d7e-9b1a-000000000002';
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await q.enqueue({ ...data(traced), traceparent });
    const tj = await q.bullQueue.getJob(traced);
    expect(tj && cleanupJobDataOf(target, tj).traceparent).toBe(traceparent);
  });

  it('the worker hands the handler the whole data rebuilt from compact jobs, and keeps finished jobs keepFinishedMs', async () => {
    const q = replicaQueue('m2', 1000);
    expect(q.keepFinishedMs).toBe(1000);
    const compact = '5e0c2f4a-6a1d-4d7e-9b1a-000000000011';
    const old = '5e0c2f4a-6a1d-4d7e-9b1a-000000000012';
    const later = '5e0c2f4a-6a1d-4d7e-9b1a-000000000013';
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await q.enqueue({ ...data(compact), deadlineMs: Date.now() - 10, traceparent });
    // A second job, without a trace context.
    await q.enqueue({ ...data(old), deadlineMs: Date.now() - 10 });

    const seen: CleanupJobData[] = [];
    const worker = createQueueConsumer({
      handler: cleanupDriverPod,
      target,
      connection: connect(),
      prefix: 'm2',
      concurrency: 2,
      replicaId: 'r',
      keepFinishedMs: q.keepFinishedMs,
      log: memoryLogger().log,
      deps: {
        // Not in the cache, and the live GET finds no such pod either: already-absent.
        pods: { get: async () => undefined } as unknown as PodApi,
        cached: () => undefined,
        recheck: 'cache',
        fence: async () => {},
        stillLeader: () => true,
        selector: parseLabelSelector('spark-role=driver'),
        policy: 'ALL',
        retentionMs: 0,
        dryRun: false,
        now: Date.now,
      },
      telemetry: {
        process: async (d, run) => {
          seen.push(d);
          return run();
        },
      },
    });
    try {
      worker.run();
      await waitFor('both jobs completed', async () => (await q.bullQueue.getCompletedCount()) === 2);
      const byUid = new Map(seen.map((d) => [d.uid, d]));
      expect(byUid.get(compact)).toEqual({
        context: target.context,
        namespace: target.namespace,
        pod: data(compact).pod,
        uid: compact,
        deadlineMs: expect.any(Number),
        traceparent,
      });
      expect(byUid.get(old)).toEqual({
        context: target.context,
        namespace: target.namespace,
        pod: data(old).pod,
        uid: old,
        deadlineMs: expect.any(Number),
      });
      expect((await q.bullQueue.getJob(compact))?.returnvalue).toEqual({ outcome: 'already-absent' });

      // removeOnComplete is now the worker's: a completion after keepFinishedMs trims the completed set of
      // the jobs finished before (BullMQ trims by the setting of the job completing, here a compact one).
      // Wait for the condition itself: both earlier completions (BullMQ's finishedOn) more than
      // keepFinishedMs ago.
      const finishedOn = await Promise.all(
        [compact, old].map(
          async (uid) => (await q.bullQueue.getJob(uid))?.finishedOn ?? Number.POSITIVE_INFINITY,
        ),
      );
      await waitFor(
        'keepFinishedMs past both completions',
        () => Date.now() > Math.max(...finishedOn) + q.keepFinishedMs,
      );
      await q.enqueue({ ...data(later), deadlineMs: Date.now() - 10 });
      await waitFor(
        'third job completed',
        async () => (await q.bullQueue.getJobState(later)) === 'completed',
      );
      expect(await q.bullQueue.getJobState(compact)).toBe('unknown');
      expect(await q.bullQueue.getJobState(old)).toBe('unknown');
    } finally {
      await worker.stop('test done');
    }
  });
});

describe('cancel', () => {
  const tomb = (q: ReturnType<typeof replicaQueue>, prefix: string, uid: string) =>
    conns[0]?.exists(`${prefix}:${q.name}:tombstone:${uid}`);

  it('removes a waiting job; leaves an active and a completed job alone; always writes the tombstone', async () => {
    const q = replicaQueue('c1');
    const [waiting, active, completed, unknown] = [1, 2, 3, 4].map(
      (i) => `7d3e1b2c-0f4a-4b5c-8d6e-00000000000${i}`,
    ) as [string, string, string, string];
    // A deadline already past: added straight to the wait list, no delay.
    const due = (uid: string) => ({ ...data(uid), deadlineMs: Date.now() - 1000 });

    expect(await q.enqueue(due(waiting))).toBe('added');
    expect(await q.bullQueue.getJobState(waiting)).toBe('waiting');
    expect(await q.cancel(waiting)).toBe('removed');
    expect(await q.bullQueue.getJobState(waiting)).toBe('unknown');
    expect(await tomb(q, 'c1', waiting)).toBe(1);

    // A job a worker holds (locked, active): never removed by cancel.
    const worker = new Worker(q.name, null, { connection: connect(), prefix: 'c1', autorun: false });
    try {
      await q.enqueue(due(active));
      const job = await worker.getNextJob('token-1');
      expect(job?.id).toBe(active);
      expect(await q.cancel(active)).toBe('none');
      expect(await q.bullQueue.getJobState(active)).toBe('active');
      expect(await tomb(q, 'c1', active)).toBe(1);

      await q.enqueue(due(completed));
      const next = await worker.getNextJob('token-2');
      expect(next?.id).toBe(completed);
      await next?.moveToCompleted({ outcome: 'accepted' }, 'token-2', false);
      expect(await q.cancel(completed)).toBe('none');
      expect(await q.bullQueue.getJobState(completed)).toBe('completed');
      expect(await tomb(q, 'c1', completed)).toBe(1);
    } finally {
      await worker.close(true);
    }

    expect(await q.cancel(unknown)).toBe('none');
    expect(await tomb(q, 'c1', unknown)).toBe(1);
    expect(await q.enqueue(due(unknown))).toBe('tombstoned');
  });

  it('a job that failed before (waiting out a retry backoff) is removed as removed-retrying', async () => {
    const q = replicaQueue('c3');
    const uid = '7d3e1b2c-0f4a-4b5c-8d6e-000000000021';
    await q.enqueue({ ...data(uid), deadlineMs: Date.now() - 1000 });
    const worker = new Worker(q.name, null, {
      connection: connect(),
      prefix: 'c3',
      autorun: false,
      settings: { backoffStrategy: () => 60_000 },
    });
    try {
      const job = await worker.getNextJob('token-1');
      expect(job?.id).toBe(uid);
      // A run that failed (its DELETE may have been applied without its answer): retried after a backoff.
      await job?.moveToFailed(new Error('DELETE timed out'), 'token-1', false);
      expect(await q.bullQueue.getJobState(uid)).toBe('delayed');
      expect(await q.cancel(uid)).toBe('removed-retrying');
      expect(await q.bullQueue.getJobState(uid)).toBe('unknown');
    } finally {
      await worker.close(true);
    }
  });

  it('removes a job of a paused queue', async () => {
    const q = replicaQueue('c2');
    const uid = '7d3e1b2c-0f4a-4b5c-8d6e-000000000011';
    await q.bullQueue.pause();
    await q.enqueue({ ...data(uid), deadlineMs: Date.now() - 1000 });
    expect(await q.bullQueue.getJobState(uid)).toBe('waiting');
    expect(await q.cancel(uid)).toBe('removed');
    expect(await q.bullQueue.getJobState(uid)).toBe('unknown');
  });
});

describe('tombstones only for deletions; finished jobs that deleted nothing are replaced', () => {
  it('unschedule removes a pending job without a tombstone: the pod can be enqueued again', async () => {
    const q = replicaQueue('u1');
    const uid = '8e4f2c3d-1a5b-4c6d-9e7f-000000000001';
    expect(await q.enqueue(data(uid))).toBe('added');
    expect(await q.unschedule(uid)).toBe('removed');
    expect(await q.bullQueue.getJobState(uid)).toBe('unknown');
    expect(await q.isTombstoned(uid)).toBe(false);
    expect(await q.enqueue(data(uid))).toBe('added');
    expect(await q.unschedule('8e4f2c3d-1a5b-4c6d-9e7f-000000000002')).toBe('none');
  });

  it('a job completed as would-delete is replaced outside dry run, kept in dry run; accepted and already-absent are kept', async () => {
    const q = replicaQueue('u2');
    const ids = [1, 2, 3, 4].map((i) => `8e4f2c3d-1a5b-4c6d-9e7f-00000000001${i}`) as [
      string,
      string,
      string,
      string,
    ];
    const [wouldDelete, accepted, absent, skipped] = ids;
    const due = (uid: string) => ({ ...data(uid), deadlineMs: Date.now() - 1000 });
    const worker = new Worker(q.name, null, { connection: connect(), prefix: 'u2', autorun: false });
    try {
      const outcomes = new Map([
        [wouldDelete, { outcome: 'would-delete', latenessMs: 5 }],
        [accepted, { outcome: 'accepted', latenessMs: 5 }],
        [absent, { outcome: 'already-absent' }],
        [skipped, { outcome: 'skipped', reason: 'not-selected' }],
      ]);
      for (const uid of ids) {
        await q.enqueue(due(uid));
        const job = await worker.getNextJob(`t-${uid}`);
        await job?.moveToCompleted(outcomes.get(job.id ?? ''), `t-${uid}`, false);
      }
      for (const uid of ids) expect(await q.bullQueue.getJobState(uid)).toBe('completed');
      // Still in dry run: the would-delete job stays (the pod is not re-run every reconcile).
      expect(await q.enqueue(due(wouldDelete), { dryRun: true })).toBe('exists');
      expect(await q.enqueue(due(accepted))).toBe('exists');
      expect(await q.enqueue(due(absent))).toBe('exists');
      // Dry run switched off: a new job in its place, due at once.
      expect(await q.enqueue(due(wouldDelete), { dryRun: false })).toBe('replaced');
      expect(await q.bullQueue.getJobState(wouldDelete)).toBe('waiting');
      expect(await q.enqueue(due(wouldDelete))).toBe('exists');
      // A pod skipped when its job ran (relabelled, say) and eligible again gets a new job.
      expect(await q.enqueue(due(skipped))).toBe('replaced');
      // A tombstone still wins over a finished job.
      const tombed = '8e4f2c3d-1a5b-4c6d-9e7f-000000000021';
      await q.enqueue(due(tombed));
      const job = await worker.getNextJob('t-tomb');
      await job?.moveToCompleted({ outcome: 'would-delete', latenessMs: 1 }, 't-tomb', false);
      await q.cancel(tombed);
      expect(await q.enqueue(due(tombed))).toBe('tombstoned');
    } finally {
      await worker.close(true);
    }
  });
});

describe('a later job brought forward (the reconcile of a leader whose retention is shorter)', () => {
  it('earlier: a delayed job due later moves to the new deadline, delay and stored deadline; never later; without the option nothing moves', async () => {
    const q = replicaQueue('fw1');
    const uid = '0b1c1a52-2c4e-4c55-9a0e-00000000f001';
    const now = Date.now();
    const at = async () => {
      const score = Number(await conns[0]?.zscore(q.bullQueue.toKey('delayed'), uid));
      return {
        dueMs: Math.floor(score / 0x1000),
        deadlineMs: (await q.bullQueue.getJob(uid))?.data.deadlineMs,
      };
    };
    // Enqueued by a replica that keeps pods an hour.
    expect(await q.enqueue({ ...data(uid), deadlineMs: now + 3_600_000 })).toBe('added');
    const soon = now + 5_000;
    expect(await q.enqueue({ ...data(uid), deadlineMs: soon })).toBe('exists');
    expect((await at()).deadlineMs).toBe(now + 3_600_000);
    expect(await q.enqueue({ ...data(uid), deadlineMs: soon }, { earlier: true })).toBe('earlier');
    const moved = await at();
    expect(moved.deadlineMs).toBe(soon);
    expect(Math.abs(moved.dueMs - soon)).toBeLessThan(1000);
    // Never later, and not for a difference under a second.
    expect(await q.enqueue({ ...data(uid), deadlineMs: now + 3_600_000 }, { earlier: true })).toBe('exists');
    expect(await q.enqueue({ ...data(uid), deadlineMs: soon - 500 }, { earlier: true })).toBe('exists');
    expect((await at()).deadlineMs).toBe(soon);
    expect(await q.bullQueue.getDelayedCount()).toBe(1);
    await q.close();
  });
});
