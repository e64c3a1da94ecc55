/**
 * The follower side of one target, run on every replica whether it leads or not: each pod event the informer
 * delivers is classified (src/rules/decision.ts) and becomes at most one Redis call — a delayed cleanup job
 * keyed by the pod's UID for a terminal pod, a cancel (tombstone) for a pod being deleted, an unschedule for a
 * pod that left the selector. It makes no API calls. The leader's reconcile enqueues through the same path.
 *
 * Per-UID state kept here: what this replica last did for the UID, when it first saw a pod terminal that
 * carries no finish time, and the once-per-pod warnings; all of it goes with the pod's DELETED event.
 */
import pLimit from 'p-limit';
import type { PodState } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import type { PodEvent, PodInformer } from '../kube/pod-informer.ts';
import type { Logger } from '../log.ts';
import { type CleanupQueue, type EnqueueResult, jobDataFor } from '../queue/cleanup-queue.ts';
import { isCleanupJobId, type TargetRef } from '../queue/job-identity.ts';
import type { RefusedJob } from '../queue/queue-consumer.ts';
import { type DecisionRules, deadlineMs, decide, finishTime, malformedReason } from '../rules/decision.ts';
import type { CleanupJobData } from '../rules/job-data.ts';
import type { EnqueueTrigger, TargetTelemetry } from '../telemetry/target-telemetry.ts';
import type { AcceptedDeletes } from './accepted-deletes.ts';
import { createPodNotes } from './pod-notes.ts';

/** How many of the informer's enqueues and cancels are in flight at once (FIFO beyond). */
export const REDIS_OPS_IN_FLIGHT = 32;

/** Dependencies and settings of {@link createFollowerSide}. */
export interface FollowerSideOptions {
  target: TargetRef;
  replicaId: string;
  /** What every decision of this target judges by. */
  rules: DecisionRules;
  /** Retention after a pod's finish time, ms. */
  retentionMs: number;
  dryRun: boolean;
  queue: CleanupQueue;
  /** The target's informer: `requeueRefused` reads its cache. */
  informer: PodInformer;
  /** The UIDs whose DELETE this replica saw accepted: such a UID needs no cancel round trip. */
  acceptedDeletes: Pick<AcceptedDeletes, 'acceptedBefore'>;
  log: Logger;
  /** Wall clock, epoch ms: deadlines from Kubernetes timestamps. */
  now: () => number;
  /**
   * The clock that stamps when this replica first saw a terminal pod without a finish time of its own, epoch
   * ms: never behind the API server's clock (src/kube/server-clock.ts `notBehindNow`).
   */
  stampNow: () => number;
  telemetry?: TargetTelemetry;
}

/** The follower side of one target. */
export interface FollowerSide {
  /** The informer's event handler: classify, then enqueue, cancel or unschedule. Never throws. */
  observe(event: PodEvent, pod: DriverPod): void;
  /**
   * Enqueues the terminal pod's cleanup job (the reconcile's path too: `trigger: 'reconcile'` also brings a job
   * due later forward to this deadline). `'left-alone'`: its UID cannot name a job (warned once).
   * @throws when Redis does not answer
   */
  enqueue(pod: DriverPod, state: PodState, trigger: EnqueueTrigger): Promise<EnqueueResult | 'left-alone'>;
  /** A job refused for its data was removed: its pod, if cached, is observed again and gets a new job. */
  requeueRefused(job: RefusedJob): void;
  /** When this replica first saw the pod terminal without a finish time, epoch ms (undefined: it has one). */
  firstSeenTerminalMs(uid: string): number | undefined;
  /**
   * Runs `send` (this replica's own DELETE of `uid`) with the UID marked as being deleted: the informer's
   * events of the deletion may arrive before its answer, and need no cancel round trip meanwhile.
   */
  whileDeleting<R>(uid: string, send: () => Promise<R>): Promise<R>;
  /** How many UIDs per-UID state is kept for (src/cleaner/target-cleaner.ts `trackedUids`). */
  readonly trackedUids: number;
}

/** Creates the follower side of one target; subscribe its `observe` to the informer. */
export function createFollowerSide(opts: FollowerSideOptions): FollowerSide {
  const { log, rules, informer } = opts;
  /**
   * What this replica last did for each UID. UIDs it has already handed to Redis (`enqueued`, `cancelled`),
   * so informer resyncs don't repeat the round trip; and UIDs its own worker is deleting (`deleted`, only
   * while the DELETE is in flight: the informer's events of the deletion may come before its answer). Once
   * accepted, `acceptedDeletes` remembers the UID (bounded), so the DELETE event that follows needs no
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
   * The informer's enqueues and cancels, at most {@link REDIS_OPS_IN_FLIGHT} in flight: an initial list of
   * 10,000 terminated pods would otherwise start 10,000 Redis round trips at once, and the heap they need
   * stays in the RSS. FIFO; the queue and tombstone protocol is race-free under any interleaving
   * (src/queue/cleanup-queue.ts).
   */
  const redisOps = pLimit(REDIS_OPS_IN_FLIGHT);
  /** When this replica first saw a pod terminal without a finish time (an evicted driver). */
  const firstSeenTerminal = new Map<string, number>();
  /** UIDs that are not Kubernetes UIDs, warned about once each (forgotten when the pod goes). */
  const badUids = new Set<string>();
  /** The once-per-pod lines: fields the state rule cannot read, drivers kept by the POD state source. */
  const notes = createPodNotes(log, rules);

  const podFields = (pod: DriverPod) => ({ pod: pod.metadata?.name, uid: pod.metadata?.uid });
  const warnFailed = (pod: DriverPod, what: string) => (err: unknown) =>
    log.warn({ ...podFields(pod), err: { message: (err as Error).message } }, what);

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
   * The pod's finish time (src/rules/decision.ts `finishTime`), else when this replica first saw it terminal
   * (stamped now on `stampNow` the first time), and the deadline from it. A finish time that cannot be one
   * (before the pod's creation, or far in the future) or one in the future is warned about once per pod.
   */
  function deadlineOf(pod: DriverPod, state: PodState): { deadlineMs: number; finishedAtMs: number } {
    const uid = pod.metadata?.uid ?? '';
    const now = opts.now();
    const fin = finishTime(pod, state, now);
    if (fin.ms === undefined && !firstSeenTerminal.has(uid)) firstSeenTerminal.set(uid, opts.stampNow());
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

  /** Nothing to send for this UID: already cancelled, being deleted by us, or deleted by us. */
  const handledAlready = (uid: string) => {
    const state = lastActionByUid.get(uid);
    return state === 'cancelled' || state === 'deleted' || opts.acceptedDeletes.acceptedBefore(uid);
  };

  async function cancel(pod: DriverPod, why: string): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    if (handledAlready(uid)) return;
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
    if (handledAlready(uid)) return;
    const result = await opts.queue.unschedule(uid);
    log.debug(
      { ...podFields(pod), why: 'DELETED without deletionTimestamp (left the selector)', result },
      'cleanup unscheduled: pending job removed, no tombstone',
    );
  }

  /** The pod is gone from the informer: its per-UID state goes, after the removal of its pending job. */
  function removed(pod: DriverPod, uid: string): void {
    // A tombstone means "this UID is being or has been deleted", so only evidence of that writes one: the
    // deletionTimestamp the API server sets before it removes a pod (DELETED then carries it). A label-
    // selected watch also sends DELETED when a pod stops matching (relabelled out of the selector): that pod
    // is still there and may be relabelled back in, so only its pending job goes.
    const deleting = Boolean(pod.metadata?.deletionTimestamp);
    const removal: Promise<void> = redisOps(() => (deleting ? cancel(pod, 'DELETE event') : unschedule(pod)))
      .catch(warnFailed(pod, 'cancel failed'))
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
      removed(pod, uid);
      return;
    }
    const decision = decide(pod, rules);
    notes.observed(pod, decision, event);
    if (decision.action === 'cancel') {
      void redisOps(() => cancel(pod, 'deletionTimestamp set')).catch(warnFailed(pod, 'cancel failed'));
    } else if (decision.action === 'enqueue') {
      const removal = leaving.get(uid);
      if (lastActionByUid.has(uid) && !removal) return;
      // Back into the selector while its job is being removed: enqueue once the removal is done, not beside it
      // (the add would find the job about to go, and the removal's end would forget the add).
      const add = () => redisOps(() => enqueue(pod, decision.state, event));
      // Redis unreachable: the leader's reconcile will add it later.
      void (removal ? removal.then(add) : add()).catch(warnFailed(pod, 'enqueue failed'));
    }
  }

  /**
   * A job refused for its data was removed (src/queue/queue-consumer.ts): its pod gets a new job from the
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

  async function whileDeleting<R>(uid: string, send: () => Promise<R>): Promise<R> {
    // Marked before the request: the informer's events of the deletion may arrive before its answer.
    // Should the DELETE not be accepted, a skipped cancel costs at most one more no-op run of the job.
    const before = lastActionByUid.get(uid);
    lastActionByUid.set(uid, 'deleted');
    try {
      return await send();
    } finally {
      // Answered: an accepted DELETE is remembered by acceptedDeletes (bounded), not here. A DELETED
      // event that came meanwhile has removed the entry already.
      if (lastActionByUid.get(uid) === 'deleted') {
        if (before) lastActionByUid.set(uid, before);
        else lastActionByUid.delete(uid);
      }
    }
  }

  return {
    observe,
    enqueue,
    requeueRefused,
    firstSeenTerminalMs: (uid) => firstSeenTerminal.get(uid),
    whileDeleting,
    get trackedUids() {
      return new Set([
        ...lastActionByUid.keys(),
        ...firstSeenTerminal.keys(),
        ...leaving.keys(),
        ...warnedFinish,
      ]).size;
    },
  };
}
