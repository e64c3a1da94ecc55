/**
 * The leader side of one target: what a replica does while it holds the target's leadership.
 *
 * A **term** runs from `elected` to `lost` (src/cleaner/leader-terms.ts: terms run strictly one after another,
 * a new term starts once the previous worker has closed). A term waits for the informer's first list, then runs
 * the **worker** (the BullMQ Worker of src/queue/queue-consumer.ts, with the handler and its DELETE path) and
 * the **reconcile** (enqueue what is missing, retry failed jobs) side by side, and reconciles periodically and
 * whenever the queue's Redis data is lost (src/cleaner/data-loss-watch.ts). Its end aborts in-flight jobs before
 * their DELETE and closes the worker.
 *
 * It also keeps what the self-check (src/cleaner/self-check.ts) judges a leader by: since when it leads, its
 * last progress, and a stretch of fenced jobs.
 */

import type { PodInformer } from '../kube/pod-informer.ts';
import type { Leadership } from '../leadership/leadership.ts';
import type { Logger } from '../log.ts';
import type { CleanupQueue } from '../queue/cleanup-queue.ts';
import type { DataMarker } from '../queue/data-marker.ts';
import type { TargetRef } from '../queue/job-identity.ts';
import {
  createQueueConsumer,
  type QueueConsumer,
  type QueueConsumerOptions,
} from '../queue/queue-consumer.ts';
import type { RedisClient } from '../queue/redis-client.ts';
import { type DecisionRules, decide } from '../rules/decision.ts';
import type { CleanupDeps, CleanupHandler } from '../rules/handler.ts';
import { sleep } from '../sleep.ts';
import type { TargetTelemetry } from '../telemetry/target-telemetry.ts';
import { createDataLossWatch, type DataLossWatchOptions } from './data-loss-watch.ts';
import type { FollowerSide } from './follower-side.ts';
import { createLeaderTerms, type Term, waitInTerm } from './leader-terms.ts';
import { findOverdue } from './overdue.ts';
import type { SelfCheckSubject } from './self-check.ts';

/** Dependencies and settings of {@link createLeaderSide}. */
export interface LeaderSideOptions {
  target: TargetRef;
  replicaId: string;
  rules: DecisionRules;
  /** Retention after a pod's finish time, ms. */
  retentionMs: number;
  concurrency: number;
  /** Period of the leader's full reconcile, ms. */
  reconcileIntervalMs: number;
  queue: CleanupQueue;
  handler: CleanupHandler;
  /** The handler's dependencies: the DELETE path (src/cleaner/delete-path.ts). */
  deletePath: CleanupDeps;
  connection: RedisClient;
  prefix: string;
  informer: PodInformer;
  leadership: Leadership;
  /** The follower side: the reconcile enqueues through it, and a refused job's pod is observed again. */
  follower: Pick<FollowerSide, 'enqueue' | 'requeueRefused' | 'firstSeenTerminalMs'>;
  log: Logger;
  /** Wall clock, epoch ms (BullMQ delays). */
  now: () => number;
  /** The clock that judges whether a pod is due, epoch ms (src/kube/server-clock.ts `dueNow`). */
  dueNow: () => number;
  /** Monotonic clock, ms. */
  monotonicNow: () => number;
  /** See `TargetCleanerOptions.informerSyncTimeoutMs`, ms. */
  informerSyncTimeoutMs: number;
  /**
   * A lease lost and won back within this many ms keeps its self-check count (the self-check's
   * `leaderStuckMs`).
   */
  leaderStuckMs: number;
  /** Called on every job that made progress: the stuck hold's evidence (src/cleaner/stuck-hold.ts). */
  onProgress: () => void;
  createWorker?: (opts: QueueConsumerOptions) => QueueConsumer;
  warnIfNotAlone?: boolean;
  backoffMs?: number;
  maxBackoffMs?: number;
  telemetry?: TargetTelemetry;
  dataMarker?: DataMarker;
  dataLossChecks?: Pick<
    DataLossWatchOptions,
    'intervalMs' | 'idleIntervalMs' | 'burstMs' | 'burstIntervalMs'
  >;
}

/** The leader side of one target. */
export interface LeaderSide {
  /** The leadership's `onElected`: starts a term (ends the current one first). */
  elected(): void;
  /** The leadership's `onLost`: ends the term, aborting in-flight jobs before their DELETE. */
  lost(reason: string): void;
  /** Runs one reconcile now; returns how many jobs it added or retried. @throws when Redis does not answer */
  reconcile(): Promise<number>;
  /** A self-check step-down: the next term, once this replica has shown progress again, gets a full grace. */
  forgetPreviousTerm(): void;
  /** What the self-check judges a leader by (monotonic ms). */
  readonly progress: Pick<SelfCheckSubject, 'leaderSinceMs' | 'lastProgressMs' | 'fenced' | 'workerRunning'>;
  /** Shutdown: no new term; `resign` hands the leadership over; resolves once the last term has ended. */
  stop(resign: () => Promise<void>): Promise<void>;
  /** True once `stop` was called: no term begins any more. */
  readonly stopped: boolean;
}

/** Creates the leader side of one target; subscribe `elected`/`lost` to its leadership. */
export function createLeaderSide(opts: LeaderSideOptions): LeaderSide {
  const { log, informer, leadership, monotonicNow } = opts;
  let stopped = false;
  /**
   * Monotonic ms, for the self-check: since when this replica leads (undefined when not) — this term's start,
   * or that of its previous term when that one was lost less than `leaderStuckMs` before this one began (a
   * leader stuck on its own fault, a starved event loop, also loses its lease: winning it back must not give it
   * a fresh grace each time; a self-check step-down does) — and its last progress: a job its worker processed
   * (any outcome but `fenced` and `aborted`) or a pod its reconcile handled.
   */
  let leaderSinceMs: number | undefined;
  /** The previous term: since when it led (as above) and when it ended, monotonic ms. */
  let previousTerm: { sinceMs: number; endedMs: number } | undefined;
  let lastProgressMs: number | undefined;
  /** Jobs fenced one after another with none making progress in between (the self-check). */
  let fenced: SelfCheckSubject['fenced'];

  const worker: QueueConsumer = (opts.createWorker ?? createQueueConsumer)({
    target: opts.target,
    connection: opts.connection,
    prefix: opts.prefix,
    concurrency: opts.concurrency,
    replicaId: opts.replicaId,
    keepFinishedMs: opts.queue.keepFinishedMs,
    log,
    backoffMs: opts.backoffMs,
    maxBackoffMs: opts.maxBackoffMs,
    telemetry: opts.telemetry,
    now: opts.now,
    monotonicNow,
    onRefused: (job) => opts.follower.requeueRefused(job),
    onProcessed: (outcome) => {
      const t = monotonicNow();
      // A fenced job is not progress (this leader cannot delete), nor an aborted one (its term ended).
      if (outcome?.outcome === 'fenced') {
        fenced = { sinceMs: fenced?.sinceMs ?? t, lastMs: t, reason: outcome.reason };
        return;
      }
      if (outcome?.outcome === 'aborted') return;
      lastProgressMs = t;
      fenced = undefined;
      opts.onProgress();
    },
    // A new term takes the jobs a frozen previous leader holds at once; fenced elections only (single-server
    // mode may run beside uncoordinated replicas, whose jobs are theirs).
    takeOverOnRun: !opts.warnIfNotAlone,
    handler: opts.handler,
    deps: opts.deletePath,
  });

  async function reconcile(): Promise<number> {
    let added = 0;
    const eligible = new Set<string>();
    for (const pod of informer.list()) {
      const decision = decide(pod, opts.rules);
      if (decision.action !== 'enqueue') continue;
      const uid = pod.metadata?.uid ?? '';
      eligible.add(uid);
      if ((await opts.follower.enqueue(pod, decision.state, 'reconcile')) === 'added') added += 1;
      // Progress for the self-check: a reconcile slower than its threshold (a large backlog, a distant Redis)
      // is work being done, not a stuck leader.
      lastProgressMs = monotonicNow();
    }
    const retried = await opts.queue.retryFailed((uid) => eligible.has(uid));
    log.info({ added, retried, pods: eligible.size }, 'reconciled');
    opts.telemetry?.reconciled({ added, retried });
    return added + retried;
  }

  /**
   * Local leadership only: warns when workers of other replicas consume the same queue (Redis CLIENT LIST
   * names), every 30 s while the term lasts. The first look waits (at most 10 s) until this replica's own
   * worker is listed, so that a replica started beside another one warns at once.
   */
  async function checkAlone(term: Term): Promise<void> {
    const firstLookBy = monotonicNow() + 10_000;
    while (!term.signal.aborted) {
      const names = new Set(await opts.queue.workerNames().catch(() => []));
      if (!names.has(opts.replicaId) && monotonicNow() < firstLookBy) {
        await sleep(200, term.signal, { unref: true });
        continue;
      }
      if (names.size > 1 && !term.signal.aborted) {
        log.warn(
          { workers: [...names] },
          'another worker consumes this queue: replicas are uncoordinated (configure etcdEndpoints or zookeeper)',
        );
      }
      await sleep(30_000, term.signal, { unref: true });
    }
  }

  /**
   * Waits for the informer's first list: reconcile needs the full list, and nothing may consume from an
   * unsynced cache. Each `informerSyncTimeoutMs` without it logs a warning, and the wait goes on (the
   * informer retries its list with backoff by itself) until it syncs or the term ends.
   * @returns true once synced; false when the term ended first (or the informer was stopped).
   */
  async function waitForSync(term: Term): Promise<boolean> {
    const since = monotonicNow();
    const synced = informer.start();
    for (;;) {
      const how = await waitInTerm(synced, term.signal, opts.informerSyncTimeoutMs);
      if (how === 'ended') return false;
      if (how === 'done') return informer.synced;
      log.warn(
        { term: term.id, waitedMs: Math.round(monotonicNow() - since), restarts: informer.restarts },
        'elected, but the informer has not listed the pods yet: not consuming; still waiting',
      );
    }
  }

  const reconcileFailed = (err: unknown) =>
    log.warn({ err: { message: (err as Error).message } }, 'reconcile failed');

  /** The reconcile in flight, if any: the periodic one does not start a second beside it. */
  let reconciling: Promise<unknown> | undefined;
  const reconcileOnce = () => {
    reconciling ??= reconcile()
      .catch(reconcileFailed)
      .finally(() => {
        reconciling = undefined;
      });
    return reconciling;
  };

  const dataLoss =
    opts.dataMarker &&
    createDataLossWatch({
      ...opts.dataLossChecks,
      marker: opts.dataMarker,
      dueSoon: (withinMs) =>
        findOverdue(informer.list(), {
          ...opts.rules,
          retentionMs: opts.retentionMs,
          graceMs: -withinMs,
          nowMs: opts.dueNow(),
          firstSeenTerminalMs: (uid) => opts.follower.firstSeenTerminalMs(uid),
          limit: 0,
        }).count > 0,
      onLoss: async (reason) => {
        opts.telemetry?.redisDataLost(reason);
        if (reason === 'master-changed' && leadership.isLeader && !stopped) {
          // A new master: BullMQ's Worker may still wait on the old one (its blocking command sent to a dead or
          // frozen node, BullMQ issues #3088, #4378). A new term closes it and starts a new one after its own
          // reconcile, in order with any leadership change (src/cleaner/leader-terms.ts).
          terms.elected();
          return;
        }
        await reconcile().catch(reconcileFailed);
      },
      log,
      monotonicNow,
    });

  /**
   * A term's start: sync, then run the worker and reconcile side by side, then the term's periodic reconcile
   * (and check). The worker does not wait for the reconcile: jobs already queued are due now, and the
   * reconcile only adds what is missing (idempotent, one job per UID), so a long reconcile — a large backlog,
   * a distant Redis — delays no cleanup. The data marker's baseline comes before the term's reconcile: a loss
   * after it is seen by the watch, one before it is healed by this reconcile.
   */
  async function beginTerm(term: Term): Promise<void> {
    const current = () => !term.signal.aborted && !stopped && leadership.isLeader;
    if (!(await waitForSync(term)) || !current()) return;
    await worker.run({ id: term.id, electedMs: term.electedMs });
    // Lost meanwhile: the term's end, queued next, closes the worker again.
    if (term.signal.aborted) return;
    // A reconcile stuck on a hung Redis is left to finish on its own (it only enqueues, which is idempotent).
    void (dataLoss ? dataLoss.baseline() : Promise.resolve()).catch(reconcileFailed).then(() => {
      if (dataLoss && !term.signal.aborted) void dataLoss.run(term.signal);
      return reconcileOnce();
    });
    const reconcileTimer = setInterval(() => {
      if (current()) void reconcileOnce();
    }, opts.reconcileIntervalMs);
    reconcileTimer.unref();
    term.signal.addEventListener('abort', () => clearInterval(reconcileTimer), { once: true });
    if (opts.warnIfNotAlone) void checkAlone(term);
  }

  /** A term's end (or a shutdown's): abort in-flight jobs before their DELETE and close the worker. */
  async function endTerm(term: Term | undefined, reason: string): Promise<void> {
    await worker.stop(stopped ? 'shutdown' : `leadership lost: ${reason}`);
    if (term && !stopped) log.info({ term: term.id, reason }, 'stopped consuming');
  }

  const terms = createLeaderTerms({
    begin: beginTerm,
    end: endTerm,
    onError: (err, step) =>
      log.error({ err: { message: (err as Error).message }, step }, 'leadership term transition failed'),
    monotonicNow,
  });

  return {
    elected() {
      if (stopped) return;
      const t = monotonicNow();
      const back = previousTerm && t - previousTerm.endedMs < opts.leaderStuckMs;
      leaderSinceMs = back && previousTerm ? previousTerm.sinceMs : t;
      if (!back) fenced = undefined;
      terms.elected();
    },
    lost(reason) {
      if (leaderSinceMs !== undefined) previousTerm = { sinceMs: leaderSinceMs, endedMs: monotonicNow() };
      leaderSinceMs = undefined;
      terms.lost(reason);
    },
    reconcile,
    forgetPreviousTerm() {
      previousTerm = undefined;
    },
    progress: {
      get leaderSinceMs() {
        return leaderSinceMs;
      },
      get lastProgressMs() {
        return lastProgressMs;
      },
      get fenced() {
        return fenced;
      },
      get workerRunning() {
        return worker.running;
      },
    },
    get stopped() {
      return stopped;
    },
    async stop(resign) {
      stopped = true;
      // Resigning ends the term through `lost`; ending it here too covers a leadership that was not leading
      // (a term still waiting for the informer) and is a no-op otherwise.
      await resign();
      terms.lost('shutdown');
      await terms.settled();
    },
  };
}
