/**
 * Read-only connections to what the replicas share — Redis (the queues, tombstones, the last accepted
 * DELETE) and the leadership backend, etcd or ZooKeeper (the elections) — for `status` and `explain`, which run beside the replicas with the
 * same configuration. They fail fast instead of retrying forever: a check must answer, not hang. A server
 * that accepts connections and never answers (frozen, or behind a proxy whose backend is gone) is the case
 * to mind: every Redis command and every etcd call has its own timeout, and so does closing.
 */
import { Queue } from 'bullmq';
import { describeRedis } from '../config/redact.ts';
import type { CleanerConfig } from '../config/schema.ts';
import type { ClusterIdentity } from '../kube/cluster-identity.ts';
import { resolveIdentities } from '../kube/context-clients.ts';
import { assertDistinctTargets } from '../kube/distinct-targets.ts';
import {
  type ClusterEndpoint,
  kubeconfigPath,
  loadClusterEndpoint,
  resolveContextName,
} from '../kube/kubeconfig.ts';
import type { ElectionReader } from '../leadership/election-reader.ts';
import {
  type LeadershipReader,
  type LeadershipSettings,
  openLeadershipReader,
} from '../leadership/open-backend.ts';
import type { StoredJobData } from '../queue/cleanup-queue.ts';
import { queueName, type TargetRef } from '../queue/job-identity.ts';
import { createRedisClient, type RedisClient } from '../queue/redis-client.ts';
import { withTimeout } from '../with-timeout.ts';

/**
 * How long Redis or etcd has to answer one request of `status` or `explain`, ms: each Redis command, the
 * reachability checks, and each etcd call (on each member it tries, {@link ETCD_CALL_TIMEOUT_MS}).
 */
export const ANSWER_TIMEOUT_MS = 1500;
/** Deadline of one etcd call on one member, ms: etcd3 tries the next member when it passes. */
export const ETCD_CALL_TIMEOUT_MS = 750;

/** The shared state, opened by {@link openStateStore}. */
export interface StateStore {
  readonly redis: RedisClient;
  /** The leadership backend's elections; undefined without one (single-server mode). */
  readonly elections: ElectionReader | undefined;
  /** Resolves when the leadership backend answers a read (at once without one). @throws its error. */
  pingLeadership(): Promise<void>;
  /** The leadership backend's read-only access; undefined in single-server mode. */
  readonly leadership: LeadershipReader | undefined;
  /** Redis key prefix of the queues (`queuePrefix`). */
  readonly prefix: string;
  /** The target's queue (opened once, on the shared connection). */
  queueOf(target: TargetRef): Queue<StoredJobData>;
  close(): Promise<void>;
}

/** Redis or the leadership backend did not answer: `status` and `explain` exit 3 (nothing is known, which is not "unhealthy"). */
export class UnreachableError extends Error {
  override name = 'UnreachableError';
}

/**
 * Checks that Redis and the leadership backend (when configured) answer, before anything is read from them, so
 * that the error names the one that does not, its setting and the configured address (secrets masked).
 * @throws UnreachableError naming `redisUrl` or the backend's setting (`etcdEndpoints`, `zookeeper`).
 */
export async function checkReachable(store: StateStore, config: Pick<CleanerConfig, 'redis'>): Promise<void> {
  // Both at once, each within ANSWER_TIMEOUT_MS (and the backend's first-read login): the error names every
  // one that does not answer.
  const why = (err: unknown) => (err as Error).message.split('\n')[0];
  const leadershipMs = ANSWER_TIMEOUT_MS + (store.leadership?.firstReadExtraMs ?? 0);
  const [redis, leadership] = await Promise.allSettled([
    withTimeout(store.redis.ping(), ANSWER_TIMEOUT_MS, 'PING'),
    withTimeout(store.pingLeadership(), leadershipMs, 'a read'),
  ]);
  const failures: string[] = [];
  if (redis.status === 'rejected')
    failures.push(`${describeRedis(config.redis)}: Redis does not answer: ${why(redis.reason)}`);
  if (leadership.status === 'rejected')
    failures.push(
      store.leadership?.describeFailure(leadership.reason, 'unreachable') ?? String(why(leadership.reason)),
    );
  if (failures.length > 0) throw new UnreachableError(failures.join('; '));
}

/**
 * Says which of Redis and the leadership backend failed a read after both answered the reachability check (one stopped
 * answering meanwhile, or a command failed), naming its setting.
 */
export function readFailure(
  err: unknown,
  store: Pick<StateStore, 'leadership'>,
  config: Pick<CleanerConfig, 'redis'>,
): string {
  const message = (err as Error).message.split('\n')[0];
  const backend = store.leadership?.describeFailure(err, 'stopped');
  if (backend) return backend;
  if (message === 'Command timed out')
    return `${describeRedis(config.redis)}: Redis stopped answering: ${message}`;
  return `cannot read Redis or ${store.leadership?.kind ?? 'the leadership backend'}: ${message}`;
}

/**
 * Opens the Redis connection (at most one reconnect; connecting and each command within
 * {@link ANSWER_TIMEOUT_MS}) and the leadership backend's read-only access (src/leadership/open-backend.ts:
 * on etcd each call within {@link ETCD_CALL_TIMEOUT_MS} per member).
 */
export function openStateStore(
  config: Pick<CleanerConfig, 'redis' | 'queuePrefix'> & Omit<LeadershipSettings, 'electionTtlSeconds'>,
): StateStore {
  const redis = createRedisClient(config.redis, {
    connectTimeoutMs: ANSWER_TIMEOUT_MS,
    commandTimeoutMs: ANSWER_TIMEOUT_MS,
    // Closing waits this long for a frozen server to acknowledge (default 2 s), keeping the process alive.
    disconnectTimeoutMs: 100,
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => (times > 1 ? null : 200),
    connectionName: 'sdc:status',
  });
  redis.on('error', () => undefined); // the failed command reports it
  const leadership = openLeadershipReader(
    { ...config, electionTtlSeconds: 0 },
    { callTimeoutMs: ETCD_CALL_TIMEOUT_MS },
  );
  const queues = new Map<string, Queue<StoredJobData>>();
  return {
    redis,
    elections: leadership?.elections,
    leadership,
    async pingLeadership() {
      await leadership?.ping(ANSWER_TIMEOUT_MS);
    },
    prefix: config.queuePrefix,
    queueOf(target) {
      const name = queueName(target);
      let q = queues.get(name);
      if (!q) {
        q = new Queue<StoredJobData>(name, { connection: redis, prefix: config.queuePrefix });
        q.on('error', () => undefined);
        queues.set(name, q);
      }
      return q;
    },
    async close() {
      // A Queue's close waits for Redis: bounded, then the connection is dropped anyway.
      await withTimeout(
        Promise.allSettled([...queues.values()].map((q) => q.close())),
        ANSWER_TIMEOUT_MS,
        'closing the queues',
      ).catch(() => undefined);
      redis.disconnect();
      leadership?.close();
    },
  };
}

/** The configured targets resolved as the replicas resolve them, and their clusters. */
export interface ResolvedTargets {
  /** The fixed targets, in the configured order. */
  readonly targets: TargetRef[];
  /** The cluster of each resolved context, fixed and `context:*` ones (src/kube/cluster-identity.ts). */
  readonly clusters: ReadonlyMap<string, ClusterIdentity>;
  /** The resolved name of each `context:*` target's context, in the configured order. */
  readonly discoverContexts: readonly string[];
}

/**
 * The configured targets with their contexts and clusters resolved as the replicas resolve them (a target
 * without a context takes the kubeconfig's current context, or `in-cluster`; a cluster's name is explicit or
 * derived from its CA: src/kube/cluster-identity.ts): queue names and election keys use them. Reads the
 * kubeconfig only (no credential plugin runs: src/kube/kubeconfig.ts `loadClusterEndpoint`).
 * @throws KubeconfigError when a context cannot be resolved, or DuplicateTargetError (a KubeconfigError) when
 *   two targets resolve to one (cluster, namespace) (a configuration error, exit 2).
 */
export function resolveTargets(
  config: Pick<CleanerConfig, 'targets' | 'kubeconfig'> & Partial<Pick<CleanerConfig, 'naming' | 'discover'>>,
): ResolvedTargets {
  const path = kubeconfigPath(config.kubeconfig);
  const endpoints = new Map<string | undefined, ClusterEndpoint>();
  const endpointOf = (context: string | undefined) => {
    let e = endpoints.get(context);
    if (!e) {
      e = loadClusterEndpoint(path, context);
      endpoints.set(context, e);
    }
    return e;
  };
  const fixed = config.targets.map((t) => endpointOf(t.context));
  const discover = (config.discover ?? []).map((d) => endpointOf(d.context));
  const clusters = resolveIdentities(path, [...fixed, ...discover], config.naming);
  const clusterOf = (context: string) => clusters.get(context) as ClusterIdentity;
  assertDistinctTargets(
    config.targets,
    fixed.map((e) => ({ context: e.context, cluster: clusterOf(e.context) })),
  );
  return {
    targets: config.targets.map((t, i) => {
      const context = (fixed[i] as ClusterEndpoint).context;
      return { cluster: clusterOf(context).name, context, namespace: t.namespace };
    }),
    clusters,
    discoverContexts: discover.map((e) => e.context),
  };
}

/**
 * The check `run --check` makes of the targets without loading any context: two targets that name one context
 * (a target without a context takes the kubeconfig's current context, or `in-cluster`) and one namespace are
 * one. Reads the kubeconfig files only when a target names no context, and then only the current context's
 * name: no credential plugin runs, nothing is contacted, a context absent from this machine's kubeconfig is no
 * error. Two contexts that reach one cluster are found at start ({@link resolveTargets} and the replica).
 * @throws KubeconfigError when the current context cannot be resolved, or DuplicateTargetError (a
 *   KubeconfigError) when two targets name one (context, namespace) (a configuration error, exit 2).
 */
export function assertDistinctTargetNames(config: Pick<CleanerConfig, 'targets' | 'kubeconfig'>): void {
  let current: string | undefined;
  const currentContext = (): string => {
    current ??= resolveContextName(kubeconfigPath(config.kubeconfig), undefined);
    return current;
  };
  assertDistinctTargets(
    config.targets,
    config.targets.map((t) => ({ context: t.context ?? currentContext() })),
  );
}
