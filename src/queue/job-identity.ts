/**
 * The identity of a cleanup job and every shared name of a target: its Redis keys, its election and the
 * membership entries in etcd or ZooKeeper. The only place that builds them.
 *
 * A target is (cluster, namespace): the cluster's name (src/kube/cluster-identity.ts) is in every shared name,
 * the context only says how the cluster is reached. So two clusters whose contexts have the same name (inside a
 * pod every context is `in-cluster`) share no queue and no election on one Redis, etcd or ZooKeeper.
 *
 * BullMQ: a job id may contain no `:` and may not be all digits; a pod UID (RFC 4122) is neither. An `add`
 * with an id that exists in any state is a no-op, which is what makes N replicas' enqueues one job.
 * Only UIDs of that form are job ids: what an API server (or a hand-edited Redis) serves otherwise is refused
 * on both sides, the enqueue and the worker, so a refused job can never come back as a new one.
 * Redis Cluster: every key of one queue must hash to one slot, so the queue name is a hash tag `{…}`.
 *
 * Release 0.1.0 named them by context instead ({@link previousReleaseQueueName} and the others below): a
 * replica of this version reads those names only to wait for a 0.1.0 leader during a rolling update
 * (src/leadership/previous-release-gate.ts, src/queue/previous-release-workers.ts).
 */
import { DEFAULT_ETCD_KEY_PREFIX } from '../config/fields.ts';

/**
 * A target's identity: (cluster, namespace), reached through a kubeconfig context (Kyuubi's KubernetesInfo).
 */
export interface TargetRef {
  /** The cluster's name (src/kube/cluster-identity.ts): what every shared name is built from. */
  readonly cluster: string;
  /** The kubeconfig context the cluster is reached through (`in-cluster` inside a pod): logs and metrics. */
  readonly context: string;
  readonly namespace: string;
}

/** A target as release 0.1.0 knew it: (context, namespace). */
export type PreviousReleaseTarget = Pick<TargetRef, 'context' | 'namespace'>;

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

/** `context:namespace`, as users write targets and as `status` and `/api/v1/leaders` list them. */
export function targetLabel(t: Pick<TargetRef, 'context' | 'namespace'>): string {
  return `${t.context}:${t.namespace}`;
}

/**
 * `cluster/namespace`: the target's identity as one string, what the balancer assigns and the membership
 * value's target set hashes (src/leadership/assignment.ts).
 */
export function targetKey(t: Pick<TargetRef, 'cluster' | 'namespace'>): string {
  return `${t.cluster}/${t.namespace}`;
}

/**
 * The BullMQ queue name of a target: a Redis Cluster hash tag holding the cluster name and the namespace,
 * `{<cluster>/<namespace>}` (both DNS labels: no `:`, no `}`; the `/` sets them apart from 0.1.0's names).
 */
export function queueName(t: Pick<TargetRef, 'cluster' | 'namespace'>): string {
  return `{${targetKey(t)}}`;
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

/**
 * Redis key of a cluster name's claims (src/cleaner/cluster-claims.ts): a hash of fingerprint set → when a
 * replica serving that cluster name last said so. One per cluster name, not per target.
 */
export function clusterClaimsKey(prefix: string, cluster: string): string {
  return `${prefix}:cluster-claims:${cluster}`;
}

/**
 * The etcd key prefix under which replicas campaign for a target's leadership:
 * `<root>clusters/<cluster>/election/<namespace>/`.
 * @param root the configured `etcdKeyPrefix` (ends with `/`)
 */
export function electionPrefix(t: TargetRef, root: string = DEFAULT_ETCD_KEY_PREFIX): string {
  return `${clusterElectionsPrefix(t.cluster, root)}${t.namespace}/`;
}

/** The etcd key prefix of every election of a cluster: `<root>clusters/<cluster>/election/`. */
export function clusterElectionsPrefix(cluster: string, root: string = DEFAULT_ETCD_KEY_PREFIX): string {
  return `${root}clusters/${cluster}/election/`;
}

/**
 * The membership scope of a replica: the names of the clusters it serves, sorted, joined by `+` (a DNS label
 * has none) — usually one name; `_` for a replica without targets (discovery that matched nothing yet).
 * Replicas register, and see each other, within their scope.
 */
export function membershipScope(clusters: Iterable<string>): string {
  return [...new Set(clusters)].sort().join('+') || '_';
}

/** The etcd key prefix of the membership keys of a scope: `<root>clusters/<scope>/members/`. */
export function membersPrefix(scope: string, root: string = DEFAULT_ETCD_KEY_PREFIX): string {
  return `${root}clusters/${scope}/members/`;
}

/**
 * The ZooKeeper election directory of a target, as a prefix: `<root>/clusters/<cluster>/election/<namespace>/`.
 * @param root the configured `zookeeperRoot` (no trailing `/`)
 */
export function zookeeperElectionPrefix(root: string, t: TargetRef): string {
  return `${zookeeperClusterElectionsDir(root, t.cluster)}/${t.namespace}/`;
}

/** The ZooKeeper directory of every election of a cluster: `<root>/clusters/<cluster>/election`. */
export function zookeeperClusterElectionsDir(root: string, cluster: string): string {
  return `${root}/clusters/${cluster}/election`;
}

/** The ZooKeeper directory of the membership nodes of a scope: `<root>/clusters/<scope>/members`. */
export function zookeeperMembersDir(root: string, scope: string): string {
  return `${root}/clusters/${scope}/members`;
}

/** The queue name release 0.1.0 used for a target: `{<URI-encoded context>.<namespace>}`. */
export function previousReleaseQueueName(t: PreviousReleaseTarget): string {
  return `{${encodeURIComponent(t.context)}.${t.namespace}}`;
}

/** The etcd election prefix release 0.1.0 used for a target: `<root>election/<URI-encoded context>/<namespace>/`. */
export function previousReleaseElectionPrefix(
  t: PreviousReleaseTarget,
  root: string = DEFAULT_ETCD_KEY_PREFIX,
): string {
  return `${root}election/${encodeURIComponent(t.context)}/${t.namespace}/`;
}

/** The etcd prefix of release 0.1.0's membership keys: `<root>members/` (one key per live 0.1.0 replica). */
export function previousReleaseMembersPrefix(root: string = DEFAULT_ETCD_KEY_PREFIX): string {
  return `${root}members/`;
}
