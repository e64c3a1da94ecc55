/**
 * Pod → application state (the state view every replica keeps), exactly as Kyuubi computes it, so that the
 * cleaner deletes a driver pod when, and only when, Kyuubi's own cleanup would have. Pure functions, no I/O.
 * The cleanup decision built on it is src/rules/decision.ts.
 *
 * The rule is Kyuubi's `KubernetesApplicationOperation.getApplicationStateAndErrorFromPod` (kyuubi-server,
 * org/apache/kyuubi/engine/KubernetesApplicationOperation.scala, lines 636–711 in v1.12.0), driven by two
 * settings with Kyuubi's names and defaults ({@link AppStateSettings}):
 *
 * - `kyuubi.kubernetes.application.state.source` = `POD` (the default): the pod phase alone — Pending →
 *   PENDING, Running → RUNNING, Succeeded → FINISHED, Failed (and `Error`) → FAILED, `OOMKilled` → KILLED,
 *   Unknown or anything else → UNKNOWN. A driver container that has ended while a sidecar keeps the pod
 *   Running is still RUNNING: Kyuubi keeps such a pod, and so does the cleaner.
 * - `CONTAINER`: the container named by `kyuubi.kubernetes.application.state.container` (default
 *   `spark-kubernetes-driver`, matched ignoring case) once its state is terminal, else a terminal pod phase,
 *   else the container's state, else the pod phase. A container's state: waiting with no reason or with
 *   `ContainerCreating`/`PodInitializing` → PENDING, waiting with any other reason (`ErrImagePull`,
 *   `CrashLoopBackOff`, …) → FAILED (Kyuubi ≥ 1.11.0; before, PENDING), running → RUNNING, terminated with
 *   exit code 0 → FINISHED, any other exit code (137 for OOMKilled included) → FAILED, none → UNKNOWN.
 *
 * Terminal means FINISHED, FAILED or KILLED (`ApplicationState.isTerminated`, ApplicationOperation.scala).
 *
 * The finish time (the retention counts from it): the state container's `finishedAt` when its state decides,
 * else, for a terminal pod, the latest `finishedAt` of its containers (the moment the pod ended); none for an
 * evicted driver without container statuses (the cleaner then counts from when it first saw it terminal).
 */

import { DRIVER_CONTAINER, type DriverPod, type TrimmedContainerState } from './driver-pod.ts';

export { DRIVER_CONTAINER };

/** Kyuubi's ApplicationState values (org.apache.kyuubi.engine.ApplicationState) a pod can map to. */
export type ApplicationState = 'PENDING' | 'RUNNING' | 'FINISHED' | 'FAILED' | 'KILLED' | 'UNKNOWN';

/** Where the application state is read from: Kyuubi's `kyuubi.kubernetes.application.state.source`. */
export type StateSource = 'POD' | 'CONTAINER';

/**
 * The two settings of Kyuubi's state rule, with Kyuubi's meaning (configuration `applicationStateSource` and
 * `applicationStateContainer`).
 */
export interface AppStateSettings {
  /** `kyuubi.kubernetes.application.state.source`: `POD` (Kyuubi's default) or `CONTAINER`. */
  readonly source: StateSource;
  /** `kyuubi.kubernetes.application.state.container`, matched ignoring case (default `spark-kubernetes-driver`). */
  readonly container: string;
}

/** Kyuubi's defaults (KyuubiConf.scala, `KUBERNETES_APPLICATION_STATE_SOURCE` / `_CONTAINER`). */
export const KYUUBI_STATE_DEFAULTS: AppStateSettings = { source: 'POD', container: DRIVER_CONTAINER };

/** The state container as the pod shows it, whatever the source (what `explain` and the kept-pod count read). */
export interface StateContainerView {
  /** Its name as in the pod. */
  readonly name: string;
  /** Its own state, as Kyuubi maps a container state. */
  readonly state: ApplicationState;
  /** Set once it has terminated. `finishedAtMs` is epoch ms, when readable. */
  readonly terminated?: {
    readonly exitCode?: number;
    readonly reason?: string;
    readonly finishedAtMs?: number;
  };
}

/** What a pod's status says about the application. `finishedAtMs` is epoch ms, when the status carries it. */
export interface PodState {
  readonly state: ApplicationState;
  readonly terminal: boolean;
  readonly finishedAtMs: number | undefined;
  /** A short error text for FAILED/KILLED (container reason and exit code, or the pod's reason). */
  readonly error: string | undefined;
  /** What decided the state: the state container (source CONTAINER only) or the pod phase. */
  readonly from: 'container' | 'pod-phase';
  /** The state container (`settings.container`), when the pod lists it. */
  readonly stateContainer: StateContainerView | undefined;
  /**
   * Fields the rule read and could not understand, each with what was assumed instead (a phase that is not
   * one, an unparsable `finishedAt`, a `containerStatuses` that is not a list): the replica logs them once
   * per pod. Empty when everything read was well-formed.
   */
  readonly unreadable: readonly string[];
}

const PHASE_STATES: Readonly<Record<string, ApplicationState>> = {
  Pending: 'PENDING',
  Running: 'RUNNING',
  Succeeded: 'FINISHED',
  Failed: 'FAILED',
  // Not phases Kubernetes sets; Kyuubi's podStateToApplicationState maps them, so do we.
  Error: 'FAILED',
  OOMKilled: 'KILLED',
  Unknown: 'UNKNOWN',
};

/** Waiting reasons that still mean "starting" (Kyuubi's `PENDING_WAITING_REASONS`). */
const PENDING_WAITING_REASONS: ReadonlySet<string> = new Set(['ContainerCreating', 'PodInitializing']);

/** `ApplicationState.isTerminated` (NOT_FOUND aside: a pod we see is found). */
export function isTerminalState(state: ApplicationState): boolean {
  return state === 'FINISHED' || state === 'FAILED' || state === 'KILLED';
}

/** Kyuubi's `containerStateToApplicationState`. */
function containerStateOf(s: TrimmedContainerState | undefined): ApplicationState {
  if (s?.waiting) {
    const reason = s.waiting.reason?.trim();
    return !reason || PENDING_WAITING_REASONS.has(reason) ? 'PENDING' : 'FAILED';
  }
  if (s?.running) return 'RUNNING';
  if (!s?.terminated) return 'UNKNOWN';
  return s.terminated.exitCode === 0 ? 'FINISHED' : 'FAILED';
}

/** Epoch ms of an RFC 3339 time; undefined (and a note) when it is not one. */
function finishMs(at: string | undefined, what: string, notes: string[]): number | undefined {
  if (at === undefined) return undefined;
  const ms = Date.parse(at);
  if (Number.isFinite(ms)) return ms;
  notes.push(
    `${what} ${JSON.stringify(at)} is not a timestamp: the retention counts from when the pod was first seen terminal`,
  );
  return undefined;
}

/** The pod's container statuses that are readable, and notes on the ones that are not. */
function containerStatuses(pod: DriverPod, notes: string[]) {
  const statuses: unknown = pod.status?.containerStatuses;
  if (statuses === undefined || statuses === null) return [];
  // trimPod keeps a malformed value as is: it must not throw here, or one odd pod would fail a whole reconcile.
  if (!Array.isArray(statuses)) {
    notes.push('status.containerStatuses is not a list: no container state read');
    return [];
  }
  const readable = statuses.filter((c): c is { name: string; state?: TrimmedContainerState } => {
    const ok = typeof c === 'object' && c !== null && typeof (c as { name?: unknown }).name === 'string';
    if (!ok) notes.push('status.containerStatuses has an entry without a name: left out');
    return ok;
  });
  return readable;
}

/**
 * Maps a pod to Kyuubi's application state under `settings`; terminal means FINISHED, FAILED or KILLED.
 * Never throws: what cannot be read is listed in `unreadable` and mapped as Kyuubi would (an unknown phase
 * → UNKNOWN, a container status missing → the pod phase).
 */
export function podState(pod: DriverPod, settings: AppStateSettings): PodState {
  const notes: string[] = [];
  const phase = pod.status?.phase;
  let podApp = phase === undefined ? undefined : PHASE_STATES[phase];
  if (podApp === undefined) {
    notes.push(
      phase === undefined
        ? 'no status.phase: state UNKNOWN'
        : `status.phase ${JSON.stringify(phase)} is not a pod phase: state UNKNOWN`,
    );
    podApp = 'UNKNOWN';
  }
  const statuses = containerStatuses(pod, notes);
  const wanted = settings.container.toLowerCase();
  const named = statuses.find((c) => c.name.toLowerCase() === wanted);
  const containerNotes: string[] = [];
  const stateContainer: StateContainerView | undefined = named && {
    name: named.name,
    state: containerStateOf(named.state),
    ...(named.state?.terminated
      ? {
          terminated: {
            exitCode: named.state.terminated.exitCode,
            reason: named.state.terminated.reason,
            finishedAtMs: finishMs(
              named.state.terminated.finishedAt,
              `finishedAt of container ${named.name}`,
              containerNotes,
            ),
          },
        }
      : {}),
  };
  const fromContainer = settings.source === 'CONTAINER' ? stateContainer : undefined;

  // Kyuubi: a terminal container state wins ("spark container already terminated, but sidecar containers
  // live"); else a terminal pod phase; else the container's state; else the pod phase.
  if (fromContainer && isTerminalState(fromContainer.state)) {
    notes.push(...containerNotes);
    const t = fromContainer.terminated;
    const error =
      fromContainer.state === 'FINISHED'
        ? undefined
        : t
          ? `${t.reason ?? 'Error'} (exit code ${t.exitCode ?? 'unknown'})`
          : `container ${fromContainer.name} waiting: ${named?.state?.waiting?.reason ?? 'unknown reason'}`;
    return {
      state: fromContainer.state,
      terminal: true,
      finishedAtMs: t?.finishedAtMs,
      error,
      from: 'container',
      stateContainer,
      unreadable: notes,
    };
  }
  if (isTerminalState(podApp)) {
    let finishedAtMs: number | undefined;
    for (const c of statuses) {
      const ms = finishMs(c.state?.terminated?.finishedAt, `finishedAt of container ${c.name}`, notes);
      if (ms !== undefined && (finishedAtMs === undefined || ms > finishedAtMs)) finishedAtMs = ms;
    }
    const ended = stateContainer?.terminated;
    const error =
      podApp === 'FINISHED'
        ? undefined
        : [pod.status?.reason, pod.status?.message].filter(Boolean).join(': ') ||
          (ended
            ? `${ended.reason ?? 'Error'} (exit code ${ended.exitCode ?? 'unknown'})`
            : (phase ?? 'Failed'));
    return {
      state: podApp,
      terminal: true,
      finishedAtMs,
      error,
      from: 'pod-phase',
      stateContainer,
      unreadable: notes,
    };
  }
  const state = fromContainer ? fromContainer.state : podApp;
  return {
    state,
    terminal: false,
    finishedAtMs: undefined,
    error: undefined,
    from: fromContainer ? 'container' : 'pod-phase',
    stateContainer,
    unreadable: notes,
  };
}
