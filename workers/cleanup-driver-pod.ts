/**
 * The cleanup job handler: a function of (job data, dependencies) → {@link Outcome}. It checks in layers,
 * as Kubernetes' TTL-after-finished controller does (pkg/controller/ttlafterfinished):
 *
 *   stored deadline reached? → DELETE accepted before? → fence (still the leader?) → re-check the pod → its
 *   own deadline reached? → rate limiter → fence again → DELETE with preconditions → outcome.
 *
 * The re-check makes stale work harmless: a pod already gone, replaced by a new pod of the same name,
 * already being deleted, relabelled out of the selector or no longer terminal is left alone. Where the
 * re-checked copy comes from is the `recheck` mode:
 * - `resource-version` (default): the informer's copy, and the DELETE carries its `resourceVersion` as a
 *   precondition, so the API server deletes only the very version we checked — atomically, one request.
 *   Any change since (a `deletionTimestamp`, a finalizer, a relabel) is a 409: then the handler GETs the
 *   pod and re-checks it live. Not in the cache (not synced, or already gone) → a live GET.
 * - `live`: GET the pod, then DELETE with `preconditions` `uid` and the `resourceVersion` just read (two
 *   requests per pod).
 * - `cache`: the informer's copy, DELETE with `preconditions.uid` only; a pod not in the cache is read live (GET).
 * After a live GET the DELETE always carries the `resourceVersion` read: a pod relabelled, or whose deletion
 * began (a finalizer holds it), between the GET and the DELETE is a 409, and is read and re-checked again (at
 * most {@link LIVE_ROUNDS} times), never deleted from an outdated copy nor deleted twice.
 *
 * The deadline stored with the job only says when to wake up (the enqueuing replica computed it, maybe with
 * another retention, and the dashboard can edit it). The handler's own deadline is the re-checked pod's finish
 * time (src/rules/decision.ts `finishTime`: `finishedAt`, else its last condition change, else when this
 * replica first saw it terminal) plus **this replica's** retention; a job that is early by it goes back
 * (`not-yet`, with the deadline to store). A pod with no time of its own that this replica never saw keeps the
 * stored deadline.
 * While the informer's cache is not trusted (`cacheUntrusted`: its list or watch has been failing for a
 * while, src/cleaner/cache-trust.ts), both cache modes re-check as `live` does; so does the run of a job whose
 * earlier DELETE may have left unanswered (`liveRecheck`: its answer given up, or the job taken over from a
 * frozen leader), since the cache may not show that deletion yet.
 * The UID precondition always closes the window between the check and the DELETE against re-created pods.
 * A UID whose DELETE this replica saw accepted (`acceptedBefore`) is `already-deleting` before any of that:
 * Redis may have lost the job that remembered it, and the cache may not show the deletion yet.
 * No no-op is ever a warning.
 * The handler never touches BullMQ: `src/queue/queue-consumer.ts` maps outcomes onto it. Its contract
 * (`CleanupDeps`, `CleanupHandler`) and the `Outcome` type live in src/rules/.
 */

import { KubeApiError } from '../src/kube/api-status.ts';
import { KYUUBI_STATE_DEFAULTS, podState } from '../src/kube/application-state.ts';
import type { DriverPod } from '../src/kube/driver-pod.ts';
import { DeleteAnswerAbandonedError, type DeletePreconditions } from '../src/kube/pod-api.ts';
import { FencedError } from '../src/leadership/fenced-error.ts';
import { deadlineMs, decide, finishTime } from '../src/rules/decision.ts';
import type { CleanupDeps } from '../src/rules/handler.ts';
import type { CleanupJobData } from '../src/rules/job-data.ts';
import type { Outcome } from '../src/rules/outcome.ts';

function failure(step: 'get' | 'delete', err: unknown): Outcome {
  if (err instanceof KubeApiError) {
    return {
      outcome: 'failed',
      step,
      code: err.code,
      reason: err.reason,
      message: err.message,
      retryAfterMs: err.retryAfterMs,
    };
  }
  throw err; // a bug, not an API failure: let BullMQ record it
}

/** Live GET → DELETE {uid, resourceVersion} rounds before a pod that keeps changing is a failed outcome. */
export const LIVE_ROUNDS = 3;

/**
 * Processes one cleanup job.
 * @param signal aborted when leadership is lost or the replica shuts down; checked before the DELETE.
 * @returns the outcome; never throws for API failures (they are `failed` outcomes).
 */
export async function cleanupDriverPod(
  job: CleanupJobData,
  deps: CleanupDeps,
  signal: AbortSignal,
): Promise<Outcome> {
  const now = deps.now();
  if (now < job.deadlineMs) return { outcome: 'not-yet', dueInMs: job.deadlineMs - now };
  if (signal.aborted) return { outcome: 'aborted' };
  // Our own DELETE of this UID was accepted already: whatever the cache (maybe stale) or a job re-enqueued
  // after Redis lost its data says, the pod is being deleted. One DELETE per pod.
  if (deps.acceptedBefore?.(job.uid)) return { outcome: 'already-deleting', ours: true };
  const fenced = await fence(deps, signal);
  if (fenced) return fenced;
  // A DELETE of this job may have left unanswered (`liveRecheck`): a cache that has not seen that deletion
  // yet would send a second one. An untrusted cache is not asked either.
  const mode =
    job.liveRecheck || (deps.recheck !== 'live' && deps.cacheUntrusted?.()) ? 'live' : deps.recheck;

  // The informer's copy: resource-version (confirmed by the DELETE's precondition) and cache (uid only).
  if (mode !== 'live') {
    const cached = deps.cached(job.pod);
    const version = cached?.metadata?.resourceVersion;
    if (cached && (mode === 'cache' || version)) {
      const noOp = noOpFor(cached, job, deps);
      if (mode === 'cache' && noOp) return noOp;
      // Only what a stale cache cannot get wrong is final here: a deletionTimestamp is never unset. A copy
      // that looks re-created, not terminal or relabelled may be behind the API server: ask it (GET below).
      if (noOp?.outcome === 'already-deleting') return noOp;
      if (!noOp) {
        const early = notDueYet(cached, job, deps);
        if (early) return early;
        const preconditions =
          mode === 'cache' ? { uid: job.uid } : { uid: job.uid, resourceVersion: version };
        const sent = await sendDelete(job, deps, signal, preconditions);
        if (sent !== 'conflict') return sent;
        // uid only: another UID has the name (re-created).
        if (mode === 'cache') return { outcome: 'replaced' };
        // 409: the pod changed since the informer saw it (or was re-created): re-check the live object,
        // and the leadership again before a second DELETE.
        const fenced = await fence(deps, signal);
        if (fenced) return fenced;
      }
    }
  }

  // A live re-check: not in the cache (a miss is not "absent": the informer may not have seen it yet), a
  // cached copy the API server refused, or the `live` mode.
  for (let round = 1; ; round++) {
    let pod: DriverPod | undefined;
    try {
      pod = await deps.pods.get(job.namespace, job.pod, signal);
    } catch (err) {
      if (signal.aborted) return { outcome: 'aborted' };
      return failure('get', err);
    }
    const noOp = noOpFor(pod, job, deps);
    if (noOp) return noOp;
    const early = notDueYet(pod as DriverPod, job, deps);
    if (early) return early;
    const resourceVersion = pod?.metadata?.resourceVersion;
    const sent = await sendDelete(
      job,
      deps,
      signal,
      resourceVersion ? { uid: job.uid, resourceVersion } : { uid: job.uid },
    );
    if (sent !== 'conflict') return sent;
    if (!resourceVersion) return { outcome: 'replaced' };
    // 409: re-created, relabelled, or its deletion began since the GET: read it again.
    if (round >= LIVE_ROUNDS) {
      return {
        outcome: 'failed',
        step: 'delete',
        code: 409,
        reason: 'Conflict',
        message: `the pod changed between each of ${LIVE_ROUNDS} GETs and the DELETE that followed it`,
        retryAfterMs: undefined,
      };
    }
    const fenced = await fence(deps, signal);
    if (fenced) return fenced;
  }
}

/** The fence (still the leader?): undefined when this replica may DELETE, else the outcome that stops the job. */
async function fence(deps: CleanupDeps, signal: AbortSignal): Promise<Outcome | undefined> {
  try {
    await deps.fence(signal);
    return undefined;
  } catch (err) {
    if (signal.aborted) return { outcome: 'aborted' };
    if (err instanceof FencedError) return { outcome: 'fenced', reason: err.message };
    throw err;
  }
}

/**
 * The re-check of a pod copy: the no-op outcome that stops the job, or undefined when it may be deleted.
 * (`recheck` names the mode, `deps.recheck`: where the copy comes from.)
 */
function noOpFor(pod: DriverPod | undefined, job: CleanupJobData, deps: CleanupDeps): Outcome | undefined {
  if (!pod) return { outcome: 'already-absent' };
  // Same name, other UID: the pod was re-created; the old pod's job must never touch it.
  if (pod.metadata?.uid !== job.uid) return { outcome: 'replaced' };
  if (pod.metadata?.deletionTimestamp) return { outcome: 'already-deleting' };
  const decision = decide(pod, {
    selector: deps.selector,
    policy: deps.policy,
    appState: deps.appState ?? KYUUBI_STATE_DEFAULTS,
  });
  if (decision.action !== 'enqueue') return { outcome: 'skipped', reason: decision.reason };
  return undefined;
}

/**
 * This replica's own deadline for an eligible pod: its finish time (its own timestamps, else when this
 * replica first saw it terminal) + `deps.retentionMs`. `not-yet` until then, with that deadline; undefined
 * when it is due, or when no finish time is known here (the stored deadline, already reached, stands).
 */
function notDueYet(pod: DriverPod, job: CleanupJobData, deps: CleanupDeps): Outcome | undefined {
  const now = deps.now();
  const state = podState(pod, deps.appState ?? KYUUBI_STATE_DEFAULTS);
  const finished = finishTime(pod, state, now).ms ?? deps.firstSeenTerminalMs?.(job.uid);
  if (finished === undefined) return undefined;
  const own = deadlineMs(finished, deps.retentionMs, now).deadlineMs;
  return now < own ? { outcome: 'not-yet', dueInMs: own - now, deadlineMs: own } : undefined;
}

/**
 * The only mutating call: DELETE with `preconditions`, after the last leadership gates: a fence once the rate
 * limiter has given the request its token (the wait may be long, and a paused machine is seen by no clock of
 * ours), and the lease's freshness as the request is written (src/kube/kube-http.ts).
 * @returns the outcome, or `conflict` when a precondition failed (409) for the caller to interpret.
 */
async function sendDelete(
  job: CleanupJobData,
  deps: CleanupDeps,
  signal: AbortSignal,
  preconditions: DeletePreconditions,
): Promise<Outcome | 'conflict'> {
  const latenessMs = Math.max(0, deps.now() - job.deadlineMs);
  if (deps.dryRun) return { outcome: 'would-delete', latenessMs };
  // Last gate before the request: the re-check may have taken a while.
  if (signal.aborted) return { outcome: 'aborted' };
  if (!deps.stillLeader()) return { outcome: 'fenced', reason: 'lease went stale during the re-check' };
  try {
    const result = await deps.pods.delete(job.namespace, job.pod, preconditions, signal, {
      // The rate limiter may have held the request for a long while, or the machine paused in it (a VM
      // stopped: the monotonic clock does not advance, so the lease's freshness cannot tell): ask the backend.
      afterWait: () => deps.fence(signal),
      // No async step may separate the last leadership check from the request, a connection's set-up included.
      beforeSend: () => {
        if (!deps.stillLeader()) throw new FencedError('lease went stale while the DELETE waited to be sent');
      },
    });
    if (result === 'not-found') return { outcome: 'already-absent' };
    if (result === 'conflict') return 'conflict';
    return { outcome: 'accepted', latenessMs: Math.max(0, deps.now() - job.deadlineMs) };
  } catch (err) {
    if (err instanceof FencedError) return { outcome: 'fenced', reason: err.message };
    // Sent, and its answer given up after a grace: not a failure, the API server may well have applied it.
    if (err instanceof DeleteAnswerAbandonedError) return { outcome: 'aborted', deleteSent: true };
    if (signal.aborted && !(err instanceof KubeApiError)) return { outcome: 'aborted' };
    return failure('delete', err);
  }
}
