/**
 * Pod → application state (the state view every replica keeps). Pure functions, no I/O. The cleanup
 * decision built on it is src/cleanup/decision.ts.
 *
 * The state mapping is Kyuubi's (KubernetesApplicationOperation): Pending → PENDING, Running → RUNNING,
 * Succeeded → FINISHED, Failed → FAILED, driver container terminated with reason OOMKilled → KILLED,
 * anything else → UNKNOWN. A terminated driver container (`spark-kubernetes-driver`) wins over the pod
 * phase, because a sidecar (istio-proxy, …) may keep the pod Running after Spark has finished.
 */

import { DRIVER_CONTAINER, type DriverPod, type TerminatedState } from './driver-pod.ts';

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
