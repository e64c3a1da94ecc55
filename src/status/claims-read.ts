/**
 * Whether a cluster name is refused, read from Redis as the replicas decide it (src/cleaner/cluster-claims.ts):
 * the claims on the name, against the fingerprints of the cluster `status` resolves from the same
 * configuration. Read-only: `status` makes no claim. The membership half of the replicas' check (the live
 * members' claims in etcd or ZooKeeper) is not read here: the replicas report a refusal they see there in
 * `/api/v1/leaders` and `sdc_target_refused`.
 */
import { type Claim, foreignClaims } from '../cleaner/claim-conflict.ts';
import { CLAIM_LIVE_MS, refusalMessage } from '../cleaner/cluster-claims.ts';
import type { ClusterIdentity } from '../kube/cluster-identity.ts';
import { clusterClaimsKey } from '../queue/job-identity.ts';
import type { RedisClient } from '../queue/redis-client.ts';

/**
 * The refusal of `cluster`'s name as the replicas would see it now, or undefined when no other cluster claims
 * it. Ages by Redis's clock, as the replicas'.
 * @throws the Redis client's error when Redis cannot be reached.
 */
export async function readRefusal(
  redis: RedisClient,
  prefix: string,
  cluster: ClusterIdentity,
): Promise<string | undefined> {
  const [time, all] = await Promise.all([
    redis.time(),
    redis.hgetall(clusterClaimsKey(prefix, cluster.name)),
  ]);
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const claims: Claim[] = Object.entries(all ?? {}).map(([fps, seen]) => {
    const ageMs = Math.max(0, now - Number(seen));
    return {
      fingerprints: fps.split(',').filter(Boolean),
      live: ageMs <= CLAIM_LIVE_MS,
      ageMs,
      from: 'redis',
    };
  });
  const others = foreignClaims(cluster.fingerprints, claims);
  return others.length > 0 ? refusalMessage(cluster, cluster.fingerprints, others) : undefined;
}
