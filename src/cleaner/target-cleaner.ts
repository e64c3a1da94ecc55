/**
 * Everything one replica does for one target (cluster, context, namespace), put together from its three parts:
 *
 * - the **follower side** (src/cleaner/follower-side.ts), on every replica: the informer's events, classified,
 *   become delayed cleanup jobs keyed by UID, or cancels and tombstones for pods being deleted;
 * - the **leader side** (src/cleaner/leader-side.ts), while this replica holds the target's leadership: terms,
 *   each running the worker and the reconcile once the informer has listed the pods;
 * - the **DELETE path** (src/cleaner/delete-path.ts): what the handler needs to send one DELETE per pod, fenced
 *   and with preconditions.
 *
 * Here: readiness (only a replica that can clean the target campaigns for it), the self-check, and the
 * start/stop order.
 */

import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy, RecheckMode } from '../config/schema.ts';
import { FAILOVER_TIMERS } from '../failover-timers.ts';
import type { AppStateSettings } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import type { PodApi } from '../kube/pod-api.ts';
import type { PodEvent, PodInformer } from '../kube/pod-informer.ts';
import type { Leadership } from '../leadership/leadership.ts';
import type { Logger } from '../log.ts';
import type { CleanupQueue } from '../queue/cleanup-queue.ts';
import type { DataMarker } from '../queue/data-marker.ts';
import type { TargetRef } from '../queue/job-identity.ts';
import { recordKeptPods } from '../queue/kept-pods.ts';
import type { QueueConsumer, QueueConsumerOptions } from '../queue/queue-consumer.ts';
import { lookAtQueue } from '../queue/queue-look.ts';
import type { RedisClient } from '../queue/redis-client.ts';
import type { CleanupHandler } from '../rules/handler.ts';
import type { KeptReport } from '../rules/kept-by-pod-phase.ts';
import type { TargetTelemetry } from '../telemetry/target-telemetry.ts';
import { ACCEPTED_DELETES_MAX, createAcceptedDeletes } from './accepted-deletes.ts';
import { cacheTrusted, createCacheTrust } from './cache-trust.ts';
import type { DataLossWatchOptions } from './data-loss-watch.ts';
import { createDeletePath } from './delete-path.ts';
import { createFollowerSide } from './follower-side.ts';
import { createKeptPodsReport } from './kept-pods-report.ts';
import { createLeaderSide } from './leader-side.ts';
import type { OverdueReport } from './overdue.ts';
import {
  createSelfCheck,
  QUEUE_LOOK_TIMEOUT_MS,
  type SelfCheckSettings,
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
  /** Builds the worker (default {@link createQueueConsumer}); tests pass a double of the same interface. */
  createWorker?: (opts: QueueConsumerOptions) => QueueConsumer;
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
   * This replica can reach its Redis: it has answered since the replica started (the first look at its cluster
   * name's claims, src/cleaner/cluster-claims.ts) and its connection has not been down for
   * `redisDownNotReadyMs` since (src/queue/redis-outage.ts); default always true. Otherwise it is not ready for
   * the target: a replica whose own path to Redis is cut would be assigned the target (or take it as a
   * fallback), be elected, and hold it without taking a job.
   */
  redisReachable?: () => boolean;
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
   * can be reached (`redisReachable`). Only a ready
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
   * (src/rules/kept-by-pod-phase.ts), as this replica's informer sees them.
   */
  keptByPodPhase(): KeptReport;
}

/**
 * Why a replica cannot clean a target now: `informer` — its informer has not listed the pods, or has been
 * unable to list or watch them for longer than `staleCacheAfterMs`; `stepped-down` — the self-check stepped
 * it down for want of progress and it has not shown since that it can make progress; `redis` — its Redis has
 * not answered since it started, or its connection to Redis has been down for `redisDownNotReadyMs`.
 */
export type NotReadyReason = 'informer' | 'stepped-down' | 'redis';

/** Creates the cleaner of one target; `start()` starts its informer and campaign. */
export function createTargetCleaner(opts: TargetCleanerOptions): TargetCleaner {
  const { log, informer, leadership } = opts;
  const monotonicNow = opts.monotonicNow ?? (() => performance.now());
  const dueNow = opts.dueNow ?? opts.now;
  const rules = { selector: opts.selector, policy: opts.policy, appState: opts.appState };
  const staleAfterMs = opts.staleCacheAfterMs ?? FAILOVER_TIMERS.staleCacheAfterMs;
  const cacheTrust = createCacheTrust({ informer, monotonicNow, staleAfterMs, log });
  const checkSettings = opts.selfCheck ?? selfCheckSettings(10);
  let selfCheckTimer: NodeJS.Timeout | undefined;

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
    if (opts.redisReachable && !opts.redisReachable()) out.push('redis');
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
  const follower = createFollowerSide({
    target: opts.target,
    replicaId: opts.replicaId,
    rules,
    retentionMs: opts.retentionMs,
    dryRun: opts.dryRun,
    queue: opts.queue,
    informer,
    acceptedDeletes,
    log,
    now: opts.now,
    stampNow: opts.stampNow ?? opts.now,
    telemetry: opts.telemetry,
  });
  const deletePath = createDeletePath({
    pods: opts.pods,
    informer,
    leadership,
    acceptedDeletes,
    follower,
    cacheTrust,
    recheck: opts.recheck,
    ...rules,
    retentionMs: opts.retentionMs,
    dryRun: opts.dryRun,
    dueNow,
  });
  const leader = createLeaderSide({
    ...opts,
    rules,
    deletePath,
    follower,
    dueNow,
    monotonicNow,
    informerSyncTimeoutMs: opts.informerSyncTimeoutMs ?? FAILOVER_TIMERS.informerSyncWarnMs,
    leaderStuckMs: checkSettings.leaderStuckMs,
    onProgress: () => hold.progressed(),
  });

  const kept = createKeptPodsReport({
    rules,
    pods: () => informer.list(),
    synced: () => informer.synced,
    isLeader: () => leadership.isLeader && !leader.stopped,
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
        return leader.progress.workerRunning;
      },
      get lastProgressMs() {
        return leader.progress.lastProgressMs;
      },
      get fenced() {
        return leader.progress.fenced;
      },
      get leaderSinceMs() {
        return leader.progress.leaderSinceMs;
      },
      lookAtQueue: (uids) => lookAtQueue(opts.queue.bullQueue, opts.connection, uids, opts.now()),
      firstSeenTerminalMs: (uid) => follower.firstSeenTerminalMs(uid),
      stepDown: (reason) => {
        // Not ready first: the balancer then withdraws this replica's campaign instead of campaigning again.
        hold.begin(reason);
        leadership.stepDown(reason);
        // Its next term, once it has shown progress again (or is the only one left), gets a full grace.
        leader.forgetPreviousTerm();
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

  const cleaner: TargetCleaner = {
    target: opts.target,
    pods: opts.pods,
    observe: follower.observe,
    elected: () => leader.elected(),
    lost: (reason) => leader.lost(reason),
    overdue: () => selfCheck.overdue(),
    keptByPodPhase: () => kept.report(),
    reconcile: () => leader.reconcile(),
    get isLeader() {
      return leadership.isLeader;
    },
    get ready() {
      return ready();
    },
    get trackedUids() {
      return follower.trackedUids;
    },
    get notReadyReasons() {
      return notReadyReasons();
    },
    informer,
    leadership,
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
      clearInterval(selfCheckTimer);
      await leader.stop(() => leadership.resign());
      await informer.stop();
      await opts.queue.close();
    },
  };
  // Subscribed after construction (client-go's AddEventHandler): no forward reference to this cleaner.
  informer.addEventHandler(follower.observe);
  leadership.readyWhen(ready);
  leadership.addEventHandler({
    onElected: () => cleaner.elected(),
    onLost: (reason) => cleaner.lost(reason),
  });
  return cleaner;
}
