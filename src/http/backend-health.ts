/**
 * Whether this replica reaches its shared backends now: Redis answers a PING, etcd (when the replica elects
 * through it) answers a status call, each within a timeout. Information for `/readyz`, `/healthz` and the
 * `sdc_backend_up` gauge; never a readiness condition: Redis or etcd down is down for every replica at once,
 * and failing every readiness probe together would only block node drains (the PodDisruptionBudget counts
 * unready pods as disrupted).
 */
import type { ServedReplica } from './served-replica.ts';

/** What {@link checkBackends} found: `true` when the backend answered in time. */
export interface BackendHealth {
  readonly redis: boolean;
  /** Absent when the replica does not use etcd (local leadership). */
  readonly etcd?: boolean;
  /** Absent when the replica does not use ZooKeeper: its session is connected now. */
  readonly zookeeper?: boolean;
}

/** Resolves `true` when `p` fulfils within `ms` (ms), `false` when it rejects or takes longer. */
function answersWithin(p: () => Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p().then(
      () => true,
      () => false,
    ),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Asks Redis and etcd, in parallel, whether they answer: at most `timeoutMs` (ms) each. A Redis client whose
 * connection is not `ready` counts as down without a PING (its commands would queue until it reconnects);
 * a `ready` one is PINGed all the same, since a hung server (paused, partitioned) keeps the socket open.
 * Never throws.
 */
export async function checkBackends(
  replica: Pick<ServedReplica, 'redis' | 'etcd' | 'zookeeperConnected'>,
  timeoutMs: number,
): Promise<BackendHealth> {
  const { redis, etcd } = replica;
  const zookeeper = replica.zookeeperConnected?.();
  const [redisUp, etcdUp] = await Promise.all([
    redis.status === 'ready' ? answersWithin(() => redis.ping(), timeoutMs) : false,
    etcd ? answersWithin(() => etcd.maintenance.status(), timeoutMs) : undefined,
  ]);
  return {
    redis: redisUp,
    ...(etcdUp === undefined ? {} : { etcd: etcdUp }),
    ...(zookeeper === undefined ? {} : { zookeeper }),
  };
}
