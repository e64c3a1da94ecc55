/**
 * Driver pods kept by Kyuubi's `POD` state source although their driver has ended: the state container
 * (`applicationStateContainer`) has terminated, but another container (a sidecar: istio-proxy, a log
 * shipper) keeps the pod Running, so the pod phase — what `POD` reads — is not terminal. Kyuubi counts such
 * an application as RUNNING and never cleans its pod; the cleaner, following the same setting, keeps it too.
 * `CONTAINER` (set in Kyuubi and here alike) would clean it. `explain` says so for one pod; the replicas
 * count them per target (`sdc_pods_kept_by_pod_phase`, `status`), so a sidecar fleet sees the leak Kyuubi
 * itself would have had. Pure functions.
 */

import type { ApplicationState } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import { type DecisionRules, decide } from './decision.ts';

/** Why one pod is kept by the `POD` source. Times are epoch ms. */
export interface KeptByPodPhase {
  /** The state container, as named in the pod. */
  readonly container: string;
  /** Its state: FINISHED (exit code 0) or FAILED. */
  readonly containerState: ApplicationState;
  readonly exitCode: number | undefined;
  readonly finishedAtMs: number | undefined;
  /** The pod phase that keeps it (Running, Pending, Unknown). */
  readonly phase: string | undefined;
  /** The other containers still running (what keeps the pod Running). */
  readonly running: readonly string[];
}

/**
 * Why `pod` is kept by the `POD` state source although `CONTAINER` would clean it, or undefined when it is
 * not: the source is `CONTAINER` already, the pod is not a selected driver, is being deleted, is terminal
 * anyway, its state container has not terminated, or the policy would keep it under `CONTAINER` too
 * (COMPLETED and a failed driver).
 */
export function keptByPodPhase(pod: DriverPod, rules: DecisionRules): KeptByPodPhase | undefined {
  if (rules.appState.source !== 'POD') return undefined;
  const decision = decide(pod, rules);
  if (decision.action !== 'none' || decision.reason !== 'not-terminal') return undefined;
  const c = decision.state.stateContainer;
  if (!c?.terminated) return undefined;
  const underContainer = decide(pod, { ...rules, appState: { ...rules.appState, source: 'CONTAINER' } });
  if (underContainer.action !== 'enqueue') return undefined;
  const statuses: unknown = pod.status?.containerStatuses;
  const running = Array.isArray(statuses)
    ? statuses
        .filter((s) => s?.state?.running && typeof s.name === 'string' && s.name !== c.name)
        .map((s) => s.name as string)
    : [];
  return {
    container: c.name,
    containerState: c.state,
    exitCode: c.terminated.exitCode,
    finishedAtMs: c.terminated.finishedAtMs,
    phase: pod.status?.phase,
    running,
  };
}

/** The pods of one target kept by the `POD` state source: how many, and the first `limit` names (sorted). */
export interface KeptReport {
  readonly count: number;
  readonly pods: readonly string[];
}

/** An empty report. */
export const NONE_KEPT: KeptReport = { count: 0, pods: [] };

/** Counts the pods of `pods` (a target's informer cache) that {@link keptByPodPhase} keeps. */
export function findKeptByPodPhase(pods: Iterable<DriverPod>, rules: DecisionRules, limit = 5): KeptReport {
  if (rules.appState.source !== 'POD') return NONE_KEPT;
  const names: string[] = [];
  for (const pod of pods) if (keptByPodPhase(pod, rules)) names.push(pod.metadata?.name ?? '');
  if (names.length === 0) return NONE_KEPT;
  names.sort();
  return { count: names.length, pods: names.slice(0, limit) };
}
