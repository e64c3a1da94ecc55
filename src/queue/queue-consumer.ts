/**
 * The queue consumer of one target: the thin adapter between BullMQ and the cleanup handler
 * (workers/cleanup-driver-pod.ts, passed in as `handler`; "workers/" is the folder of job handlers, while here
 * a Worker is BullMQ's class that takes jobs from a queue). It runs a BullMQ Worker on a target's queue while
 * this replica leads, maps each {@link Outcome}
 * onto BullMQ, and writes the outcome's log line.
 *
 * - final outcomes → the job completes with the outcome as its return value;
 * - `failed` → throw: BullMQ retries with our backoff (exponential, jitter, at least `Retry-After`, at most
 *   `maxBackoffMs`);
 * - `not-yet`, `fenced`, `aborted` → back to delayed with `DelayedError`, which is not a failed attempt; a
 *   `not-yet` with the handler's own deadline stores it as the job's; an `aborted` whose DELETE had left
 *   unanswered marks the job for a live re-check (`liveRecheck`);
 * - a job whose stored data cannot be trusted is *refused* before the handler sees it: warned, removed, its
 *   pod re-enqueued from the informer (`onRefused`). It never completes: a completed job stands for its UID.
 *
 * Jobs store only part of the handler's {@link CleanupJobData} (see `StoredJobData`); the adapter rebuilds
 * it from the job's id, name and this worker's target.
 *
 * Idle, the worker costs Redis one fetch cycle per {@link IDLE_CHECKS}`.blockMs` and one stalled-jobs check per
 * `stalledIdleMs` (see there): followers have no Worker at all, so an idle target costs ~0.25 commands/s.
 *
 * Each `run()` (a new term) first takes over the jobs a previous leader still holds (`takeOverOnRun`,
 * src/queue/take-over.ts): a frozen leader's jobs are taken at once rather than when their locks lapse.
 *
 * BullMQ facts this relies on: delayed jobs are promoted only by a running Worker of the queue;
 * `close()` does not abort a running processor, so `stop()` calls `cancelAllJobs()` first, which aborts
 * each processor's AbortSignal. `run()` and `stop()` take effect one after another, in call order: a `run()`
 * made while a close is in progress starts a new Worker once the close has finished, so a leader re-elected
 * during the close still consumes (docs/failure-modes.md). A close waits at most
 * {@link CONSUMER_CLOSE_TIMEOUT_MS}: with Redis unreachable the old Worker finishes closing in the background, its
 * jobs in flight left to their locks (a job run twice meanwhile is harmless: fencing, re-check, `deleteOnce`).
 *
 * One file, long, because the Worker's lifecycle (run, take over, stalled checks, close) and the outcome mapping
 * share the Worker's state; the handler and the rules it applies live elsewhere (workers/, src/rules/).
 */

import { DelayedError, type Job, UnrecoverableError, Worker } from 'bullmq';
import { backoffMs } from '../backoff.ts';
import { FAILOVER_TIMERS } from '../failover-timers.ts';
import type { Logger } from '../log.ts';
import type { CleanupDeps, CleanupHandler } from '../rules/handler.ts';
import type { CleanupJobData } from '../rules/job-data.ts';
import type { Outcome } from '../rules/outcome.ts';
import { withTimeout } from '../with-timeout.ts';
import { cleanupJobDataOf, InvalidJobDataError, type StoredJobData } from './cleanup-queue.ts';
import { closingWorkerKeyPrefix, queueName, type TargetRef } from './job-identity.ts';
import { recordLastAccepted } from './last-accepted.ts';
import { createLockLossLog } from './lock-loss-log.ts';
import { logOutcome } from './outcome-log.ts';
import type { RedisClient } from './redis-client.ts';
import { markWorkerClosing, takeOverActiveJobs } from './take-over.ts';

/**
 * The leader's Worker's schedule on Redis while it has nothing to do, ms (with BullMQ's defaults an idle target
 * costs ~3 commands/s; docs/sizing.md). Measured on Redis 7 with BullMQ 6.7.0: one
 * fetch cycle (BZPOPMIN, then the moveToActive script) is 8 commands, one stalled-jobs check 7; at 60 s each an
 * idle target costs 0.25 commands/s (test/ops/redis-fleet-cost.test.ts).
 *
 * - `blockMs`: how long the Worker waits on its queue's marker before it looks again: BullMQ's `drainDelay`
 *   when no job is delayed, and the cap on the wait for the next delayed job (BullMQ caps it at 10 s;
 *   {@link CleanupBullWorker} at this). A longer wait delays no job: adding a job or a delayed job ZADDs the
 *   queue's marker (BullMQ's addStandardJob / addDelayedJob scripts, also moveToDelayed and retries), which ends
 *   the BZPOPMIN at once; the Worker then waits exactly until the earliest delayed job is due, so a job starts
 *   at its deadline whatever this is. A proxy between the replicas and Redis must let a connection sit idle
 *   this long plus 1 s (BullMQ's watchdog resets a blocking connection silent 1 s past its timeout).
 * - `stalledFastMs` during the first `startupMs` of a term and after Redis came back: jobs whose locks lapsed
 *   during a Redis outage, and a previous leader's in-flight jobs when the term's takeover could not run
 *   (src/queue/take-over.ts; locks of `lockDuration`, 10 s), are found by two checks and back in the queue
 *   within ~15 s (docs/failure-modes.md). `startupMs` = lockDuration + 4 checks.
 * - `stalledIdleMs` afterwards: only a lock lost inside a healthy term (this process frozen over 10 s) waits
 *   for it.
 * - `longestMs`: the longest of the idle intervals (a measuring window spans it).
 */
export const IDLE_CHECKS = {
  blockMs: 60_000,
  stalledFastMs: 5_000,
  startupMs: 30_000,
  stalledIdleMs: 60_000,
  longestMs: 60_000,
} as const;

/** Locks of active jobs expire after this, ms (renewed every half); see {@link IDLE_CHECKS}. */
const LOCK_DURATION_MS = FAILOVER_TIMERS.jobLockMs;

/**
 * A BullMQ Worker whose wait for the next delayed job is capped at {@link IDLE_CHECKS}`.blockMs` instead of
 * BullMQ's 10 s (`maximumBlockTimeout`, a public getter of Worker in 6.7.0; BullMQ's reason for 10 s,
 * reconnection issues with long BZPOPMINs (#1658), is handled by its watchdog since: a blocked command silent
 * past its timeout + 1 s is abandoned and the connection reset).
 */
class CleanupBullWorker extends Worker<StoredJobData, Outcome> {
  override get maximumBlockTimeout(): number {
    return IDLE_CHECKS.blockMs / 1000;
  }
}

/** A failed API call, thrown so that BullMQ retries the job. Carries `Retry-After`, ms. */
export class RetryableCleanupError extends Error {
  override name = 'RetryableCleanupError';
  readonly retryAfterMs: number | undefined;
  constructor(message: string, retryAfterMs: number | undefined) {
    super(message);
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * A job refused for its data ({@link InvalidJobDataError}): unrecoverable, so BullMQ does not retry it, and
 * removed as it fails. Never a handler outcome: the job is not acted on at all.
 */
export class RefusedJobError extends UnrecoverableError {
  override name = 'RefusedJobError';
}

/** A refused job, as {@link QueueConsumerOptions.onRefused} is told about it once it is removed. */
export interface RefusedJob {
  /** The job id: the pod's UID when the id is one at all. */
  readonly uid: string | undefined;
  /** The job name: the pod's name, when it has one. */
  readonly pod: string | undefined;
}

/**
 * Wraps each processing attempt: `run` processes the job, the wrapper records it (span, outcome metrics).
 * Declared here, by its user; src/telemetry/target-telemetry.ts implements it.
 */
export interface ProcessTelemetry {
  process(data: CleanupJobData, run: () => Promise<Outcome>): Promise<Outcome>;
}

/** Options of {@link createQueueConsumer}. */
export interface QueueConsumerOptions {
  target: TargetRef;
  connection: RedisClient;
  prefix: string;
  /** The job handler (workers/cleanup-driver-pod.ts, handed down by the composition root). */
  handler: CleanupHandler;
  deps: CleanupDeps;
  /** Jobs processed in parallel (≥ 1). */
  concurrency: number;
  /** Stored on each job BullMQ processes (`processedBy`), and the Redis client name of the worker. */
  replicaId: string;
  /** How long finished (completed or failed) jobs are kept, ms: the queue's `keepFinishedMs`. */
  keepFinishedMs: number;
  log: Logger;
  /** First retry delay, ms (default 1000); doubles per attempt up to `maxBackoffMs` (default 300 000). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Wraps each processing attempt (consumer span, outcome metrics); the outcome log line is written inside it. */
  telemetry?: ProcessTelemetry;
  /**
   * This replica's wall clock, epoch ms (default `Date.now`): the timestamps of jobs put back to delayed.
   * BullMQ promotes a delayed job when the *worker's* `Date.now()` passes it, so a job not yet due by
   * `deps.now` (the server-bounded clock) goes back for its `dueInMs` on this clock, not to its raw deadline:
   * a replica whose clock is ahead would see the raw deadline as past and spin on the job.
   */
  now?: () => number;
  /** Monotonic clock, ms (default `performance.now()`): the delete log line's time since the election. */
  monotonicNow?: () => number;
  /**
   * Called once a job refused for its data has been removed from Redis, so that its pod can be enqueued again
   * from a trusted copy (the informer's). Without it the next reconcile finds the pod without a job.
   */
  onRefused?: (job: RefusedJob) => void;
  /**
   * Called after every processing attempt with its outcome (a put-back or a failure too; undefined when the
   * handler threw): the self-check's evidence that the worker makes progress (src/cleaner/self-check.ts).
   */
  onProcessed?: (outcome: Outcome | undefined) => void;
  /**
   * Whether each `run()` first takes over the jobs another worker holds in the queue's active list
   * (src/queue/take-over.ts): a frozen leader's jobs follow the leadership at once instead of when their locks
   * lapse. Only under an election that fences the previous leader (etcd); with local leadership another,
   * uncoordinated replica may be working on them. Default false.
   */
  takeOverOnRun?: boolean;
}

/** The leadership term a worker consumes for (src/cleaner/leader-terms.ts `Term`). */
export interface ConsumerTerm {
  /** 1 for the first term of this process, then 2, 3… */
  readonly id: number;
  /** When this replica was elected, monotonic ms. */
  readonly electedMs: number;
}

/**
 * A consumer that can be started and stopped any number of times (a new BullMQ Worker per term). Calls take
 * effect in order: each waits for the previous `run()` or `stop()` to finish.
 */
export interface QueueConsumer {
  /**
   * Starts consuming, after a close in progress has finished; resolves once started. Idempotent. `term`, when
   * given, is written on each accepted or would-delete log line (`term`, `sinceElectionMs`).
   */
  run(term?: ConsumerTerm): Promise<void>;
  /** Aborts in-flight jobs before their DELETE, then closes; resolves once closed. Idempotent. */
  stop(reason: string): Promise<void>;
  /** True while a Worker consumes (false while it closes). */
  readonly running: boolean;
}

/**
 * The delay before retrying a failed job, ms: exponential backoff with jitter, `min(max, base·2^(n-1))·U(0.5, 1)`,
 * never shorter than the server's `Retry-After` and never longer than `maxMs` (the `retryMaxDelay` setting):
 * a `Retry-After` of a day from a misbehaving proxy must not park the job for a day.
 * @param attemptsMade failed attempts so far (≥ 1 when BullMQ asks)
 * @param retryAfterMs the failed answer's `Retry-After`, ms, if any
 * @param random U(0, 1), injectable for tests
 */
export function retryDelayMs(
  attemptsMade: number,
  retryAfterMs: number | undefined,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const expo = backoffMs(attemptsMade, { baseMs, maxMs, jitter: true, random });
  return Math.round(Math.min(maxMs, Math.max(expo, retryAfterMs ?? 0)));
}

/**
 * How long `stop()` waits for the BullMQ Worker to close, ms. A close waits for the jobs in flight: a DELETE's
 * answer (at most `DELETE_ANSWER_GRACE_MS`, src/kube/pod-api.ts, once aborted) and the Redis call that puts the
 * job back. With Redis unreachable that call never ends; past this bound the stop goes on (src/commands/run.ts
 * gives the whole shutdown 15 s) and the jobs are left active, to come back when their locks lapse.
 */
export const CONSUMER_CLOSE_TIMEOUT_MS = FAILOVER_TIMERS.consumerCloseTimeoutMs;

/**
 * How long a term's takeover of the previous leader's jobs may hold up the start of the Worker, ms. Past it the
 * Worker starts anyway (the jobs then come back through the stalled-jobs check); a script that runs late leaves
 * this Worker's own jobs alone.
 */
export const TAKE_OVER_TIMEOUT_MS = FAILOVER_TIMERS.takeOverTimeoutMs;

/** Creates the queue consumer of one target; call `run()` when elected. */
export function createQueueConsumer(opts: QueueConsumerOptions): QueueConsumer {
  const base = opts.backoffMs ?? 1000;
  const max = opts.maxBackoffMs ?? 300_000;
  const wallNow = opts.now ?? (() => Date.now());
  const keep = { age: Math.ceil(opts.keepFinishedMs / 1000) };
  let worker: CleanupBullWorker | undefined;
  let closing = false;
  const monotonicNow = opts.monotonicNow ?? (() => performance.now());
  /** The term of the current `run()`, if given. */
  let term: ConsumerTerm | undefined;
  const termFields = () =>
    term && { term: term.id, sinceElectionMs: Math.round(monotonicNow() - term.electedMs) };
  /** The last `run()`/`stop()`: the next one starts after it (a failed step does not block the next). */
  let lastStep: Promise<void> = Promise.resolve();
  const serially = (step: () => Promise<void> | void): Promise<void> => {
    const next = lastStep.then(step);
    lastStep = next.catch(() => undefined);
    return next;
  };
  const lockLoss = createLockLossLog(opts.log);
  const closingKeyPrefix = closingWorkerKeyPrefix(opts.prefix, opts.target);
  // The target's fields for a log line, unless the logger already carries them (a target's logger is a child
  // with both): a key written twice makes a JSON line some log pipelines reject or read by its last value.
  const bound = opts.log.bindings();
  const where = {
    ...(bound.context === undefined ? { context: opts.target.context } : {}),
    ...(bound.namespace === undefined ? { namespace: opts.target.namespace } : {}),
  };

  /**
   * Refuses a job whose stored data cannot be trusted (a hash lost or edited in Redis, a job of another
   * namespace, an id that is no UID): it must never complete — a completed job stands for its UID a whole
   * day — nor be acted on. BullMQ removes it as it fails (`removeOnFail` on this job only: the removal is part
   * of the script that releases its lock; a locked job cannot be removed otherwise); `onRefused` then re-enqueues
   * the pod from the informer's copy.
   * @throws RefusedJobError always
   */
  const refuse = (job: Job<StoredJobData, Outcome>, err: InvalidJobDataError): never => {
    opts.log.warn(
      {
        ...where,
        pod: job.name,
        uid: job.id,
        outcome: 'refused',
        field: err.field,
        why: err.message,
      },
      'invalid cleanup job refused: removed, its pod is enqueued again from the informer',
    );
    job.opts = { ...job.opts, removeOnFail: true };
    throw new RefusedJobError(err.message);
  };

  const processor = async (
    job: Job<StoredJobData, Outcome>,
    token?: string,
    signal?: AbortSignal,
  ): Promise<Outcome> => {
    const sig = signal ?? new AbortController().signal;
    let data: CleanupJobData;
    try {
      data = cleanupJobDataOf(opts.target, job);
    } catch (err) {
      if (err instanceof InvalidJobDataError) refuse(job, err);
      throw err;
    }
    const handle = async () => {
      const o = await opts.handler(data, opts.deps, sig);
      logOutcome(opts.log, data, job.attemptsMade, o, termFields());
      return o;
    };
    let outcome: Outcome | undefined;
    try {
      outcome = await (opts.telemetry ? opts.telemetry.process(data, handle) : handle());
    } finally {
      opts.onProcessed?.(outcome);
    }
    switch (outcome.outcome) {
      case 'not-yet':
        // The handler's own deadline (this replica's retention, the pod's own finish time) replaces the stored
        // one, so that the job's next run, `status` and the dashboard read the deadline it now waits for.
        if (outcome.deadlineMs !== undefined && outcome.deadlineMs !== job.data?.deadlineMs) {
          await job.updateData({ ...job.data, deadlineMs: outcome.deadlineMs }).catch(() => undefined);
        }
        await job.moveToDelayed(wallNow() + outcome.dueInMs, token);
        throw new DelayedError();
      case 'fenced':
      case 'aborted':
        // A DELETE left and its answer was given up: the API server may have applied it, and the informer of
        // whoever runs the job next may not show that yet. The job's next run re-checks live (one GET), not from
        // a cache that could send a second DELETE. Written before the job is put back; should it fail (Redis
        // gone), the next run re-checks as usual and the preconditions still hold.
        if (outcome.outcome === 'aborted' && outcome.deleteSent && job.data?.liveRecheck !== true) {
          await job.updateData({ ...job.data, liveRecheck: true }).catch(() => undefined);
        }
        // Not a failed attempt: put it back for whoever leads next (a short delay avoids a hot loop).
        await job.moveToDelayed(wallNow() + 250, token);
        throw new DelayedError();
      case 'failed':
        throw new RetryableCleanupError(
          `${outcome.step} ${outcome.code ?? ''} ${outcome.reason}: ${outcome.message}`,
          outcome.retryAfterMs,
        );
      case 'accepted':
        // For `status` ("last accepted DELETE"): one SET, after the DELETE, never failing the job.
        await recordLastAccepted(opts.connection, opts.prefix, opts.target, {
          pod: data.pod,
          uid: data.uid,
          atMs: opts.deps.now(),
          replica: opts.replicaId,
        });
        return outcome;
      default:
        return outcome;
    }
  };

  /** Ends the current fast phase of stalled-jobs checks (the timer that slows them down). */
  let fastChecksTimer: NodeJS.Timeout | undefined;
  /**
   * Checks stalled jobs every `stalledFastMs` for `startupMs`, then every `stalledIdleMs` ({@link IDLE_CHECKS}).
   * BullMQ 6.7.0 reads `opts.stalledInterval` anew for each wait of its checker loop and for each check's
   * `stalled-check` key (the TTL that keeps other checks of the queue off), so the interval can change while the
   * Worker runs. A previous check with the slow interval (a dead leader's, or ours before an outage) left that
   * key for up to a minute: it is deleted first (on the same connection, so before the Worker's first check), so
   * that the first check runs at once. An extra check is harmless: a job is moved only when its lock is gone.
   * @param restart also restart the checker loop now (BullMQ `startStalledCheckTimer`): Redis came back.
   */
  function checkStalledFast(w: CleanupBullWorker, restart: boolean): void {
    clearTimeout(fastChecksTimer);
    w.opts.stalledInterval = IDLE_CHECKS.stalledFastMs;
    const cleared = opts.connection.del(w.toKey('stalled-check')).catch(() => 0);
    if (restart) {
      void cleared.then(() => {
        if (worker === w && !closing) void w.startStalledCheckTimer().catch(() => undefined);
      });
    }
    fastChecksTimer = setTimeout(() => {
      w.opts.stalledInterval = IDLE_CHECKS.stalledIdleMs;
    }, IDLE_CHECKS.startupMs);
    fastChecksTimer.unref();
  }
  /** Redis came back (the shared connection is ready again): locks may have lapsed meanwhile. */
  const onRedisReady = () => {
    if (worker && !closing) checkStalledFast(worker, true);
  };

  /**
   * Moves the jobs a previous leader holds back to the queue before `w` runs (see {@link takeOverActiveJobs}),
   * logging how many. Never rejects: a failure leaves them to the stalled-jobs check.
   */
  async function takeOver(w: CleanupBullWorker): Promise<void> {
    try {
      const taken = await withTimeout(
        takeOverActiveJobs(opts.connection, w, `${w.id}:`, closingKeyPrefix),
        TAKE_OVER_TIMEOUT_MS,
        "taking over the previous leader's jobs",
      );
      if (taken.length === 0) return;
      opts.log.info(
        { ...where, jobs: taken.length, uids: taken.slice(0, 20) },
        `took over ${taken.length} jobs the previous leader held: back in the queue, each re-checked live`,
      );
    } catch (err) {
      opts.log.warn(
        { ...where, why: (err as Error).message, lockDurationMs: LOCK_DURATION_MS },
        "could not take over the previous leader's jobs: they come back when their locks lapse",
      );
    }
  }

  /** Creates and runs a new BullMQ Worker, unless one runs (after taking over the previous leader's jobs). */
  async function start(): Promise<void> {
    if (worker) return;
    const w = new CleanupBullWorker(queueName(opts.target), processor, {
      connection: opts.connection,
      prefix: opts.prefix,
      autorun: false,
      concurrency: opts.concurrency,
      name: opts.replicaId,
      // Jobs whose locks lapsed (a Redis outage, a takeover that could not run) come back through stall
      // detection, which counts each return; give them a few chances.
      maxStalledCount: 5,
      // Locks expire after lockDuration (renewed every half) and the check runs every stalledInterval, 5 s at
      // the start of a term (then every 60 s: checkStalledFast): a crashed leader's in-flight jobs resume
      // within ~15 s instead of BullMQ's default ~60 s (30 s + 30 s). Processing a job twice is harmless:
      // fencing, re-check, UID precondition.
      lockDuration: LOCK_DURATION_MS,
      stalledInterval: IDLE_CHECKS.stalledFastMs,
      // Seconds: the idle wait on the queue's marker (IDLE_CHECKS), BullMQ's default is 5 s.
      drainDelay: IDLE_CHECKS.blockMs / 1000,
      // Finished jobs stay as long as tombstones: re-adding a completed UID is then a no-op. Worker
      // options, not stored on each job (jobs stored by older versions carry the same setting themselves).
      removeOnComplete: keep,
      removeOnFail: keep,
      settings: {
        backoffStrategy: (attemptsMade, _type, err) =>
          retryDelayMs(
            attemptsMade,
            err instanceof RetryableCleanupError ? err.retryAfterMs : undefined,
            base,
            max,
          ),
      },
    });
    // A burst of lost locks (a freeze) is one line, not one per job held (src/queue/lock-loss-log.ts).
    w.on('lockRenewalFailed', (jobIds) => lockLoss.renewalFailed(jobIds));
    w.on('failed', (job, err) => {
      // Emitted once BullMQ has moved the job on (here: removed it), so a new job of that UID can be added.
      if (err instanceof RefusedJobError) opts.onRefused?.({ uid: job?.id, pod: job?.name || undefined });
    });
    w.on('error', (err) => {
      if (!lockLoss.take(err)) opts.log.warn({ err: { message: err.message } }, 'worker error');
    });
    worker = w;
    if (opts.takeOverOnRun) await takeOver(w);
    checkStalledFast(w, false);
    opts.connection.setMaxListeners(opts.connection.getMaxListeners() + 1); // one per led target
    opts.connection.on('ready', onRedisReady);
    w.run().catch((err: unknown) => opts.log.error({ err }, 'worker stopped with an error'));
  }

  return {
    get running() {
      return worker !== undefined && !closing;
    },
    run: (t) =>
      serially(() => {
        term = t;
        return start();
      }),
    stop: (reason) =>
      serially(async () => {
        const w = worker;
        if (!w) return;
        closing = true;
        clearTimeout(fastChecksTimer);
        opts.connection.off('ready', onRedisReady);
        opts.connection.setMaxListeners(Math.max(0, opts.connection.getMaxListeners() - 1));
        try {
          // A term ended on purpose (handover, shutdown): the next leader, elected at once, leaves our jobs to this
          // close, which puts them back (a DELETE already sent is awaited here, not sent twice). A frozen or dead
          // leader writes no such mark: its jobs are taken over.
          markWorkerClosing(opts.connection, closingKeyPrefix, w.id, CONSUMER_CLOSE_TIMEOUT_MS + 1_000);
          w.cancelAllJobs(reason);
          await withTimeout(w.close(), CONSUMER_CLOSE_TIMEOUT_MS, 'closing the worker').catch(
            (err: Error) => {
              // Redis unreachable: the aborted jobs cannot be put back. Left active, their locks lapse and the
              // next leader takes them over (stalled-jobs check); the close goes on in the background.
              opts.log.warn(
                {
                  ...where,
                  reason,
                  why: err.message,
                  lockDurationMs: LOCK_DURATION_MS,
                },
                'worker close timed out (Redis unreachable?): its jobs in flight are left to their locks, which lapse; the next leader takes them over',
              );
            },
          );
          lockLoss.flush();
        } finally {
          worker = undefined;
          closing = false;
        }
      }),
  };
}
