/**
 * Whether and when a driver pod is cleaned up: the rules the enqueue side (src/cleaner/target-cleaner.ts),
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
 * The pod's cleanup deadline in epoch ms: `finishedAt + retention`. When the status has no finish time
 * (an evicted driver), `firstSeenTerminalMs` stands in. A finish time in the future (clock skew: the node
 * ahead of us, or *our* clock behind) is kept as it is, and the cleanup deferred, as Kubernetes'
 * TTL-after-finished controller does ("Found Job finished in the future … cleanup will be deferred"):
 * clamping it to `nowMs` deleted pods early whenever this replica's clock was behind, because the job's
 * deadline then came from the lagging clock (found by the nemesis, a replica's clock stepped back 17 s).
 * `skewMs` reports by how much it was in the future (0 when not), for a log line.
 */
export function deadlineMs(
  finishedAtMs: number | undefined,
  retentionMs: number,
  nowMs: number,
  firstSeenTerminalMs: number = nowMs,
): { deadlineMs: number; finishedAtMs: number; skewMs: number } {
  const finished = finishedAtMs ?? firstSeenTerminalMs;
  const skewMs = Math.max(0, finished - nowMs);
  return { deadlineMs: finished + retentionMs, finishedAtMs: finished, skewMs };
}
