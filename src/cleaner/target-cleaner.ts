/**
 * Everything one replica does for one target (context, namespace):
 *
 * - its **informer** (on every replica) classifies each observed pod and enqueues the terminal ones as
 *   delayed cleanup jobs keyed by UID, or cancels and tombstones the ones being deleted; it makes no API
 *   calls;
 * - its **leadership** campaign: when elected, wait for the informer's initial list, then run the worker and
 *   **reconcile** (enqueue what is missing, retry failed jobs) side by side, and reconcile periodically; when the
 *   leadership is lost, abort in-flight jobs before their DELETE and close the worker. Terms run strictly one
 *   after another (src/cleaner/leader-terms.ts): a new term starts once the previous worker has closed.
 */
import pLimit from 'p-limit';
import { type DecisionRules, deadlineMs, decide, finishTime, malformedReason } from '../cleanup/decision.ts';
import type { CleanupHandler } from '../cleanup/handler.ts';
import type { CleanupJobData } from '../cleanup/job-data.ts';
import type { KeptReport } from '../cleanup/kept-by-pod-phase.ts';
import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy, RecheckMode } from '../config/schema.ts';
import type { AppStateSettings, PodState } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import type { PodApi } from '../kube/pod-api.ts';
import type { PodEvent, PodInformer } from '../kube/pod-informer.ts';
import type { Leadership } from '../leadership/leadership.ts';
import type { Logger } from '../log.ts';
import { type CleanupQueue, type EnqueueResult, jobDataFor } from '../queue/cleanup-queue.ts';
import {
  type CleanupWorker,
  type CleanupWorkerOptions,
  createCleanupWorker,
  type RefusedJob,
} from '../queue/cleanup-worker.ts';
import type { DataMarker } from '../queue/data-marker.ts';
import { isCleanupJobId, type TargetRef } from '../queue/job-identity.ts';
import { recordKeptPods } from '../queue/kept-pods.ts';
import { lookAtQueue } from '../queue/queue-look.ts';
import type { RedisClient } from '../queue/redis-client.ts';
import { sleep } from '../sleep.ts';
import type { EnqueueTrigger, TargetTelemetry } from '../telemetry/target-telemetry.ts';
import { ACCEPTED_DELETES_MAX, createAcceptedDeletes } from './accepted-deletes.ts';
import { cacheTrusted, createCacheTrust } from './cache-trust.ts';
import { createDataLossWatch, type DataLossWatchOptions } from './data-loss-watch.ts';
import { createKeptPodsReport } from './kept-pods-report.ts';
import { createLeaderTerms, type Term, waitInTerm } from './leader-terms.ts';
import { findOverdue, type OverdueReport } from './overdue.ts';
import { createPodNotes } from './pod-notes.ts';
import {
  createSelfCheck,
  QUEUE_LOOK_TIMEOUT_MS,
  type SelfCheckSettings,
  type SelfCheckSubject,
  selfCheckSettings,
} from './self-check.ts';
import { createStuckHold } from './stuck-hold.ts';

/** Dependencies and settings of {@link createTargetCleaner}. */
export interface TargetCleanerOptions {
  target: TargetRef;
  replicaId: string;
  selector: LabelSelector;
  policy: Policy;
  /** Kyuubi's state settings: what counts as a finished driver (src/kube/application-state.ts). */
  appState: AppStateSettings;
  retentionMs: number;
  recheck: RecheckMode;
  dryRun: boolean;
  concurrency: number;
  /** Period of the leader's full reconcile, ms. */
  reconcileIntervalMs: number;
  queue: CleanupQueue;
  /** The job handler (workers/cleanup-driver-pod.ts): the composition root hands it down. */
  handler: CleanupHandler;
  connection: RedisClient;
  prefix: string;
  pods: PodApi;
  /** The target's informer, not started: the cleaner subscribes to it and starts it. */
  informer: PodInformer;
  /** The target's leadership, not started: the cleaner subscribes to it and starts it. */
  leadership: Leadership;
  log: Logger;
  /** Wall clock, epoch ms: deadlines from Kubernetes timestamps, BullMQ delays. */
  now: () => number;
  /**
   * The clock that stamps when this replica first saw a pod terminal that carries no finish time of its own,
   * epoch ms: the context's `ServerClock.notBehindNow` (src/kube/server-clock.ts), never behind the API
   * server's clock as its answers show it, so that a replica whose clock lags does not stamp an early
   * deadline. Default `now`.
   */
  stampNow?: () => number;
  /**
   * The clock that judges whether a cleanup is due (the handler) and whether a pod is overdue (the
   * self-check), epoch ms: the context's `ServerClock.dueNow` (src/kube/server-clock.ts), never ahead of the
   * API server's clock. Default `now`.
   */
  dueNow?: () => number;
  /** Monotonic clock, ms (default `performance.now()`): the informer-sync wait and the informer-down threshold. */
  monotonicNow?: () => number;
  /**
   * How long a new term waits for the informer's first list before it logs a warning and waits again, ms
   * (default 60 000). The term never consumes from an unsynced cache; losing the leadership ends the wait.
   */
  informerSyncTimeoutMs?: number;
  /**
   * How long the informer may be down (its list or watch failing) before the re-check stops trusting its
   * cache and GETs each pod, ms (default 10 000): a dropped watch restarted within a second does not count;
   * an outage does (src/cleaner/cache-trust.ts).
   */
  staleCacheAfterMs?: number;
  /** Builds the worker (default {@link createCleanupWorker}); tests pass a double of the same interface. */
  createWorker?: (opts: CleanupWorkerOptions) => CleanupWorker;
  /** Single-server mode: warn when another worker consumes the same queue (replicas are uncoordinated). */
  warnIfNotAlone?: boolean;
  /** Retry backoff of failed DELETEs, ms (defaults in the worker). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Spans and metrics of enqueue, processing and reconcile (src/telemetry); optional. */
  telemetry?: TargetTelemetry;
  /** The self-check's thresholds (src/cleaner/self-check.ts; default: those of a 10 s election TTL). */
  selfCheck?: SelfCheckSettings;
  /**
   * This replica's Redis has answered since it started (the first look at its cluster name's claims,
   * src/cleaner/cluster-claims.ts); default always true. Until then it is not ready for the target: a replica
   * that starts with its own path to Redis cut would be assigned the target, elected, and wait there forever.
   */
  redisAnswered?: () => boolean;
  /**
   * The target's data marker (src/queue/data-marker.ts): with it, the leader reconciles as soon as the queue's
   * Redis data is lost (src/cleaner/data-loss-watch.ts); without it, only the periodic reconcile heals a loss.
   */
  dataMarker?: DataMarker;
  /** The data-loss watch's intervals, ms (defaults in src/cleaner/data-loss-watch.ts). */
  dataLossChecks?: Pick<
    DataLossWatchOptions,
    'intervalMs' | 'idleIntervalMs' | 'burstMs' | 'burstIntervalMs'
  >;
}

/**
 * One target's cleaner. `observe`, `elected` and `lost` are the informer's and leadership's callbacks: the
 * cleaner subscribes them itself.
 */
export interface TargetCleaner {
  readonly target: TargetRef;
  start(): Promise<void>;
  /** Resigns leadership (another replica takes over at once), stops the worker and the informer. */
  stop(): Promise<void>;
  observe(event: PodEvent, pod: DriverPod): void;
  elected(): void;
  lost(reason: string): void;
  /** Runs one reconcile now (leader only); returns how many jobs it added or retried. */
  reconcile(): Promise<number>;
  readonly isLeader: boolean;
  /**
   * This replica can clean the target now: its informer has listed the pods and has not been down (unable to
   * list or watch) for longer than `staleCacheAfterMs`, and it has not stepped down from the target for want of
   * progress without having shown since that it can make progress (src/cleaner/stuck-hold.ts), and its Redis
   * has answered since it started (`redisAnswered`). Only a ready
   * replica campaigns for the target (unless no replica is ready for it), and a leader that stops being ready
   * hands the target over.
   */
  readonly ready: boolean;
  /**
   * How many pod UIDs this cleaner keeps per-UID state for (what it last did, first-seen times, warnings): the
   * pods its informer has cached, plus DELETEs and removals in flight. Never grows with UIDs it only deleted.
   */
  readonly trackedUids: number;
  /** Why it is not {@link TargetCleaner.ready} (empty when it is). */
  readonly notReadyReasons: readonly NotReadyReason[];
  readonly informer: PodInformer;
  readonly leadership: Leadership;
  /** The target's queue (the dashboard and the metrics read it). */
  readonly queue: CleanupQueue;
  /** The target's pod API (rate-limited, shared by the context): `/api/v1/explain`'s live GET. */
  readonly pods: PodApi;
  /** The overdue pods of the target as this replica's informer sees them (the self-check). */
  overdue(): OverdueReport;
  /**
   * The pods of the target kept by Kyuubi's `POD` state source although their driver container has ended
   * (src/cleanup/kept-by-pod-phase.ts), as this replica's informer sees them.
   */
  keptByPodPhase(): KeptReport;
}

/**
 * Why a replica cannot clean a target now: `informer` — its informer has not listed the pods, or has been
 * unable to list or watch them for longer than `staleCacheAfterMs`; `stepped-down` — the self-check stepped
 * it down for want of progress and it has not shown since that it can make progress; `redis` — its Redis has
 * not answered since it started.
 */
export type NotReadyReason = 'informer' | 'stepped-down' | 'redis';

/** Creates the cleaner of one target; `start()` starts its informer and campaign. */
export function createTargetCleaner(opts: TargetCleanerOptions): TargetCleaner {
  const log = opts.log;
  /**
   * What this replica last did for each UID. UIDs it has already handed to Redis (`enqueued`, `cancelled`),
   * so informer resyncs don't repeat the round trip; and UIDs its own worker is deleting (`deleted`, only
   * while the DELETE is in flight: the informer's events of the deletion may come before its answer). Once
   * accepted, {@link acceptedDeletes} remembers the UID (bounded), so the DELETE event that follows needs no
   * cancel round trip (other replicas still write the tombstone). An entry goes with the pod's DELETED event;
   * a UID the informer never cached has none left once its DELETE is answered.
   */
  const lastActionByUid = new Map<string, 'enqueued' | 'cancelled' | 'deleted'>();
  /**
   * UIDs whose pending job is being removed after a DELETED event (relabelled out of the selector, or
   * deleted): the removal in flight. A pod relabelled straight back in enqueues after it, not beside it.
   */
  const leaving = new Map<string, Promise<void>>();
  /** UIDs whose finish time was warned about (implausible, or in the future), once each per pod. */
  const warnedFinish = new Set<string>();
  /**
   * The informer's enqueues and cancels, at most 32 in flight: an initial list of 10,000 terminated pods
   * would otherwise start 10,000 Redis round trips at once, and the heap they need stays in the RSS.
   * FIFO; the queue and tombstone protocol is race-free under any interleaving (src/queue/cleanup-queue.ts).
   */
  const redisOps = pLimit(32);
  /** When this replica first saw a pod terminal without a finish time (an evicted driver). */
  const firstSeenTerminal = new Map<string, number>();
  /** UIDs that are not Kubernetes UIDs, warned about once each (forgotten when the pod goes). */
  const badUids = new Set<string>();
  /** What every decision of this target judges by. */
  const rules: DecisionRules = { selector: opts.selector, policy: opts.policy, appState: opts.appState };
  /** The once-per-pod lines: fields the state rule cannot read, drivers kept by the POD state source. */
  const notes = createPodNotes(log, rules);
  let stopped = false;
  const monotonicNow = opts.monotonicNow ?? (() => performance.now());
  const dueNow = opts.dueNow ?? opts.now;
  const stampNow = opts.stampNow ?? opts.now;
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
  let selfCheckTimer: NodeJS.Timeout | undefined;

  const { informer, leadership } = opts;
  const staleAfterMs = opts.staleCacheAfterMs ?? 10_000;
  const cacheTrust = createCacheTrust({ informer, monotonicNow, staleAfterMs, log });
  const checkSettings = opts.selfCheck ?? selfCheckSettings(10);
  /** Out of the target after a self-check step-down, until its own queue answers (src/cleaner/stuck-hold.ts). */
  const hold = createStuckHold({
    minHoldMs: checkSettings.leaderStuckMs,
    probe: () => lookAtQueue(opts.queue.bullQueue, opts.connection, [], opts.now()),
    probeTimeoutMs: QUEUE_LOOK_TIMEOUT_MS,
    log,
    monotonicNow,
  });
  /** See {@link TargetCleaner.notReadyReasons}: the informer by the same bound as the cache's trust. */
  const notReadyReasons = (): NotReadyReason[] => {
    const out: NotReadyReason[] = [];
    if (!informer.synced || !cacheTrusted(informer.downSinceMs, monotonicNow(), staleAfterMs))
      out.push('informer');
    if (hold.reason !== undefined) out.push('stepped-down');
    if (opts.redisAnswered && !opts.redisAnswered()) out.push('redis');
    return out;
  };
  const ready = () => notReadyReasons().length === 0;
  /**
   * The UIDs whose DELETE this replica saw accepted, for as long as Redis would remember them (the tombstone
   * TTL), across leadership terms: a job re-enqueued after Redis lost its data must not DELETE again.
   */
  const acceptedDeletes = createAcceptedDeletes({
    horizonMs: opts.queue.keepFinishedMs,
    maxEntries: ACCEPTED_DELETES_MAX,
    monotonicNow,
  });
  const worker: CleanupWorker = (opts.createWorker ?? createCleanupWorker)({
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
    onRefused: (job) => requeueRefused(job),
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
      hold.progressed();
    },
    // A new term takes the jobs a frozen previous leader holds at once; fenced elections only (single-server
    // mode may run beside uncoordinated replicas, whose jobs are theirs).
    takeOverOnRun: !opts.warnIfNotAlone,
    handler: opts.handler,
    deps: {
      pods: {
        get: (namespace, name, signal) => opts.pods.get(namespace, name, signal),
        async delete(namespace, name, preconditions, signal, gates) {
          // Marked before the request: the informer's events of the deletion may arrive before its answer.
          // Should the DELETE not be accepted, a skipped cancel costs at most one more no-op run of the job.
          const { uid } = preconditions;
          const before = lastActionByUid.get(uid);
          lastActionByUid.set(uid, 'deleted');
          try {
            // One DELETE per UID at a time: a run of the same job whose lock BullMQ lost meanwhile waits for it.
            return await acceptedDeletes.deleteOnce(uid, () =>
              opts.pods.delete(namespace, name, preconditions, signal, gates),
            );
          } finally {
            // Answered: an accepted DELETE is remembered by acceptedDeletes (bounded), not here. A DELETED
            // event that came meanwhile has removed the entry already.
            if (lastActionByUid.get(uid) === 'deleted') {
              if (before) lastActionByUid.set(uid, before);
              else lastActionByUid.delete(uid);
            }
          }
        },
      },
      cached: (name) => informer.get(name),
      recheck: opts.recheck,
      cacheUntrusted: () => cacheTrust.untrusted(),
      acceptedBefore: (uid) => acceptedDeletes.acceptedBefore(uid),
      fence: (signal) => leadership.fence(signal),
      stillLeader: () => leadership.stillLeader(),
      selector: opts.selector,
      policy: opts.policy,
      retentionMs: opts.retentionMs,
      firstSeenTerminalMs: (uid) => firstSeenTerminal.get(uid),
      appState: opts.appState,
      dryRun: opts.dryRun,
      now: dueNow,
    },
  });

  const podFields = (pod: DriverPod) => ({ pod: pod.metadata?.name, uid: pod.metadata?.uid });

  /**
   * Whether the pod's UID can name a cleanup job (a Kubernetes UID, src/queue/job-identity.ts). One odd UID
   * from the API must fail only its pod: it is left alone and warned about once, never thrown at the informer
   * handler or the reconcile loop.
   */
  function usableUid(pod: DriverPod, event: PodEvent | 'reconcile'): boolean {
    const uid = pod.metadata?.uid ?? '';
    if (isCleanupJobId(uid)) return true;
    if (!badUids.has(uid)) {
      badUids.add(uid);
      log.warn(
        { event, ...podFields(pod), why: 'metadata.uid is not a Kubernetes UID (RFC 4122)' },
        'malformed pod object: left alone',
      );
    }
    return false;
  }

  /**
   * The pod's finish time (src/cleanup/decision.ts `finishTime`), else when this replica first saw it terminal
   * (stamped now on {@link stampNow} the first time), and the deadline from it. A finish time that cannot be one
   * (before the pod's creation, or far in the future) or one in the future is warned about once per pod.
   */
  function deadlineOf(pod: DriverPod, state: PodState): { deadlineMs: number; finishedAtMs: number } {
    const uid = pod.metadata?.uid ?? '';
    const now = opts.now();
    const fin = finishTime(pod, state, now);
    if (fin.ms === undefined && !firstSeenTerminal.has(uid)) firstSeenTerminal.set(uid, stampNow());
    const times = deadlineMs(fin.ms, opts.retentionMs, now, firstSeenTerminal.get(uid));
    if ((fin.implausible || times.skewMs > 0) && !warnedFinish.has(uid)) {
      warnedFinish.add(uid);
      if (fin.implausible) {
        log.warn(
          {
            ...podFields(pod),
            finishedAt: new Date(fin.implausible.finishedAtMs).toISOString(),
            creationTimestamp: pod.metadata?.creationTimestamp,
            why: fin.implausible.why,
            countedFrom: fin.source === 'condition' ? 'its last condition change' : 'first seen terminal',
          },
          'finishedAt is not plausible: retention counted from another time',
        );
      } else {
        log.warn(
          { ...podFields(pod), skewMs: times.skewMs },
          'finishedAt is in the future (clock skew): cleanup deferred to finishedAt + retention',
        );
      }
    }
    return times;
  }

  async function enqueue(
    pod: DriverPod,
    state: PodState,
    trigger: EnqueueTrigger,
  ): Promise<EnqueueResult | 'left-alone'> {
    if (!usableUid(pod, trigger)) return 'left-alone';
    const uid = pod.metadata?.uid ?? '';
    const times = deadlineOf(pod, state);
    const send = async (data: CleanupJobData) => {
      // Outside dry run, a job that completed as `would-delete` (dry run was on) is replaced, not kept a day.
      // The leader's reconcile also brings a job due later forward to this deadline: a retention lowered takes
      // effect at the next reconcile (the handler still judges by its own deadline).
      const result = await opts.queue.enqueue(data, {
        dryRun: opts.dryRun,
        ...(trigger === 'reconcile' ? { earlier: true } : {}),
      });
      lastActionByUid.set(uid, 'enqueued');
      log.debug({ ...podFields(pod), result, deadline: new Date(times.deadlineMs).toISOString() }, 'enqueue');
      return result;
    };
    const data = jobDataFor(pod, opts.target, times, opts.replicaId);
    // The telemetry wraps the enqueue in its spans and stamps the job with their traceparent.
    return opts.telemetry ? opts.telemetry.enqueue(trigger, data, send) : send(data);
  }

  async function cancel(pod: DriverPod, why: string): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const state = lastActionByUid.get(uid);
    if (state === 'cancelled' || state === 'deleted' || acceptedDeletes.acceptedBefore(uid)) return;
    const result = await opts.queue.cancel(uid);
    lastActionByUid.set(uid, 'cancelled');
    // A pending job removed: someone else deleted the pod before its cleanup ran (our own DELETE runs in an
    // active job, never a pending one). One replica's cancel removes it, so the fleet counts it once.
    if (result === 'removed') opts.telemetry?.deletedByOthers('deletion-seen');
    log.debug({ ...podFields(pod), why, result }, 'cleanup cancelled: tombstoned');
  }

  /** A DELETED event without evidence of deletion: the pod left the watch and may come back; no tombstone. */
  async function unschedule(pod: DriverPod): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const state = lastActionByUid.get(uid);
    if (state === 'cancelled' || state === 'deleted' || acceptedDeletes.acceptedBefore(uid)) return;
    const result = await opts.queue.unschedule(uid);
    log.debug(
      { ...podFields(pod), why: 'DELETED without deletionTimestamp (left the selector)', result },
      'cleanup unscheduled: pending job removed, no tombstone',
    );
  }

  /**
   * A job refused for its data was removed (src/queue/cleanup-worker.ts): its pod gets a new job from the
   * informer's copy, classified as any event is. Not in the cache (gone, or not listed yet): nothing to do, the
   * next reconcile enqueues it if it is there.
   */
  function requeueRefused(job: RefusedJob): void {
    if (!isCleanupJobId(job.uid)) return; // no pod has it: enqueues refuse such UIDs too
    const named = job.pod ? informer.get(job.pod) : undefined;
    const pod =
      named?.metadata?.uid === job.uid ? named : informer.list().find((p) => p.metadata?.uid === job.uid);
    if (!pod) return;
    lastActionByUid.delete(job.uid);
    observe('updated', pod);
  }

  function observe(event: PodEvent, pod: DriverPod): void {
    const malformed = malformedReason(pod);
    if (malformed) {
      log.warn(
        { event, pod: pod?.metadata?.name, uid: pod?.metadata?.uid, why: malformed },
        'malformed pod object: left alone',
      );
      return;
    }
    const uid = pod.metadata?.uid ?? '';
    if (!usableUid(pod, event)) {
      if (event === 'deleted') badUids.delete(uid);
      return;
    }
    if (event === 'deleted') {
      // A tombstone means "this UID is being or has been deleted", so only evidence of that writes one: the
      // deletionTimestamp the API server sets before it removes a pod (DELETED then carries it). A label-
      // selected watch also sends DELETED when a pod stops matching (relabelled out of the selector): that pod
      // is still there and may be relabelled back in, so only its pending job goes.
      const deleting = Boolean(pod.metadata?.deletionTimestamp);
      const removal: Promise<void> = redisOps(() =>
        deleting ? cancel(pod, 'DELETE event') : unschedule(pod),
      )
        .catch((err) =>
          log.warn({ ...podFields(pod), err: { message: (err as Error).message } }, 'cancel failed'),
        )
        // Forget it: a deleted UID never comes back (the Redis tombstone remains for other replicas); one that
        // left the selector is enqueued again if it comes back into it (after this removal: see `leaving`).
        .finally(() => {
          lastActionByUid.delete(uid);
          if (leaving.get(uid) === removal) leaving.delete(uid);
        });
      leaving.set(uid, removal);
      firstSeenTerminal.delete(uid);
      warnedFinish.delete(uid);
      notes.forget(uid);
      return;
    }
    const decision = decide(pod, rules);
    notes.observed(pod, decision, event);
    if (decision.action === 'cancel') {
      void redisOps(() => cancel(pod, 'deletionTimestamp set')).catch((err) =>
        log.warn({ ...podFields(pod), err: { message: (err as Error).message } }, 'cancel failed'),
      );
    } else if (decision.action === 'enqueue') {
      const removal = leaving.get(uid);
      if (lastActionByUid.has(uid) && !removal) return;
      // Back into the selector while its job is being removed: enqueue once the removal is done, not beside it
      // (the add would find the job about to go, and the removal's end would forget the add).
      const add = () => redisOps(() => enqueue(pod, decision.state, event));
      void (removal ? removal.then(add) : add()).catch((err) => {
        // Redis unreachable: the leader's reconcile will add it later.
        log.warn({ ...podFields(pod), err: { message: (err as Error).message } }, 'enqueue failed');
      });
    }
  }

  async function reconcile(): Promise<number> {
    let added = 0;
    const eligible = new Set<string>();
    for (const pod of informer.list()) {
      const decision = decide(pod, rules);
      if (decision.action !== 'enqueue') continue;
      const uid = pod.metadata?.uid ?? '';
      eligible.add(uid);
      if ((await enqueue(pod, decision.state, 'reconcile')) === 'added') added += 1;
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
    const timeoutMs = opts.informerSyncTimeoutMs ?? 60_000;
    const since = monotonicNow();
    const synced = informer.start();
    for (;;) {
      const how = await waitInTerm(synced, term.signal, timeoutMs);
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
          ...rules,
          retentionMs: opts.retentionMs,
          graceMs: -withinMs,
          nowMs: dueNow(),
          firstSeenTerminalMs: (uid) => firstSeenTerminal.get(uid),
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
    await worker.run();
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

  const kept = createKeptPodsReport({
    rules,
    pods: () => informer.list(),
    synced: () => informer.synced,
    isLeader: () => leadership.isLeader && !stopped,
    record: (k) => recordKeptPods(opts.connection, opts.prefix, opts.target, k),
    replicaId: opts.replicaId,
    now: opts.now,
    monotonicNow,
    refreshMs: Math.min(opts.reconcileIntervalMs, 300_000),
  });
  const selfCheck = createSelfCheck({
    subject: {
      pods: () => informer.list(),
      get informerSynced() {
        return informer.synced;
      },
      get isLeader() {
        return leadership.isLeader;
      },
      get workerRunning() {
        return worker.running;
      },
      get lastProgressMs() {
        return lastProgressMs;
      },
      get fenced() {
        return fenced;
      },
      lookAtQueue: (uids) => lookAtQueue(opts.queue.bullQueue, opts.connection, uids, opts.now()),
      get leaderSinceMs() {
        return leaderSinceMs;
      },
      firstSeenTerminalMs: (uid) => firstSeenTerminal.get(uid),
      stepDown: (reason) => {
        // Not ready first: the balancer then withdraws this replica's campaign instead of campaigning again.
        hold.begin(reason);
        leadership.stepDown(reason);
        // Its next term, once it has shown progress again (or is the only one left), gets a full grace.
        previousTerm = undefined;
      },
      currentLeader: () => leadership.currentLeader(),
    },
    ...rules,
    retentionMs: opts.retentionMs,
    graceMs: checkSettings.graceMs,
    leaderStuckMs: checkSettings.leaderStuckMs,
    followerAlarmMs: checkSettings.followerAlarmMs,
    dryRun: opts.dryRun,
    log,
    now: dueNow,
    monotonicNow,
  });

  const terms = createLeaderTerms({
    begin: beginTerm,
    end: endTerm,
    onError: (err, step) =>
      log.error({ err: { message: (err as Error).message }, step }, 'leadership term transition failed'),
  });

  const cleaner: TargetCleaner = {
    target: opts.target,
    pods: opts.pods,
    observe,
    elected() {
      if (stopped) return;
      const t = monotonicNow();
      const back = previousTerm && t - previousTerm.endedMs < checkSettings.leaderStuckMs;
      leaderSinceMs = back && previousTerm ? previousTerm.sinceMs : t;
      if (!back) fenced = undefined;
      terms.elected();
    },
    lost(reason) {
      if (leaderSinceMs !== undefined) previousTerm = { sinceMs: leaderSinceMs, endedMs: monotonicNow() };
      leaderSinceMs = undefined;
      terms.lost(reason);
    },
    overdue: () => selfCheck.overdue(),
    keptByPodPhase: () => kept.report(),
    reconcile,
    get isLeader() {
      return leadership.isLeader;
    },
    get ready() {
      return ready();
    },
    get trackedUids() {
      return new Set([
        ...lastActionByUid.keys(),
        ...firstSeenTerminal.keys(),
        ...leaving.keys(),
        ...warnedFinish,
      ]).size;
    },
    get notReadyReasons() {
      return notReadyReasons();
    },
    informer: informer,
    leadership: leadership,
    queue: opts.queue,
    async start() {
      void informer.start();
      leadership.start();
      selfCheckTimer = setInterval(() => {
        void selfCheck
          .check()
          .catch((err) => log.warn({ err: { message: (err as Error).message } }, 'self-check failed'));
        void kept
          .recordIfLeader()
          .catch((err) =>
            log.warn({ err: { message: (err as Error).message } }, 'kept-pods count not recorded'),
          );
        void hold.check();
      }, checkSettings.intervalMs);
      selfCheckTimer.unref();
    },
    async stop() {
      stopped = true;
      clearInterval(selfCheckTimer);
      // Resigning ends the term through `lost`; ending it here too covers a leadership that was not leading
      // (a term still waiting for the informer) and is a no-op otherwise.
      await leadership.resign();
      terms.lost('shutdown');
      await terms.settled();
      await informer.stop();
      await opts.queue.close();
    },
  };
  // Subscribed after construction (client-go's AddEventHandler): no forward reference to this cleaner.
  informer.addEventHandler(observe);
  leadership.readyWhen(ready);
  leadership.addEventHandler({
    onElected: () => cleaner.elected(),
    onLost: (reason) => cleaner.lost(reason),
  });
  return cleaner;
}
