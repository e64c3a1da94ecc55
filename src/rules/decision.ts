/**
 * Whether and when a driver pod is cleaned up: the rules the enqueue side (src/cleaner/follower-side.ts),
 * the handler (workers/cleanup-driver-pod.ts) and the self-check (src/cleaner/overdue.ts) share, as the
 * TTL-after-finished controller's `needsCleanup` and `timeLeft` serve both its event handlers and its
 * `processJob`. Pure functions, no I/O; "now" comes in as an argument.
 */
import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy } from '../config/schema.ts';
import { type AppStateSettings, type PodState, podState } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';

/**
 * The cleanup decision for one observed pod:
 * - `enqueue`: terminal, selected, eligible under the policy, not being deleted → schedule its cleanup job;
 * - `cancel`: `deletionTimestamp` is set → someone is deleting it: cancel any job and tombstone it;
 * - `none`: leave it alone (`reason` says why). A pod we cannot classify (`malformed`) is left alone and logged.
 */
export type Decision =
  | { readonly action: 'enqueue'; readonly state: PodState }
  | { readonly action: 'cancel'; readonly reason: 'deleting' }
  | { readonly action: 'none'; readonly reason: 'malformed' | 'not-selected' }
  | { readonly action: 'none'; readonly reason: 'not-terminal' | 'policy'; readonly state: PodState };

/**
 * What a pod is judged by: the label selector, the policy and Kyuubi's state settings (which container, if
 * any, decides the application state: src/kube/application-state.ts).
 */
export interface DecisionRules {
  readonly selector: LabelSelector;
  readonly policy: Policy;
  readonly appState: AppStateSettings;
}

/** Why a pod object cannot be handled: missing uid/name/namespace. `undefined` when it is well-formed. */
export function malformedReason(pod: DriverPod): string | undefined {
  const m = pod?.metadata;
  if (!m) return 'no metadata';
  if (!m.uid) return 'no metadata.uid';
  if (!m.name) return 'no metadata.name';
  if (!m.namespace) return 'no metadata.namespace';
  return undefined;
}

/**
 * Decides what to do with a pod. Pure: the same pod always gets the same decision.
 * Terminal and the state are Kyuubi's under `opts.appState`. Policy COMPLETED (Kyuubi's: `!isFailed`, so
 * FINISHED only) keeps FAILED/KILLED drivers for debugging.
 */
export function decide(pod: DriverPod, opts: DecisionRules): Decision {
  if (malformedReason(pod)) return { action: 'none', reason: 'malformed' };
  // The informer applies the selector server-side; re-checking here also covers relabelled pods and the cache mode.
  if (!opts.selector.matches(pod.metadata?.labels)) return { action: 'none', reason: 'not-selected' };
  if (pod.metadata?.deletionTimestamp) return { action: 'cancel', reason: 'deleting' };
  const state = podState(pod, opts.appState);
  if (!state.terminal) return { action: 'none', reason: 'not-terminal', state };
  if (opts.policy === 'COMPLETED' && state.state !== 'FINISHED')
    return { action: 'none', reason: 'policy', state };
  return { action: 'enqueue', state };
}

/**
 * How far ahead of "now" a finish time may be and still be taken as one, ms (10 min). A node's clock a little
 * ahead of ours (or ours behind) defers the cleanup, as Kubernetes' TTL-after-finished controller does; a finish
 * time further ahead (`9999-12-31`) would defer it for good — such a pod would never be cleaned nor counted as
 * overdue — so it is no finish time at all (see {@link finishTime}).
 */
export const FINISH_TIME_MAX_AHEAD_MS = 10 * 60_000;

/** Where a pod's finish time came from ({@link finishTime}). */
export type FinishSource = 'finishedAt' | 'condition';

/**
 * The time a terminal pod finished, epoch ms, from its own Kubernetes timestamps — the same for every replica:
 * - the driver container's `state.terminated.finishedAt` (written by the kubelet as the container ended);
 * - else the latest `lastTransitionTime` of the pod's conditions: the kubelet turns `Ready` (and
 *   `ContainersReady`) to False as the pod's containers end, and an eviction adds `DisruptionTarget`
 *   (k8s.io/kubernetes pkg/kubelet/status/generate.go). A Spark driver has no readiness probe, so it is Ready
 *   while it runs and its last transition is its end.
 *
 * A timestamp is taken only when it is plausible: not before the pod's `creationTimestamp` (a node's clock far
 * behind, or junk such as `1970-01-01`), and at most {@link FINISH_TIME_MAX_AHEAD_MS} ahead of `nowMs`.
 * `implausible` reports a `finishedAt` that was refused (for a warning); `ms` is then the condition time, if
 * any. Undefined `ms`: the pod carries no usable time of its own, and the caller's first-seen time stands in.
 */
export function finishTime(
  pod: DriverPod,
  state: PodState,
  nowMs: number,
): {
  ms: number | undefined;
  source: FinishSource | undefined;
  implausible?: { finishedAtMs: number; why: 'before creationTimestamp' | 'too far in the future' };
} {
  const created = timeMs(pod.metadata?.creationTimestamp);
  const why = (ms: number) =>
    created !== undefined && ms < created
      ? ('before creationTimestamp' as const)
      : ms > nowMs + FINISH_TIME_MAX_AHEAD_MS
        ? ('too far in the future' as const)
        : undefined;
  const fin = state.finishedAtMs;
  const refused = fin === undefined ? undefined : why(fin);
  if (fin !== undefined && !refused) return { ms: fin, source: 'finishedAt' };
  const implausible =
    fin !== undefined && refused ? { implausible: { finishedAtMs: fin, why: refused } } : {};
  let latest: number | undefined;
  const conditions: unknown = pod.status?.conditions;
  if (Array.isArray(conditions)) {
    for (const c of conditions) {
      const t = timeMs((c as { lastTransitionTime?: unknown } | null)?.lastTransitionTime);
      if (t !== undefined && !why(t) && (latest === undefined || t > latest)) latest = t;
    }
  }
  return latest === undefined
    ? { ms: undefined, source: undefined, ...implausible }
    : { ms: latest, source: 'condition', ...implausible };
}

function timeMs(t: unknown): number | undefined {
  if (typeof t !== 'string') return undefined;
  const ms = Date.parse(t);
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * The pod's cleanup deadline in epoch ms: `finishedAt + retention`. When the status has no finish time
 * (an evicted driver), `firstSeenTerminalMs` stands in. A finish time in the future (clock skew: the node
 * ahead of us, or *our* clock behind) is kept as it is, and the cleanup deferred, as Kubernetes'
 * TTL-after-finished controller does ("Found Job finished in the future … cleanup will be deferred"):
 * clamping it to `nowMs` deleted pods early whenever this replica's clock was behind, because the job's
 * deadline then came from the lagging clock (found by the nemesis, a replica's clock stepped back 17 s).
 * `skewMs` reports by how much the pod's own finish time was in the future (0 when not, and 0 without one: a
 * first-seen stamp is this replica's own, taken on a clock not behind the API server's, and may lead `nowMs` by
 * that clock's offset or the millisecond that passed between the two readings), for a log line.
 */
export function deadlineMs(
  finishedAtMs: number | undefined,
  retentionMs: number,
  nowMs: number,
  firstSeenTerminalMs: number = nowMs,
): { deadlineMs: number; finishedAtMs: number; skewMs: number } {
  const finished = finishedAtMs ?? firstSeenTerminalMs;
  const skewMs = finishedAtMs === undefined ? 0 : Math.max(0, finishedAtMs - nowMs);
  return { deadlineMs: finished + retentionMs, finishedAtMs: finished, skewMs };
}
