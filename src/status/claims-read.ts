/**
 * Whether a cluster name is refused, read from Redis as the replicas decide it (src/cleaner/cluster-claims.ts):
 * the claims on the name, against the fingerprints of the cluster `status` resolves from the same
 * configuration. Read-only: `status` makes no claim. The membership half of the replicas' check (the live
 * members' claims in etcd or ZooKeeper) is not read here: the replicas report a refusal they see there in
 * `/api/v1/leaders` and `sdc_target_refused`.
 */
import { type Claim, foreignClaims, otherBackendClaims, redisClaim } from '../cleaner/claim-conflict.ts';
import { backendConflictMessage, CLAIM_LIVE_MS, refusalMessage } from '../cleaner/cluster-claims.ts';
import type { ClusterIdentity } from '../kube/cluster-identity.ts';
import { clusterClaimsKey } from '../queue/job-identity.ts';
import type { RedisClient } from '../queue/redis-client.ts';

/**
 * The refusal of the target (`cluster`, `namespace`) as the replicas would see it now — another cluster claims
 * the name, or a replica that serves that namespace of it elects through another leadership backend than
 * `leadership` (this configuration's: src/leadership/open-backend.ts `leadershipMarker`) — or undefined. Ages
 * by Redis's clock, as the replicas'.
 * @param claims the cluster's claims ({@link readClaims})
 */
export function refusalOf(claims: ClaimsRead, namespace: string, leadership: string): string | undefined {
  const { cluster } = claims;
  const backends = otherBackendClaims(leadership, claims.claims, [namespace]);
  if (backends.length > 0) return backendConflictMessage(cluster.name, leadership, backends, [namespace]);
  const others = foreignClaims(cluster.fingerprints, claims.claims);
  return others.length > 0 ? refusalMessage(cluster, cluster.fingerprints, others) : undefined;
}

/** The claims on one cluster name, as {@link readClaims} read them. */
export interface ClaimsRead {
  readonly cluster: ClusterIdentity;
  readonly claims: readonly Claim[];
}

/**
 * Reads the claims on `cluster`'s name (one HGETALL, Redis's TIME).
 * @throws the Redis client's error when Redis cannot be reached.
 */
export async function readClaims(
  redis: RedisClient,
  prefix: string,
  cluster: ClusterIdentity,
): Promise<ClaimsRead> {
  const [time, all] = await Promise.all([
    redis.time(),
    redis.hgetall(clusterClaimsKey(prefix, cluster.name)),
  ]);
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const claims = Object.entries(all ?? {}).map(([field, seen]) =>
    redisClaim(field, Number(seen), now, CLAIM_LIVE_MS),
  );
  return { cluster, claims };
}
