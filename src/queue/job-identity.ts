/**
 * The identity of a cleanup job and the names of a target's Redis keys. The only place that builds them.
 *
 * BullMQ: a job id may contain no `:` and may not be all digits; a pod UID (RFC 4122) is neither. An `add`
 * with an id that exists in any state is a no-op, which is what makes N replicas' enqueues one job.
 * Only UIDs of that form are job ids: what an API server (or a hand-edited Redis) serves otherwise is refused
 * on both sides, the enqueue and the worker, so a refused job can never come back as a new one.
 * Redis Cluster: every key of one queue must hash to one slot, so the queue name is a hash tag `{…}`.
 */
import { DEFAULT_ETCD_KEY_PREFIX } from '../config/fields.ts';

/** A target's identity: Kyuubi's KubernetesInfo. */
export interface TargetRef {
  readonly context: string;
  readonly namespace: string;
}

/** The pod UID is not usable as a job id. */
export class InvalidJobIdError extends Error {
  override name = 'InvalidJobIdError';
}

/**
 * A Kubernetes UID as the API server writes it: RFC 4122's text form, 8-4-4-4-12 hex digits
 * (k8s.io/apimachinery `types.UID`, made by `uuid.NewUUID()`). Case is not checked: only the form matters here.
 */
const KUBERNETES_UID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when `uid` can be a cleanup job id: a Kubernetes UID (so neither all digits nor with `:`). */
export function isCleanupJobId(uid: unknown): uid is string {
  return typeof uid === 'string' && KUBERNETES_UID.test(uid);
}

/**
 * The job id of a pod's cleanup job: its UID.
 * @throws InvalidJobIdError for anything but a Kubernetes UID (RFC 4122 form): empty, all digits or with `:`
 *   BullMQ would misread; anything else is not what an API server assigns.
 */
export function cleanupJobId(uid: string | undefined): string {
  if (!isCleanupJobId(uid)) {
    throw new InvalidJobIdError(
      `pod uid ${JSON.stringify(uid)} is not a Kubernetes UID (RFC 4122: 8-4-4-4-12 hex digits): it cannot be a cleanup job id`,
    );
  }
  return uid;
}

/** `context:namespace`, as users write targets and as logs and metrics label them. */
export function targetLabel(t: TargetRef): string {
  return `${t.context}:${t.namespace}`;
}

/**
 * The BullMQ queue name of a target: a Redis Cluster hash tag holding the URI-encoded context (which
 * may contain `:` or `/`, e.g. EKS ARNs) and the namespace.
 */
export function queueName(t: TargetRef): string {
  return `{${encodeURIComponent(t.context)}.${t.namespace}}`;
}

/** Redis key of a pod's tombstone; it shares the queue's hash tag, so it lives in the queue's slot. */
export function tombstoneKey(prefix: string, t: TargetRef, uid: string): string {
  return `${prefix}:${queueName(t)}:tombstone:${cleanupJobId(uid)}`;
}

/** Redis key of a BullMQ job hash (`prefix:queue:id`), to test its existence without loading it. */
export function jobKey(prefix: string, t: TargetRef, uid: string): string {
  return `${prefix}:${queueName(t)}:${cleanupJobId(uid)}`;
}

/**
 * The etcd key prefix under which replicas campaign for a target's leadership.
 * @param root the configured `etcdKeyPrefix` (ends with `/`)
 */
export function electionPrefix(t: TargetRef, root: string = DEFAULT_ETCD_KEY_PREFIX): string {
  return `${root}election/${encodeURIComponent(t.context)}/${t.namespace}/`;
}

/**
 * Redis key of a target's last accepted DELETE (`{ pod, uid, atMs, replica }` as JSON), written by the worker
 * on each `accepted` outcome so that `status` can tell when the target last deleted something; shares the
 * queue's hash tag.
 */
export function lastAcceptedKey(prefix: string, t: TargetRef): string {
  return `${prefix}:${queueName(t)}:last-accepted`;
}

/**
 * Redis key of the count of a target's driver pods kept by Kyuubi's `POD` state source although their driver
 * container has ended (src/queue/kept-pods.ts), written by the target's leader so that `status` can show it;
 * shares the queue's hash tag.
 */
export function keptPodsKey(prefix: string, t: TargetRef): string {
  return `${prefix}:${queueName(t)}:kept-by-pod-phase`;
}

/**
 * Prefix of the Redis keys that mark a target's workers as closing (`<prefix>:<queue>:closing:<worker id>`): a
 * worker that ends its term on purpose (a handover, a shutdown) puts its jobs back itself, and the next
 * leader's takeover leaves them to it (src/queue/take-over.ts). Shares the queue's hash tag.
 */
export function closingWorkerKeyPrefix(prefix: string, t: TargetRef): string {
  return `${prefix}:${queueName(t)}:closing:`;
}

/**
 * Redis key of a target's data marker (src/queue/data-marker.ts): it shares the queue's hash tag, so in a
 * Redis Cluster it lives on the master that holds the queue, and its loss is that master's loss.
 */
export function dataMarkerKey(prefix: string, t: TargetRef): string {
  return `${prefix}:${queueName(t)}:data-marker`;
}
