/**
 * The enqueue side of a target cleaner (src/cleaner/target-cleaner.ts) with fakes of the informer, the queue and
 * the worker: the deadline a pod is enqueued with (finish times that cannot be one, a stand-in on the API
 * server's clock), a pod relabelled out of the selector and straight back in, and the per-UID memory a
 * DELETE leaves behind.
 */
import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createTargetCleaner } from '../../src/cleaner/target-cleaner.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import type { PodEventHandler, PodInformer } from '../../src/kube/pod-informer.ts';
import type { CleanupQueue, EnqueueOptions, StoredJobData } from '../../src/queue/cleanup-queue.ts';
import type { QueueConsumer, QueueConsumerOptions } from '../../src/queue/queue-consumer.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';
import { drivenLeadership } from '../helpers/driven-leadership.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

const NOW = Date.parse('2026-12-01T10:00:00Z');
const RETENTION_MS = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();
const uidOf = (name: string) =>
  `5e0c2f4a-6a1d-4d7e-9b1a-${createHash('sha256').update(name).digest('hex').slice(0, 12)}`;

/** A terminated, selected driver pod created 10 minutes ago; `finishedAt` of its driver container if given. */
function pod(name: string, over: { finishedAt?: string; labels?: Record<string, string> } = {}): DriverPod {
  return {
    metadata: {
      name,
      namespace: 'spark',
      uid: uidOf(name),
      resourceVersion: '7',
      labels: over.labels ?? { 'spark-role': 'driver' },
      creationTimestamp: iso(NOW - 600_000),
    },
    status: {
      phase: 'Succeeded',
      ...(over.finishedAt
        ? {
            containerStatuses: [
              {
                name: 'spark-kubernetes-driver',
                state: { terminated: { exitCode: 0, finishedAt: over.finishedAt } },
              },
            ],
          }
        : {}),
    },
  };
}

function setup(opts: { stampNow?: () => number; now?: () => number } = {}) {
  const mem = memoryLogger();
  const cached: DriverPod[] = [];
  const handlers: PodEventHandler[] = [];
  const informer: PodInformer = {
    addEventHandler: (h) => {
      handlers.push(h);
    },
    start: async () => undefined,
    stop: async () => undefined,
    synced: true,
    downSinceMs: undefined,
    restarts: 0,
    get: (name) => cached.find((p) => p.metadata?.name === name),
    list: () => cached,
  };
  const calls: string[] = [];
  const enqueued: { data: CleanupJobData; options?: EnqueueOptions }[] = [];
  let holdUnschedule: PromiseWithResolvers<void> | undefined;
  const queue: CleanupQueue = {
    bullQueue: {} as Queue<StoredJobData>,
    name: 'fake',
    keepFinishedMs: 60_000,
    async enqueue(data, options) {
      calls.push(`enqueue ${data.pod}`);
      enqueued.push({ data, options });
      return 'added';
    },
    async cancel(uid) {
      calls.push(`cancel ${uid}`);
      return 'none';
    },
    async unschedule(uid) {
      calls.push(`unschedule ${uid}`);
      await holdUnschedule?.promise;
      calls.push(`unscheduled ${uid}`);
      return 'removed';
    },
    isTombstoned: async () => false,
    retryFailed: async () => 0,
    workerNames: async () => [],
    close: async () => undefined,
  };
  let deps: QueueConsumerOptions['deps'] | undefined;
  const createWorker = (o: QueueConsumerOptions): QueueConsumer => {
    deps = o.deps;
    return { run: async () => undefined, stop: async () => undefined, running: false };
  };
  const deleted: string[] = [];
  const pods: PodApi = {
    get: async () => undefined,
    async delete(_ns, name) {
      deleted.push(name);
      return 'accepted';
    },
  };
  const cleaner = createTargetCleaner({
    handler: cleanupDriverPod,
    target: { cluster: 'c1', context: 'c', namespace: 'spark' },
    replicaId: 'r1',
    selector: parseLabelSelector('spark-role=driver'),
    policy: 'ALL',
    appState: KYUUBI_STATE_DEFAULTS,
    retentionMs: RETENTION_MS,
    recheck: 'resource-version',
    dryRun: false,
    concurrency: 1,
    reconcileIntervalMs: 3_600_000,
    queue,
    connection: {} as Redis,
    prefix: 'unit',
    pods,
    informer,
    leadership: drivenLeadership(),
    log: mem.log,
    now: opts.now ?? (() => NOW),
    stampNow: opts.stampNow,
    createWorker,
  });
  const observe = (event: 'added' | 'updated' | 'deleted', p: DriverPod) => {
    for (const h of handlers) h(event, p);
  };
  return {
    cleaner,
    cached,
    calls,
    enqueued,
    deleted,
    lines: mem.lines,
    observe,
    get deps() {
      if (!deps) throw new Error('no worker created');
      return deps;
    },
    holdUnschedule() {
      holdUnschedule = Promise.withResolvers<void>();
      return () => holdUnschedule?.resolve();
    },
  };
}

describe('the deadline a pod is enqueued with', () => {
  it('finishedAt 1970-01-01 on a pod created today → not a finish time: first seen terminal + retention, warned once', async () => {
    const t = setup();
    const p = pod('old', { finishedAt: '1970-01-01T00:00:00Z' });
    t.cached.push(p);
    t.observe('added', p);
    await waitFor('enqueued', () => t.enqueued.length === 1, 2000);
    expect(t.enqueued[0]?.data.deadlineMs).toBe(NOW + RETENTION_MS);
    // Every reconcile enqueues it again (a no-op in Redis): the same deadline, no second warning.
    await t.cleaner.reconcile();
    await t.cleaner.reconcile();
    expect(t.enqueued.map((e) => e.data.deadlineMs)).toEqual(Array(3).fill(NOW + RETENTION_MS));
    const warned = t.lines.filter((l) => String(l.msg).startsWith('finishedAt is not plausible'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({
      level: 'warn',
      pod: 'old',
      uid: uidOf('old'),
      finishedAt: '1970-01-01T00:00:00.000Z',
      why: 'before creationTimestamp',
    });
  });

  it('finishedAt 9999-12-31 → not a finish time either (never due, never overdue): first seen terminal + retention', async () => {
    const t = setup();
    t.observe('added', pod('far', { finishedAt: '9999-12-31T00:00:00Z' }));
    await waitFor('enqueued', () => t.enqueued.length === 1, 2000);
    expect(t.enqueued[0]?.data.deadlineMs).toBe(NOW + RETENTION_MS);
    expect(t.lines.find((l) => String(l.msg).startsWith('finishedAt is not plausible'))).toMatchObject({
      why: 'too far in the future',
    });
  });

  it('finishedAt a minute ahead (a node clock ahead) → kept: the cleanup is deferred, not refused', async () => {
    const t = setup();
    t.observe('added', pod('ahead', { finishedAt: iso(NOW + 60_000) }));
    await waitFor('enqueued', () => t.enqueued.length === 1, 2000);
    expect(t.enqueued[0]?.data.deadlineMs).toBe(NOW + 60_000 + RETENTION_MS);
  });

  it('no finishedAt: first seen terminal by the API server’s clock, not by a wall clock that lags behind it', async () => {
    const t = setup({ now: () => NOW - 30_000, stampNow: () => NOW });
    t.observe('added', pod('evicted'));
    await waitFor('enqueued', () => t.enqueued.length === 1, 2000);
    expect(t.enqueued[0]?.data.deadlineMs).toBe(NOW + RETENTION_MS);
  });

  it("the leader's reconcile asks the queue to bring a later job forward to its deadline (a lowered retention), informer events do not", async () => {
    const t = setup();
    const p = pod('a', { finishedAt: iso(NOW - 1000) });
    t.cached.push(p);
    t.observe('added', p);
    await waitFor('enqueued', () => t.enqueued.length === 1, 2000);
    await t.cleaner.reconcile();
    expect(t.enqueued.map((e) => e.options?.earlier ?? false)).toEqual([false, true]);
  });
});

describe('a pod relabelled out of the selector and straight back in', () => {
  it('the re-add waits for the unschedule in flight, then enqueues: the pod has a job again', async () => {
    const t = setup();
    const p = pod('back', { finishedAt: iso(NOW - 1000) });
    t.observe('added', p);
    await waitFor('first enqueue', () => t.enqueued.length === 1, 2000);
    const release = t.holdUnschedule();
    // The label-selected watch: DELETED (no deletionTimestamp) as it leaves, ADDED as it comes back.
    t.observe('deleted', { ...p, metadata: { ...p.metadata, labels: {} } });
    t.observe('added', p);
    await waitFor('the unschedule sent', () => t.calls.includes(`unschedule ${uidOf('back')}`), 2000);
    release();
    await waitFor('enqueued again', () => t.enqueued.length === 2, 2000);
    expect(t.calls).toEqual([
      'enqueue back',
      `unschedule ${uidOf('back')}`,
      `unscheduled ${uidOf('back')}`,
      'enqueue back',
    ]);
  });
});

describe('what a DELETE leaves in memory', () => {
  it("a UID this replica's informer never cached → nothing kept once its DELETE is answered", async () => {
    const t = setup();
    const uid = uidOf('ghost');
    expect(await t.deps.pods.delete('spark', 'ghost', { uid })).toBe('accepted');
    expect(t.deleted).toEqual(['ghost']);
    expect(t.cleaner.trackedUids).toBe(0);
  });

  it('a pod it deleted: its DELETED event costs no cancel round trip, and it is forgotten', async () => {
    const t = setup();
    const p = pod('mine', { finishedAt: iso(NOW - 120_000) });
    t.cached.push(p);
    t.observe('added', p);
    await waitFor('enqueued', () => t.enqueued.length === 1, 2000);
    const uid = uidOf('mine');
    expect(await t.deps.pods.delete('spark', 'mine', { uid, resourceVersion: '7' })).toBe('accepted');
    const deleting = { ...p, metadata: { ...p.metadata, deletionTimestamp: iso(NOW) } };
    t.observe('updated', deleting);
    t.cached.splice(0);
    t.observe('deleted', deleting);
    await waitFor('forgotten', () => t.cleaner.trackedUids === 0, 2000);
    expect(t.calls.filter((c) => c.startsWith('cancel'))).toEqual([]);
  });
});
