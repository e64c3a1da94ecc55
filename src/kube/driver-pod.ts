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
  /** RFC 3339. */
  readonly finishedAt?: string;
}

/** The driver container's status; other containers are dropped. */
export interface TrimmedContainerStatus {
  readonly name: string;
  readonly state?: { readonly terminated?: TerminatedState };
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
    /** Only the driver container's status (`spark-kubernetes-driver`), when present. */
    readonly containerStatuses?: readonly TrimmedContainerStatus[];
    /**
     * Only the condition that changed last (the latest `lastTransitionTime`): a terminal pod's finish time
     * when its driver container carries none (src/cleanup/decision.ts `finishTime`).
     */
    readonly conditions?: readonly TrimmedCondition[];
  };
}

/** The container Spark names the driver (Spark's `Constants.DEFAULT_DRIVER_CONTAINER_NAME`). */
export const DRIVER_CONTAINER = 'spark-kubernetes-driver';

/** Longest `status.message` kept, in characters (evictions write a long one; the API shows it as the error). */
const MAX_MESSAGE = 512;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const time = (v: unknown): string | undefined =>
  typeof v === 'string' ? v : v instanceof Date ? v.toISOString() : undefined;
const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

function labelsOf(v: unknown): Record<string, string> | undefined {
  const o = obj(v);
  if (!o) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(o)) if (typeof val === 'string') out[k] = val;
  return out;
}

/**
 * Trims a pod as received from the API server (parsed JSON of a list item, a watch event's object or a
 * GET; client-node `V1Pod` objects with `Date` timestamps are accepted too) to a {@link DriverPod}.
 * Never throws: missing or malformed fields are left out, so {@link malformedReason} and the state mapping
 * (src/kube/application-state.ts) see exactly what is missing. A malformed `containerStatuses` (not an array) is
 * kept as is for them to report.
 */
export function trimPod(raw: unknown): DriverPod {
  const pod = obj(raw) ?? {};
  const m = obj(pod.metadata);
  const s = obj(pod.status);
  let containerStatuses: TrimmedContainerStatus[] | undefined;
  const statuses = s?.containerStatuses;
  if (Array.isArray(statuses)) {
    containerStatuses = [];
    for (const c of statuses) {
      const cs = obj(c);
      if (cs?.name !== DRIVER_CONTAINER) continue;
      const t = obj(obj(cs.state)?.terminated);
      containerStatuses.push({
        name: DRIVER_CONTAINER,
        state: t
          ? {
              terminated: {
                exitCode: typeof t.exitCode === 'number' ? t.exitCode : undefined,
                reason: str(t.reason),
                finishedAt: time(t.finishedAt),
              },
            }
          : {},
      });
    }
  }
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
            (statuses === undefined ? undefined : (statuses as TrimmedContainerStatus[])),
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
