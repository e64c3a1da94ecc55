/**
 * The trimmed pod this service keeps and reasons about: a subset of the Kubernetes Pod's JSON (same field
 * names and shapes as `V1Pod`, timestamps as RFC 3339 strings as on the wire), holding only what the
 * cleanup decision, the logs and the applications API read.
 *
 * Why: a full Spark driver pod carries env, volumes, managedFields and every container status, none of which
 * the cleaner reads, and a replica keeps every watched pod (the sizes: bench/README.md, "Measurements behind
 * design choices"). client-go's informers solve the same problem with a transform function applied before
 * objects enter the cache (`cache.TransformFunc`, SharedIndexInformer's `SetTransform`,
 * k8s.io/client-go/tools/cache); {@link trimPod} is ours.
 */

/** A container's terminated state, as `V1ContainerStateTerminated` (only the fields we read). */
export interface TerminatedState {
  readonly exitCode?: number;
  readonly reason?: string;
  /** RFC 3339 as received (a value that is not a timestamp is kept, for the state mapping to report). */
  readonly finishedAt?: string;
}

/**
 * A container's state, as `V1ContainerState`: which of `waiting`, `running`, `terminated` is set, and the
 * fields Kyuubi's state mapping reads (the waiting reason, the exit code) plus the finish time.
 */
export interface TrimmedContainerState {
  readonly waiting?: { readonly reason?: string };
  readonly running?: Readonly<Record<string, never>>;
  readonly terminated?: TerminatedState;
}

/** A container's status: its name and state. */
export interface TrimmedContainerStatus {
  readonly name: string;
  readonly state?: TrimmedContainerState;
}

/** A pod condition, as `V1PodCondition` (only the fields we read). */
export interface TrimmedCondition {
  readonly type: string;
  readonly status?: string;
  /** RFC 3339. */
  readonly lastTransitionTime?: string;
}

/** A trimmed pod: structurally a subset of `V1Pod` as JSON. */
export interface DriverPod {
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly resourceVersion?: string;
    readonly labels?: Readonly<Record<string, string>>;
    /** RFC 3339; set once someone has asked the API server to delete the pod. */
    readonly deletionTimestamp?: string;
    /** RFC 3339. */
    readonly creationTimestamp?: string;
  };
  readonly status?: {
    readonly phase?: string;
    readonly reason?: string;
    readonly message?: string;
    /**
     * Every container's status, trimmed: which container the application state is read from is a setting
     * (`applicationStateContainer`, src/kube/application-state.ts), and a terminal pod's finish time is its
     * last container's. An entry that is not a container status (no name) is kept as `null`, and a value that
     * is not a list as it is, for the state mapping to report.
     */
    readonly containerStatuses?: readonly (TrimmedContainerStatus | null)[];
    /**
     * Only the condition that changed last (the latest `lastTransitionTime`): a terminal pod's finish time
     * when its containers carry none (src/rules/decision.ts `finishTime`).
     */
    readonly conditions?: readonly TrimmedCondition[];
  };
}

/**
 * The container Spark names the driver (Spark's `Constants.DEFAULT_DRIVER_CONTAINER_NAME`), and the default of
 * Kyuubi's `kyuubi.kubernetes.application.state.container` (our `applicationStateContainer`).
 */
export const DRIVER_CONTAINER = 'spark-kubernetes-driver';

/** Longest `status.message` kept, in characters (evictions write a long one; the API shows it as the error). */
const MAX_MESSAGE = 512;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const time = (v: unknown): string | undefined =>
  typeof v === 'string' ? v : v instanceof Date ? v.toISOString() : undefined;
/** A timestamp kept even when it is not one (a number, an object): the state mapping reports it as unreadable. */
const rawTime = (v: unknown): string | undefined =>
  v === undefined || v === null ? undefined : (time(v) ?? (JSON.stringify(v) ?? String(v)).slice(0, 64));
const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

function labelsOf(v: unknown): Record<string, string> | undefined {
  const o = obj(v);
  if (!o) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(o)) if (typeof val === 'string') out[k] = val;
  return out;
}

/** A container status trimmed to {@link TrimmedContainerStatus}; `null` when it has no name. */
function trimContainerStatus(raw: unknown): TrimmedContainerStatus | null {
  const cs = obj(raw);
  if (typeof cs?.name !== 'string') return null;
  const state = obj(cs.state);
  if (!state) return { name: cs.name };
  const waiting = obj(state.waiting);
  const running = obj(state.running);
  const t = obj(state.terminated);
  return {
    name: cs.name,
    state: {
      ...(waiting ? { waiting: { reason: str(waiting.reason) } } : {}),
      ...(running ? { running: {} } : {}),
      ...(t
        ? {
            terminated: {
              exitCode: typeof t.exitCode === 'number' ? t.exitCode : undefined,
              reason: str(t.reason),
              finishedAt: rawTime(t.finishedAt),
            },
          }
        : {}),
    },
  };
}

/**
 * Trims a pod as received from the API server (parsed JSON of a list item, a watch event's object or a
 * GET; client-node `V1Pod` objects with `Date` timestamps are accepted too) to a {@link DriverPod}.
 * Never throws: missing or malformed fields are left out, so {@link malformedReason} and the state mapping
 * (src/kube/application-state.ts) see exactly what is missing. A malformed `containerStatuses` (not an array) is
 * kept as is for them to report, a malformed entry of it as `null`.
 */
export function trimPod(raw: unknown): DriverPod {
  const pod = obj(raw) ?? {};
  const m = obj(pod.metadata);
  const s = obj(pod.status);
  let containerStatuses: (TrimmedContainerStatus | null)[] | undefined;
  const statuses = s?.containerStatuses;
  if (Array.isArray(statuses)) containerStatuses = statuses.map(trimContainerStatus);
  const message = str(s?.message);
  const conditions = lastCondition(s?.conditions);
  return {
    metadata: m
      ? {
          name: str(m.name),
          namespace: str(m.namespace),
          uid: str(m.uid),
          resourceVersion: str(m.resourceVersion),
          labels: labelsOf(m.labels),
          deletionTimestamp: time(m.deletionTimestamp),
          creationTimestamp: time(m.creationTimestamp),
        }
      : undefined,
    status: s
      ? {
          phase: str(s.phase),
          reason: str(s.reason),
          message: message && message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message,
          containerStatuses:
            containerStatuses ??
            (statuses === undefined ? undefined : (statuses as (TrimmedContainerStatus | null)[])),
          ...(conditions ? { conditions: [conditions] } : {}),
        }
      : undefined,
  };
}

/** The condition with the latest parseable `lastTransitionTime`, trimmed; undefined when none has one. */
function lastCondition(v: unknown): TrimmedCondition | undefined {
  if (!Array.isArray(v)) return undefined;
  let best: TrimmedCondition | undefined;
  let bestMs = Number.NEGATIVE_INFINITY;
  for (const c of v) {
    const o = obj(c);
    const at = time(o?.lastTransitionTime);
    const ms = at === undefined ? Number.NaN : Date.parse(at);
    if (!o || !Number.isFinite(ms) || ms <= bestMs) continue;
    bestMs = ms;
    best = { type: str(o.type) ?? '', status: str(o.status), lastTransitionTime: at };
  }
  return best;
}
