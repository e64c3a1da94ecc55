/**
 * One target cleaner (src/cleaner/target-cleaner.ts) on real parts: real Redis, the sandbox API server with
 * its fault injection, our informer, pod API and BullMQ worker. The leadership is a double the test drives
 * (test/helpers/driven-leadership.ts), so that a loss and a re-election can be made to happen at once, as
 * etcd does when a lease is lost and re-granted. Assertions count DELETE requests per pod in the sandbox's
 * request log.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { type LocalService, startRedis } from '../../harness/sandbox/local-services.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import {
  createTargetCleaner,
  type TargetCleaner,
  type TargetCleanerOptions,
} from '../../src/cleaner/target-cleaner.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { RecheckMode } from '../../src/config/schema.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import { trimPod } from '../../src/kube/driver-pod.ts';
import { createKubeHttp, type KubeHttp } from '../../src/kube/kube-http.ts';
import { createPodApi, type PodApi } from '../../src/kube/pod-api.ts';
import { createPodInformer } from '../../src/kube/pod-informer.ts';
import { createRateLimiter } from '../../src/kube/rate-limiter.ts';
import { type CleanupQueue, createCleanupQueue, jobDataFor } from '../../src/queue/cleanup-queue.ts';
import { createQueueConsumer } from '../../src/queue/queue-consumer.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';
import { type DrivenLeadership, drivenLeadership } from '../helpers/driven-leadership.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

const SELECTOR = 'spark-role=driver,kyuubi-unique-tag';
const CONTEXT = 'tc';

let redis: LocalService;
let server: SandboxApiServer;
let http: KubeHttp;
let pods: PodApi;
const connections: Redis[] = [];
const unlimited = createRateLimiter({ qps: 1000, burst: 1000, monotonicNow: () => performance.now() });
/** Cleaners of the current test, stopped after it whatever happened. */
const running: TargetCleaner[] = [];

beforeAll(async () => {
  [redis, server] = await Promise.all([startRedis(), startSandboxApiServer({ contextName: CONTEXT })]);
  http = createKubeHttp({ context: CONTEXT, server: server.url, tls: {}, headers: async () => ({}) });
  pods = createPodApi({ http, limiter: unlimited });
});
afterEach(async () => {
  server.faults.clear();
  await Promise.all(running.splice(0).map((c) => c.stop()));
});
afterAll(async () => {
  for (const c of connections) c.disconnect();
  await http?.close();
  await server?.close();
  await redis?.stop();
});

function connect(): Redis {
  const c = new Redis(redis.url, { maxRetriesPerRequest: null });
  connections.push(c);
  return c;
}

/** A terminated, selected driver pod that finished a minute ago (its deadline has passed). */
function createDriver(namespace: string, appName: string): V1Pod {
  const nowMs = server.clock.now() - 60_000;
  return server.pods.create(sparkDriverPod({ namespace, appName, phase: 'Succeeded', nowMs }));
}

const uidOf = (p: V1Pod) => p.metadata?.uid ?? '';
const nameOf = (p: V1Pod) => p.metadata?.name ?? '';
const deletesOf = (p: V1Pod) => server.requests.deletesByUid().get(uidOf(p)) ?? [];
const gone = (p: V1Pod) =>
  server.pods.get(p.metadata?.namespace ?? '', nameOf(p))?.metadata?.uid !== uidOf(p);
const podPath = (ns: string, name = '') => `^/api/v1/namespaces/${ns}/pods${name ? `/${name}` : ''}$`;

/** Starts a cleaner of one namespace over the sandbox and Redis, led by a double the test drives. */
async function startCleaner(
  namespace: string,
  recheck: RecheckMode,
  extra: Partial<TargetCleanerOptions> = {},
): Promise<{
  cleaner: TargetCleaner;
  lead: DrivenLeadership;
  queue: CleanupQueue;
  lines: Record<string, unknown>[];
}> {
  const mem = memoryLogger();
  const target = { cluster: 'tc', context: CONTEXT, namespace };
  const log = mem.log.child(target);
  const connection = connect();
  const queue = createCleanupQueue({
    target,
    connection,
    prefix: namespace,
    tombstoneTtlMs: 60_000,
    log,
    now: Date.now,
  });
  const lead = drivenLeadership();
  const cleaner = createTargetCleaner({
    handler: cleanupDriverPod,
    target,
    replicaId: `${namespace}-r1`,
    selector: parseLabelSelector(SELECTOR),
    policy: 'ALL',
    appState: KYUUBI_STATE_DEFAULTS,
    retentionMs: 1000,
    recheck,
    dryRun: false,
    concurrency: 4,
    reconcileIntervalMs: 3_600_000,
    queue,
    connection,
    prefix: namespace,
    pods,
    log,
    now: Date.now,
    backoffMs: 200,
    maxBackoffMs: 2000,
    informer: createPodInformer({
      http,
      limiter: unlimited,
      namespace,
      labelSelector: SELECTOR,
      log,
      now: Date.now,
      backoffMs: 100,
      maxBackoffMs: 500,
    }),
    leadership: lead,
    ...extra,
  });
  running.push(cleaner);
  await cleaner.start();
  return { cleaner, lead, queue, lines: mem.lines };
}

describe('term transitions (real worker, Redis, sandbox)', () => {
  it('lost and re-elected at once while a job is in flight → the new term consumes; the pod is deleted once', async () => {
    const ns = 'tc-flap';
    // recheck live: the job is held in its GET (a slow answer), which the loss aborts before any DELETE.
    const { lead, queue, lines } = await startCleaner(ns, 'live');
    const pod = createDriver(ns, 'held');
    await waitFor('job enqueued', async () => (await queue.bullQueue.getJob(uidOf(pod))) !== undefined);
    server.faults.inject({ verb: 'get', path: podPath(ns, nameOf(pod)), latencyMs: 30_000, count: 1 });
    const getsBefore = server.requests.countsByVerb().get ?? 0;
    lead.elect();
    await waitFor('job in flight in its GET', async () => {
      const inGet = (server.requests.countsByVerb().get ?? 0) > getsBefore;
      return inGet && (await queue.bullQueue.getActiveCount()) === 1;
    });
    // Re-elected within the same tick: far under 200 ms, while the old worker is still closing.
    lead.lose('lease lost (test)');
    lead.elect();
    await waitFor('pod deleted by the new term', () => gone(pod), 30_000);
    expect(deletesOf(pod)).toEqual([200]);
    // The new term keeps consuming: a pod finishing afterwards is deleted too, once.
    const later = createDriver(ns, 'later');
    await waitFor('later pod deleted', () => gone(later), 30_000);
    expect(deletesOf(later)).toEqual([200]);
    expect(lead.counts).toMatchObject({ elected: 2, lost: 1 });
    // Each delete line names the term that sent it and how long after its election.
    const deleted = lines.filter((l) => l.msg === 'driver pod deleted');
    expect(deleted.map((l) => [l.pod, l.term])).toEqual([
      [nameOf(pod), 2],
      [nameOf(later), 2],
    ]);
    for (const l of deleted) expect(l.sinceElectionMs).toEqual(expect.any(Number));
  }, 60_000);

  it('worker: run() while a stop() is closing → a Worker runs once the close has finished', async () => {
    const worker = createQueueConsumer({
      handler: cleanupDriverPod,
      target: { cluster: 'tc', context: CONTEXT, namespace: 'tc-worker' },
      connection: connect(),
      prefix: 'tc-worker',
      concurrency: 1,
      replicaId: 'w1',
      keepFinishedMs: 60_000,
      log: memoryLogger().log,
      deps: {
        pods,
        cached: () => undefined,
        recheck: 'live',
        fence: async () => undefined,
        stillLeader: () => true,
        selector: parseLabelSelector(SELECTOR),
        policy: 'ALL',
        retentionMs: 0,
        dryRun: false,
        now: Date.now,
      },
    });
    await worker.run();
    const closing = worker.stop('leadership lost');
    const rerun = worker.run();
    await Promise.all([closing, rerun]);
    expect(worker.running).toBe(true);
    await worker.stop('test over');
    expect(worker.running).toBe(false);
  });
});

describe('a dead informer (sandbox list/watch faults)', () => {
  it('the first list keeps failing → a warning per sync timeout, no worker; once it lists → cleaned once', async () => {
    const ns = 'tc-nosync';
    server.faults.inject({ verb: 'list', path: podPath(ns), status: 500 });
    const pod = createDriver(ns, 'unsynced');
    const { lead, queue, lines } = await startCleaner(ns, 'resource-version', { informerSyncTimeoutMs: 300 });
    lead.elect();
    const waiting = () =>
      lines.filter((l) => l.level === 'warn' && String(l.msg).startsWith('elected, but the informer'));
    await waitFor('two sync-timeout warnings', () => waiting().length >= 2);
    expect(await queue.workerNames()).toEqual([]);
    expect(deletesOf(pod)).toEqual([]);
    expect(waiting()[0]).toMatchObject({ context: CONTEXT, namespace: ns, term: 1 });
    expect(waiting()[1]?.restarts).toBeGreaterThanOrEqual(1);
    server.faults.clear();
    await waitFor('pod deleted after the first list', () => gone(pod), 30_000);
    expect(deletesOf(pod)).toEqual([200]);
  }, 60_000);

  it.each<RecheckMode>(['cache', 'resource-version'])(
    'recheck %s: informer down past staleCacheAfterMs → live GET re-check: a relabelled pod gets no DELETE, a pod it never saw is cleaned',
    async (recheck) => {
      const ns = `tc-dead-${recheck}`;
      const { cleaner, lead, queue, lines } = await startCleaner(ns, recheck, { staleCacheAfterMs: 300 });
      const relabelled = createDriver(ns, 'relabelled');
      await waitFor(
        'job enqueued',
        async () => (await queue.bullQueue.getJob(uidOf(relabelled))) !== undefined,
      );
      // The informer's list and watch now fail (RBAC or the watch path broken); end the open watch.
      server.faults.inject({ verb: 'list', path: podPath(ns), status: 500 });
      server.faults.inject({ verb: 'watch', path: podPath(ns), status: 500 });
      server.dropWatches();
      await waitFor('informer down for over 300 ms', () => {
        const since = cleaner.informer.downSinceMs;
        return since !== undefined && performance.now() - since > 600;
      });
      // Unseen by the informer: the pod leaves the selector, and another driver finishes, enqueued by
      // another replica whose informer works.
      const current = server.pods.get(ns, nameOf(relabelled)) as V1Pod;
      delete current.metadata?.labels?.['kyuubi-unique-tag'];
      server.pods.update(current);
      const unseen = createDriver(ns, 'unseen');
      const times = { deadlineMs: Date.now() - 1000, finishedAtMs: Date.now() - 2000 };
      expect(await queue.enqueue(jobDataFor(trimPod(unseen), cleaner.target, times, 'other-replica'))).toBe(
        'added',
      );
      lead.elect();
      await waitFor('both jobs finished', async () => {
        const states = await Promise.all(
          [relabelled, unseen].map((p) => queue.bullQueue.getJobState(uidOf(p))),
        );
        return states.every((s) => s === 'completed');
      });
      expect(deletesOf(relabelled)).toEqual([]);
      expect(gone(relabelled)).toBe(false);
      expect((await queue.bullQueue.getJob(uidOf(relabelled)))?.returnvalue).toEqual({
        outcome: 'skipped',
        reason: 'not-selected',
      });
      expect(deletesOf(unseen)).toEqual([200]);
      expect(gone(unseen)).toBe(true);
      expect(
        lines.filter((l) => String(l.msg).startsWith('informer down: its cache is not trusted')),
      ).toHaveLength(1);
    },
    60_000,
  );
});

describe('Redis loses its data while the informer lags', () => {
  it.each<RecheckMode>(['resource-version', 'cache'])(
    'recheck %s: pods deleted, watch held (cache stale, trusted), Redis data lost (FLUSHALL), reconciled in the same and a new term → each pod DELETEd once',
    async (recheck) => {
      const ns = `tc-redis-lost-${recheck}`;
      // The cache stays trusted throughout (a dropped watch restarted at once is no outage).
      const { cleaner, lead, queue } = await startCleaner(ns, recheck, { staleCacheAfterMs: 60_000 });
      const drivers = [1, 2, 3].map((i) => createDriver(ns, `lost-${i}`));
      await waitFor('pods in the cache', () => drivers.every((p) => cleaner.informer.get(nameOf(p))));
      // A slow API server: the informer's next watch is held, so the deletions reach its cache late. A pending
      // watch is no failure: the informer is not down, its cache stays trusted.
      // Held past the test's end (a loaded machine takes well over 30 s here), and a relist held as well.
      server.faults.inject({ verb: 'watch', path: podPath(ns), latencyMs: 300_000 });
      server.faults.inject({ verb: 'list', path: podPath(ns), latencyMs: 300_000 });
      server.dropWatches();
      lead.elect();
      await waitFor('pods deleted', () => drivers.every(gone), 30_000);
      await waitFor('jobs completed', async () => {
        const states = await Promise.all(drivers.map((p) => queue.bullQueue.getJobState(uidOf(p))));
        return states.every((s) => s === 'completed');
      });
      expect(
        drivers.every((p) => cleaner.informer.get(nameOf(p))?.metadata?.deletionTimestamp === undefined),
      ).toBe(true);

      // Redis loses its data (FLUSHALL stands in for a restart without persistence): jobs and tombstones go.
      await connect().flushall();
      // The same term's reconcile enqueues the pods again from the stale cache; the worker runs them.
      expect(await cleaner.reconcile()).toBe(drivers.length);
      const outcomes = async () =>
        Promise.all(drivers.map(async (p) => (await queue.bullQueue.getJob(uidOf(p)))?.returnvalue?.outcome));
      await waitFor('re-enqueued jobs finished', async () =>
        (await outcomes()).every((o) => o !== undefined),
      );
      expect(await outcomes()).toEqual(drivers.map(() => 'already-deleting'));
      // A new term of the same replica (its own reconcile at the start) after Redis is lost again.
      await connect().flushall();
      lead.lose('lease lost (test)');
      lead.elect();
      await waitFor('new term reconciled and ran the jobs', async () => (await outcomes()).every((o) => o));
      expect(await outcomes()).toEqual(drivers.map(() => 'already-deleting'));
      for (const p of drivers) expect(deletesOf(p)).toEqual([200]);
    },
    90_000,
  );
});

describe('a reconcile slower than the self-check threshold (real worker, Redis, sandbox)', () => {
  it('jobs lost, the term reconciles one pod per 300 ms (6 s) with a 1 s stuck threshold → cleaning goes on, no step-down', async () => {
    const ns = 'tc-slow-reconcile';
    const drivers = Array.from({ length: 20 }, (_, i) => createDriver(ns, `slow-${i}`));
    // A queue double: every enqueue waits 300 ms first (a distant Redis, a large backlog).
    let slow = false;
    const slowly = (queue: CleanupQueue): CleanupQueue =>
      new Proxy(queue, {
        get(target, key, receiver) {
          if (key !== 'enqueue') return Reflect.get(target, key, receiver);
          return async (...args: Parameters<CleanupQueue['enqueue']>) => {
            if (slow) await new Promise((r) => setTimeout(r, 300));
            return target.enqueue(...args);
          };
        },
      });
    const connection = connect();
    const mem = memoryLogger();
    const target = { cluster: 'tc', context: CONTEXT, namespace: ns };
    const queue = createCleanupQueue({
      target,
      connection,
      prefix: ns,
      tombstoneTtlMs: 60_000,
      log: mem.log,
      now: Date.now,
    });
    const { cleaner, lead, lines } = await startCleaner(ns, 'live', {
      queue: slowly(queue),
      connection,
      selfCheck: { graceMs: 1000, leaderStuckMs: 1000, followerAlarmMs: 60_000, intervalMs: 100 },
    });
    await waitFor(
      'informer enqueued every pod',
      async () =>
        (await queue.bullQueue.getDelayedCount()) + (await queue.bullQueue.getWaitingCount()) ===
        drivers.length,
    );
    // Redis lost the jobs (the informer does not enqueue them again): only the term's reconcile brings them back.
    await queue.bullQueue.drain(true);
    slow = true;
    expect(cleaner.overdue().count).toBe(drivers.length);
    lead.elect();
    await waitFor('every driver deleted', () => drivers.every(gone), 30_000);
    for (const d of drivers) expect(deletesOf(d)).toEqual([200]);
    expect(lead.counts.lost).toBe(0);
    expect(lines.filter((l) => String(l.msg).startsWith('self-check: leader is stuck'))).toEqual([]);
  }, 60_000);
});

describe("a retention changed between replicas (the leader's own retention decides)", () => {
  /** The driver container's finishedAt of a sandbox pod, epoch ms. */
  const finishedAtOf = (p: V1Pod) =>
    Date.parse(String(p.status?.containerStatuses?.[0]?.state?.terminated?.finishedAt));
  /** The job of `p` as a replica with `retentionMs` enqueued it. */
  const enqueuedWith = (queue: CleanupQueue, namespace: string, p: V1Pod, retentionMs: number) =>
    queue.enqueue(
      jobDataFor(
        trimPod(p),
        { cluster: 'tc', context: CONTEXT, namespace },
        { deadlineMs: finishedAtOf(p) + retentionMs, finishedAtMs: finishedAtOf(p) },
        'replica-on-the-old-setting',
      ),
    );

  it('raised (1 s → 1 h): a job enqueued with the old deadline is due, yet the leader puts it back to finishedAt + 1 h; no DELETE', async () => {
    const ns = 'tc-retention-up';
    const { cleaner, lead, queue } = await startCleaner(ns, 'resource-version', { retentionMs: 3_600_000 });
    const p = createDriver(ns, 'kept');
    expect(await enqueuedWith(queue, ns, p, 1000)).toBe('added');
    await waitFor('the pod in the cache', () => cleaner.informer.get(nameOf(p)));
    lead.elect();
    const storedDeadline = async () => (await queue.bullQueue.getJob(uidOf(p)))?.data.deadlineMs;
    await waitFor(
      'the job run and moved on',
      async () =>
        (await queue.bullQueue.getJobState(uidOf(p))) === 'completed' ||
        (await storedDeadline()) !== finishedAtOf(p) + 1000,
    );
    expect(deletesOf(p)).toEqual([]);
    expect(await queue.bullQueue.getJobState(uidOf(p))).toBe('delayed');
    expect(await storedDeadline()).toBe(finishedAtOf(p) + 3_600_000);
  });

  it('lowered (1 h → 1 s): the leader’s reconcile brings the job forward; the pod is deleted once, not an hour later', async () => {
    const ns = 'tc-retention-down';
    const { cleaner, lead, queue, lines } = await startCleaner(ns, 'resource-version');
    const p = createDriver(ns, 'due');
    expect(await enqueuedWith(queue, ns, p, 3_600_000)).toBe('added');
    // The term's reconcile (the periodic one is an hour away) must find the pod in the cache.
    await waitFor('the pod in the cache', () => cleaner.informer.get(nameOf(p)));
    lead.elect();
    await waitFor('pod deleted', () => gone(p), 15_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${lines.map((l) => JSON.stringify(l)).join('\n')}`);
    });
    expect(deletesOf(p)).toEqual([200]);
  });
});
