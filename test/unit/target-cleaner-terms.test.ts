/**
 * The term transitions of a target cleaner (src/cleaner/target-cleaner.ts, src/cleaner/leader-terms.ts) with
 * fakes of the informer, the leadership, the queue and the worker, typed against the same interfaces: the
 * order of sync → reconcile → run, a term lost at each step, a re-election while the old worker closes,
 * shutdown during a term, the informer-sync timeout, and the informer-down cache trust.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { SelfCheckSettings } from '../../src/cleaner/self-check.ts';
import { createTargetCleaner } from '../../src/cleaner/target-cleaner.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import type { PodEventHandler, PodInformer } from '../../src/kube/pod-informer.ts';
import type { CleanupQueue, StoredJobData } from '../../src/queue/cleanup-queue.ts';
import type { QueueConsumer, QueueConsumerOptions } from '../../src/queue/queue-consumer.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';
import { drivenLeadership } from '../helpers/driven-leadership.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

const SELECTOR = parseLabelSelector('spark-role=driver');

/** A terminated driver pod as the informer caches it. */
function pod(name: string): DriverPod {
  return {
    metadata: {
      name,
      namespace: 'spark',
      uid: `5e0c2f4a-6a1d-4d7e-9b1a-${name.padStart(12, '0')}`,
      resourceVersion: '7',
      labels: { 'spark-role': 'driver' },
    },
    status: { phase: 'Succeeded' },
  };
}

/** An informer whose first list completes when the test says so (`sync()`), and whose state the test sets. */
function fakeInformer(pods: DriverPod[]) {
  const first = Promise.withResolvers<void>();
  const state = {
    synced: false,
    stopped: false,
    downSinceMs: undefined as number | undefined,
    sync() {
      state.synced = true;
      first.resolve();
    },
  };
  const handlers: PodEventHandler[] = [];
  const informer: PodInformer = {
    addEventHandler: (h) => {
      handlers.push(h);
    },
    start: () => first.promise,
    async stop() {
      state.stopped = true;
      first.resolve();
    },
    get synced() {
      return state.synced;
    },
    get downSinceMs() {
      return state.downSinceMs;
    },
    restarts: 0,
    get: (name) => pods.find((p) => p.metadata?.name === name),
    list: () => pods,
  };
  return { informer, state, handlers };
}

/** A queue that records enqueues; `holdReconcile()` makes the next reconcile wait for `release()`. */
function fakeQueue() {
  const enqueued: string[] = [];
  let hold: PromiseWithResolvers<number> | undefined;
  const state = { reconciles: 0, closed: false };
  const queue: CleanupQueue = {
    bullQueue: {} as Queue<StoredJobData>,
    name: 'fake',
    keepFinishedMs: 60_000,
    async enqueue(data) {
      enqueued.push(data.pod);
      return 'added';
    },
    async cancel() {
      return 'none';
    },
    async unschedule() {
      return 'none';
    },
    async isTombstoned() {
      return false;
    },
    retryFailed() {
      state.reconciles += 1;
      return hold ? hold.promise : Promise.resolve(0);
    },
    async workerNames() {
      return [];
    },
    async close() {
      state.closed = true;
    },
  };
  return {
    queue,
    state,
    enqueued,
    holdReconcile() {
      hold = Promise.withResolvers<number>();
      return () => hold?.resolve(0);
    },
  };
}

/**
 * A worker that records its transitions. `holdClose()` makes the next `stop()` wait for `release()`: the
 * BullMQ close waiting for an in-flight job. `alive` counts BullMQ Workers in existence (running or closing).
 */
function fakeWorker() {
  const events: string[] = [];
  const state = {
    alive: 0,
    maxAlive: 0,
    running: false,
    deps: undefined as QueueConsumerOptions['deps'] | undefined,
    onProcessed: undefined as QueueConsumerOptions['onProcessed'],
  };
  let hold: PromiseWithResolvers<void> | undefined;
  const create = (opts: QueueConsumerOptions): QueueConsumer => {
    state.deps = opts.deps;
    state.onProcessed = opts.onProcessed;
    return {
      async run() {
        events.push('run');
        if (state.running) return;
        state.running = true;
        state.alive += 1;
        state.maxAlive = Math.max(state.maxAlive, state.alive);
      },
      async stop() {
        if (!state.running) return;
        events.push('close');
        state.running = false;
        await hold?.promise;
        hold = undefined;
        state.alive -= 1;
        events.push('closed');
      },
      get running() {
        return state.running;
      },
    };
  };
  return {
    create,
    events,
    state,
    holdClose() {
      hold = Promise.withResolvers<void>();
      return () => hold?.resolve();
    },
  };
}

/** A cleaner over the fakes, driven through its leadership. */
function setup(
  opts: {
    pods?: DriverPod[];
    informerSyncTimeoutMs?: number;
    monotonicNow?: () => number;
    selfCheck?: SelfCheckSettings;
  } = {},
) {
  const mem = memoryLogger();
  const inf = fakeInformer(opts.pods ?? [pod('a')]);
  const q = fakeQueue();
  const w = fakeWorker();
  const leadership = drivenLeadership();
  const cleaner = createTargetCleaner({
    handler: cleanupDriverPod,
    target: { cluster: 'c1', context: 'c', namespace: 'spark' },
    replicaId: 'r1',
    selector: SELECTOR,
    policy: 'ALL',
    appState: KYUUBI_STATE_DEFAULTS,
    retentionMs: 1000,
    recheck: 'cache',
    dryRun: false,
    concurrency: 1,
    reconcileIntervalMs: 3_600_000,
    queue: q.queue,
    connection: { set: async () => 'OK' } as unknown as Redis,
    prefix: 'unit',
    pods: {} as PodApi,
    informer: inf.informer,
    leadership,
    log: mem.log,
    now: Date.now,
    monotonicNow: opts.monotonicNow,
    informerSyncTimeoutMs: opts.informerSyncTimeoutMs,
    staleCacheAfterMs: 1000,
    createWorker: w.create,
    selfCheck: opts.selfCheck,
  });
  return { cleaner, lead: leadership, inf, q, w, lines: mem.lines };
}

/** Lets every pending promise callback run (the term queue is a promise chain). */
const settle = () => new Promise((r) => setImmediate(r));

describe('target cleaner: term transitions', () => {
  it('subscribes itself to the informer and the leadership it is given: no wiring by the caller', async () => {
    const { lead, inf, q, w } = setup();
    expect(inf.handlers).toHaveLength(1);
    for (const h of inf.handlers) h('added', pod('b'));
    await waitFor('the informer event enqueued', () => q.enqueued.includes('b'), 2000);
    inf.state.sync();
    lead.elect();
    await waitFor('the election reached the cleaner: worker runs', () => w.state.running, 2000);
  });

  it('elected → waits for the informer’s first list → run and reconcile; nothing consumes before the list', async () => {
    const { lead, inf, q, w } = setup();
    lead.elect();
    await settle();
    expect(q.state.reconciles).toBe(0);
    expect(w.events).toEqual([]);
    inf.state.sync();
    await waitFor('worker runs', () => w.state.running, 2000);
    expect(q.enqueued).toEqual(['a']);
    expect(q.state.reconciles).toBe(1);
    expect(w.events).toEqual(['run']);
  });

  it('a reconcile that does not end does not hold the worker: it runs beside it; lost → closed; the next term runs', async () => {
    const { lead, inf, q, w, lines } = setup();
    inf.state.sync();
    const release = q.holdReconcile();
    lead.elect();
    await waitFor('reconcile started', () => q.state.reconciles === 1, 2000);
    await waitFor('worker runs while the reconcile is held', () => w.state.running, 2000);
    lead.lose();
    await settle();
    await settle();
    expect(w.events).toEqual(['run', 'close', 'closed']);
    expect(lines.filter((l) => l.msg === 'stopped consuming')).toHaveLength(1);
    lead.elect();
    await waitFor('worker runs in the next term', () => w.state.running, 2000);
    expect(w.events).toEqual(['run', 'close', 'closed', 'run']);
    release();
  });

  it('lost → elected at once while the old worker is still closing → the new run waits for the close; one worker', async () => {
    const { lead, inf, w } = setup();
    inf.state.sync();
    lead.elect();
    await waitFor('first term runs', () => w.state.running, 2000);
    const releaseClose = w.holdClose();
    lead.lose();
    lead.elect();
    await settle();
    await settle();
    // The close is still in progress: the new term must not have started its worker yet.
    expect(w.events).toEqual(['run', 'close']);
    releaseClose();
    await waitFor('second term runs', () => w.state.running, 2000);
    expect(w.events).toEqual(['run', 'close', 'closed', 'run']);
    expect(w.state.alive).toBe(1);
    expect(w.state.maxAlive).toBe(1);
    expect(lead.counts).toMatchObject({ elected: 2, lost: 1 });
  });

  it('many flaps in a row end in the last state: leading → exactly one running worker', async () => {
    const { lead, inf, w } = setup();
    inf.state.sync();
    for (let i = 0; i < 5; i++) {
      lead.elect();
      lead.lose();
    }
    lead.elect();
    await waitFor('worker runs', () => w.state.running, 2000);
    await settle();
    expect(w.state.alive).toBe(1);
    expect(w.state.maxAlive).toBe(1);
    expect(w.events.filter((e) => e === 'run').length).toBe(1);
  });

  it('stop during a term → resigned, worker closed, informer and queue closed; a late elected runs nothing', async () => {
    const { cleaner, lead, inf, q, w } = setup();
    inf.state.sync();
    lead.elect();
    await waitFor('worker runs', () => w.state.running, 2000);
    await cleaner.stop();
    expect(lead.counts.resigned).toBe(1);
    expect(w.state.running).toBe(false);
    expect(w.state.alive).toBe(0);
    expect(inf.state.stopped).toBe(true);
    expect(q.state.closed).toBe(true);
    lead.elect();
    await settle();
    expect(w.events).toEqual(['run', 'close', 'closed']);
  });

  it('stop while the term waits for the informer → resolves without running anything', async () => {
    const { cleaner, lead, w } = setup();
    lead.elect();
    await settle();
    await cleaner.stop();
    expect(w.events).toEqual([]);
  });

  it('the informer never lists → a warning per timeout, no run; once it lists → reconcile and run', async () => {
    const { lead, inf, q, w, lines } = setup({ informerSyncTimeoutMs: 20 });
    const waiting = () =>
      lines.filter((l) => l.level === 'warn' && String(l.msg).startsWith('elected, but the informer'));
    lead.elect();
    await waitFor('two timeouts', () => waiting().length >= 2, 5000);
    expect(q.state.reconciles).toBe(0);
    expect(w.events).toEqual([]);
    expect(waiting()[0]).toMatchObject({ term: 1, restarts: 0 });
    inf.state.sync();
    await waitFor('worker runs', () => w.state.running, 2000);
    expect(q.state.reconciles).toBe(1);
  });

  it('lost while waiting for the informer → the wait ends at once; the next term waits afresh', async () => {
    const { lead, inf, w } = setup({ informerSyncTimeoutMs: 60_000 });
    lead.elect();
    await settle();
    lead.lose();
    lead.elect();
    await settle();
    expect(w.events).toEqual([]);
    inf.state.sync();
    await waitFor('worker runs', () => w.state.running, 2000);
    expect(w.events).toEqual(['run']);
  });
});

describe('target cleaner: cache trust with a dead informer', () => {
  it('down longer than staleCacheAfterMs (monotonic clock) → cacheUntrusted; one warn, one info when back', async () => {
    let clock = 5000;
    const { inf, w, lines } = setup({ monotonicNow: () => clock });
    const untrusted = () => w.state.deps?.cacheUntrusted?.();
    expect(untrusted()).toBe(false);
    inf.state.downSinceMs = 5000;
    clock = 6000; // down exactly the threshold: still trusted
    expect(untrusted()).toBe(false);
    clock = 6001;
    expect(untrusted()).toBe(true);
    clock = 9000;
    expect(untrusted()).toBe(true);
    inf.state.downSinceMs = undefined;
    expect(untrusted()).toBe(false);
    const warns = lines.filter((l) => String(l.msg).startsWith('informer down: its cache is not trusted'));
    expect(warns).toHaveLength(1);
    expect(warns[0]).toMatchObject({ level: 'warn', downForMs: 1001, staleAfterMs: 1000 });
    expect(lines.filter((l) => String(l.msg).startsWith('informer back'))).toHaveLength(1);
  });
});

describe('target cleaner: progress for the self-check', () => {
  it('every job fenced is no progress: the leader warns, steps down and reports the target not ready (stepped-down)', async () => {
    // Stuck after 300 ms, warned at 150 ms; the grace so long that no pod is overdue: only the fences count.
    const { cleaner, lead, inf, w, lines } = setup({
      selfCheck: { graceMs: 600_000, leaderStuckMs: 300, followerAlarmMs: 1_200_000, intervalMs: 20 },
    });
    inf.state.sync();
    await cleaner.start();
    lead.elect();
    await waitFor('worker runs', () => w.state.running, 2000);
    expect(cleaner.ready).toBe(true);
    // The worker's jobs come back fenced, one after another (a put-back every 250 ms, faster here).
    const jobs = setInterval(
      () =>
        w.state.onProcessed?.({ outcome: 'fenced', reason: 'lease may have expired: no recent keepalive' }),
      10,
    );
    try {
      await waitFor('stepped down', () => lead.counts.lost >= 1, 5000);
    } finally {
      clearInterval(jobs);
    }
    expect(lines.filter((l) => l.level === 'warn' && /every job fenced/.test(String(l.msg)))).toHaveLength(1);
    const stuck = lines.filter((l) => String(l.msg).startsWith('self-check: leader is stuck'));
    expect(stuck).toHaveLength(1);
    expect(String(stuck[0]?.why)).toMatch(/fenced on every job/);
    expect(cleaner.ready).toBe(false);
    expect(cleaner.notReadyReasons).toEqual(['stepped-down']);
    await cleaner.stop();
  });

  it('jobs that end (any outcome but fenced and aborted) are progress: no step-down', async () => {
    const { cleaner, lead, inf, w, lines } = setup({
      selfCheck: { graceMs: 600_000, leaderStuckMs: 300, followerAlarmMs: 1_200_000, intervalMs: 20 },
    });
    inf.state.sync();
    await cleaner.start();
    lead.elect();
    await waitFor('worker runs', () => w.state.running, 2000);
    const outcomes = [
      { outcome: 'fenced', reason: 'a handover' },
      { outcome: 'already-absent' },
      { outcome: 'aborted' },
      { outcome: 'accepted', latenessMs: 5 },
    ] as const;
    let n = 0;
    const jobs = setInterval(() => w.state.onProcessed?.(outcomes[n++ % outcomes.length]), 10);
    try {
      // Ten times the stuck threshold, in self-check periods.
      await waitFor('150 self-check periods', () => n >= 300, 30_000);
    } finally {
      clearInterval(jobs);
    }
    expect(lead.counts.lost).toBe(0);
    expect(lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
    expect(cleaner.ready).toBe(true);
    await cleaner.stop();
  });

  it('a lease lost and won back at once gives a leader that makes no progress no fresh grace; a step-down does', async () => {
    const mono = { t: 1_000_000 };
    const { cleaner, lead, inf, w, lines } = setup({
      monotonicNow: () => mono.t,
      selfCheck: { graceMs: 600_000, leaderStuckMs: 30_000, followerAlarmMs: 1_200_000, intervalMs: 20 },
    });
    inf.state.sync();
    await cleaner.start();
    lead.elect();
    await waitFor('worker runs', () => w.state.running, 2000);
    const fenced = () => w.state.onProcessed?.({ outcome: 'fenced', reason: 'no recent keepalive' });
    const stuckLines = () => lines.filter((l) => String(l.msg).startsWith('self-check: leader is stuck'));
    // Fenced for 20 s, then the lease is lost and won back 1 s later: fenced 10 s more is 30 s in all.
    fenced();
    mono.t += 20_000;
    fenced();
    lead.lose('lease lost');
    mono.t += 1000;
    lead.elect();
    await waitFor('worker runs again', () => w.state.running, 2000);
    fenced();
    mono.t += 9000;
    fenced();
    await waitFor('stepped down, 30 s after the first fence', () => stuckLines().length === 1, 5000);
    expect(String(stuckLines()[0]?.why)).toMatch(/fenced on every job for 30000 ms/);
    // Elected again (as when no other replica is ready): a full grace from this term's start.
    lead.elect();
    await waitFor('worker runs in the third term', () => w.state.running, 2000);
    fenced();
    mono.t += 29_000;
    fenced();
    // The self-check has judged this: it warned about this stretch of fences (10 s and more), not stuck.
    const warned = () => lines.filter((l) => /every job fenced/.test(String(l.msg)));
    await waitFor('the warning of the third term', () => warned().length === 1, 5000);
    expect(warned()[0]).toMatchObject({ fencedMs: 29_000 });
    expect(stuckLines()).toHaveLength(1);
    await cleaner.stop();
  });
});
