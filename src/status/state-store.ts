/**
 * Read-only connections to what the replicas share — Redis (the queues, tombstones, the last accepted
 * DELETE) and etcd (the elections) — for `status` and `explain`, which run beside the replicas with the
 * same configuration. They fail fast instead of retrying forever: a check must answer, not hang.
 */
import { Queue } from 'bullmq';
import type { Etcd3 } from 'etcd3';
import { describeRedis } from '../config/redact.ts';
import type { CleanerConfig } from '../config/schema.ts';
import { kubeconfigPath, loadClusterAccess } from '../kube/kubeconfig.ts';
import { createEtcdClient } from '../leadership/etcd-client.ts';
import type { StoredJobData } from '../queue/cleanup-queue.ts';
import { queueName, type TargetRef } from '../queue/job-identity.ts';
import { createRedisClient, type RedisClient } from '../queue/redis-client.ts';

/** The shared state, opened by {@link openStateStore}. */
export interface StateStore {
  readonly redis: RedisClient;
  /** undefined without `etcdEndpoints` (single-server mode). */
  readonly etcd: Etcd3 | undefined;
  /** Redis key prefix of the queues (`queuePrefix`). */
  readonly prefix: string;
  /** The target's queue (opened once, on the shared connection). */
  queueOf(target: TargetRef): Queue<StoredJobData>;
  close(): Promise<void>;
}

/** Redis or etcd did not answer: `status` and `explain` exit 3 (nothing is known, which is not "unhealthy"). */
export class UnreachableError extends Error {
  override name = 'UnreachableError';
}

/**
 * Checks that Redis and etcd (when configured) answer, before anything is read from them, so that the error
 * names the one that does not, its setting and the configured address (secrets masked).
 * @throws UnreachableError naming `redisUrl` or `etcdEndpoints`.
 */
export async function checkReachable(
  store: StateStore,
  config: Pick<CleanerConfig, 'redis' | 'etcdEndpoints'>,
): Promise<void> {
  try {
    await store.redis.ping();
  } catch (err) {
    throw new UnreachableError(
      `${describeRedis(config.redis)}: Redis does not answer: ${(err as Error).message}`,
    );
  }
  if (!store.etcd) return;
  try {
    await store.etcd.get('spark-driver-cleaner/ping').exec();
  } catch (err) {
    throw new UnreachableError(
      `etcdEndpoints (--etcd-endpoints, SDC_ETCD_ENDPOINTS) ${config.etcdEndpoints.join(',')}: etcd does not answer: ${(err as Error).message.split('\n')[0]}`,
    );
  }
}

/** Opens the Redis connection (at most one reconnect, 5 s connect timeout) and the etcd client. */
export function openStateStore(
  config: Pick<CleanerConfig, 'redis' | 'etcdEndpoints' | 'queuePrefix'>,
): StateStore {
  const redis = createRedisClient(config.redis, {
    connectTimeoutMs: 5000,
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => (times > 1 ? null : 200),
    connectionName: 'sdc:status',
  });
  redis.on('error', () => undefined); // the failed command reports it
  const etcd = config.etcdEndpoints.length > 0 ? createEtcdClient(config.etcdEndpoints) : undefined;
  const queues = new Map<string, Queue<StoredJobData>>();
  return {
    redis,
    etcd,
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
      await Promise.allSettled([...queues.values()].map((q) => q.close()));
      redis.disconnect();
      etcd?.close();
    },
  };
}

/**
 * The configured targets with their context names resolved as the replicas resolve them (a target without a
 * context takes the kubeconfig's current context, or `in-cluster`): queue names and election keys use them.
 * @throws KubeconfigError when a context cannot be resolved (a configuration error, exit 2).
 */
export function resolveTargets(config: Pick<CleanerConfig, 'targets' | 'kubeconfig'>): TargetRef[] {
  const path = kubeconfigPath(config.kubeconfig);
  return config.targets.map((t) => ({
    context: t.context ?? loadClusterAccess(path, undefined).context,
    namespace: t.namespace,
  }));
}
