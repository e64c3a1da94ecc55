/**
 * Pod → application state, and the cleanup decision for a driver pod. Pure functions, no I/O.
 *
 * The state mapping is Kyuubi's (KubernetesApplicationOperation): Pending → PENDING, Running → RUNNING,
 * Succeeded → FINISHED, Failed → FAILED, driver container terminated with reason OOMKilled → KILLED,
 * anything else → UNKNOWN. A terminated driver container (`spark-kubernetes-driver`) wins over the pod
 * phase, because a sidecar (istio-proxy, …) may keep the pod Running after Spark has finished.
 */
import type { Policy } from '../config/schema.ts';
import { DRIVER_CONTAINER, type DriverPod, type TerminatedState } from './driver-pod.ts';
import type { LabelSelector } from './label-selector.ts';

export { DRIVER_CONTAINER };

/** Kyuubi's ApplicationState values (org.apache.kyuubi.engine.ApplicationState). */
export type ApplicationState = 'PENDING' | 'RUNNING' | 'FINISHED' | 'FAILED' | 'KILLED' | 'UNKNOWN';

/** What a pod's status says about the application. `finishedAtMs` is epoch ms, when the status carries it. */
export interface PodState {
  readonly state: ApplicationState;
  readonly terminal: boolean;
  readonly finishedAtMs: number | undefined;
  /** A short error text for FAILED/KILLED (container reason and exit code, or the pod's reason). */
  readonly error: string | undefined;
}

function driverTerminated(pod: DriverPod): TerminatedState | undefined {
  const statuses: unknown = pod.status?.containerStatuses;
  // trimPod keeps a malformed status as is (not an array, null items): it must not throw here, or one odd
  // pod would fail the whole reconcile.
  if (!Array.isArray(statuses)) return undefined;
  const driver = statuses.find((c) => c?.name === DRIVER_CONTAINER) as
    | NonNullable<NonNullable<DriverPod['status']>['containerStatuses']>[number]
    | undefined;
  return driver?.state?.terminated ?? undefined;
}

function timeMs(t: Date | string | undefined): number | undefined {
  if (t === undefined || t === null) return undefined;
  const ms = t instanceof Date ? t.getTime() : Date.parse(t);
  return Number.isFinite(ms) ? ms : undefined;
}

/** Maps a pod to Kyuubi's application state; terminal means FINISHED, FAILED or KILLED. Never throws. */
export function podState(pod: DriverPod): PodState {
  const term = driverTerminated(pod);
  if (term) {
    const state: ApplicationState =
      term.reason === 'OOMKilled' ? 'KILLED' : term.exitCode === 0 ? 'FINISHED' : 'FAILED';
    const error = state === 'FINISHED' ? undefined : `${term.reason ?? 'Error'} (exit code ${term.exitCode})`;
    return { state, terminal: true, finishedAtMs: timeMs(term.finishedAt), error };
  }
  switch (pod.status?.phase) {
    case 'Pending':
      return { state: 'PENDING', terminal: false, finishedAtMs: undefined, error: undefined };
    case 'Running':
      return { state: 'RUNNING', terminal: false, finishedAtMs: undefined, error: undefined };
    case 'Succeeded':
      return { state: 'FINISHED', terminal: true, finishedAtMs: undefined, error: undefined };
    case 'Failed':
      return {
        state: 'FAILED',
        terminal: true,
        finishedAtMs: undefined,
        error: [pod.status?.reason, pod.status?.message].filter(Boolean).join(': ') || 'Failed',
      };
    default:
      return { state: 'UNKNOWN', terminal: false, finishedAtMs: undefined, error: undefined };
  }
}

/**
 * The cleanup decision for one observed pod:
 * - `enqueue`: terminal, selected, eligible under the policy, not being deleted → schedule its cleanup job;
 * - `cancel`: `deletionTimestamp` is set → someone is deleting it: cancel any job and tombstone it;
 * - `none`: leave it alone (`reason` says why). A pod we cannot classify (`malformed`) is left alone and logged.
 */
export type Decision =
  | { readonly action: 'enqueue'; readonly state: PodState }
  | { readonly action: 'cancel'; readonly reason: 'deleting' }
  | { readonly action: 'none'; readonly reason: 'malformed' | 'not-selected' | 'not-terminal' | 'policy' };

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
 * Policy COMPLETED (Kyuubi's) cleans only FINISHED drivers and keeps FAILED/KILLED ones for debugging.
 */
export function decide(pod: DriverPod, opts: { selector: LabelSelector; policy: Policy }): Decision {
  if (malformedReason(pod)) return { action: 'none', reason: 'malformed' };
  // The informer applies the selector server-side; re-checking here also covers relabelled pods and the cache mode.
  if (!opts.selector.matches(pod.metadata?.labels)) return { action: 'none', reason: 'not-selected' };
  if (pod.metadata?.deletionTimestamp) return { action: 'cancel', reason: 'deleting' };
  const state = podState(pod);
  if (!state.terminal) return { action: 'none', reason: 'not-terminal' };
  if (opts.policy === 'COMPLETED' && state.state !== 'FINISHED') return { action: 'none', reason: 'policy' };
  return { action: 'enqueue', state };
}

/**
 * The pod's cleanup deadline in epoch ms: `finishedAt + retention`. When the status has no finish time
 * (an evicted driver), `firstSeenTerminalMs` stands in. A finish time in the future (clock skew between
 * the node and us) is clamped to `nowMs`, so we never wait beyond now + retention; `skewMs` reports by how
 * much it was in the future (0 when not), for a log line.
 */
export function deadlineMs(
  finishedAtMs: number | undefined,
  retentionMs: number,
  nowMs: number,
  firstSeenTerminalMs: number = nowMs,
): { deadlineMs: number; finishedAtMs: number; skewMs: number } {
  const finished = finishedAtMs ?? firstSeenTerminalMs;
  const skewMs = Math.max(0, finished - nowMs);
  const clamped = Math.min(finished, nowMs);
  return { deadlineMs: clamped + retentionMs, finishedAtMs: clamped, skewMs };
}
