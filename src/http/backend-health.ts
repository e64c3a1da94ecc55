/**
 * Whether this replica reaches its shared backends now: Redis answers a PING, and the leadership backend (when
 * the replica elects through one) answers — etcd a status call, ZooKeeper a connected session — each within a
 * timeout. Information for `/readyz`, `/healthz` and the
 * `sdc_backend_up` gauge; never a readiness condition: Redis or etcd down is down for every replica at once,
 * and failing every readiness probe together would only block node drains (the PodDisruptionBudget counts
 * unready pods as disrupted).
 */
import type { LeadershipBackendKind } from '../leadership/election-reader.ts';
import type { ServedReplica } from './served-replica.ts';

/** What {@link checkBackends} found: `true` when the backend answered in time. */
export type BackendHealth = { readonly redis: boolean } & {
  /** The leadership backend, by its name (`etcd`, `zookeeper`); absent with local leadership. */
  readonly [backend in LeadershipBackendKind]?: boolean;
};

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
 * Asks Redis and the leadership backend, in parallel, whether they answer: at most `timeoutMs` (ms) each. A Redis client whose
 * connection is not `ready` counts as down without a PING (its commands would queue until it reconnects);
 * a `ready` one is PINGed all the same, since a hung server (paused, partitioned) keeps the socket open.
 * Never throws.
 */
export async function checkBackends(
  replica: Pick<ServedReplica, 'redis' | 'leadershipBackend' | 'leadershipAnswers'>,
  timeoutMs: number,
): Promise<BackendHealth> {
  const { redis, leadershipBackend: backend } = replica;
  const [redisUp, leadershipUp] = await Promise.all([
    redis.status === 'ready' ? answersWithin(() => redis.ping(), timeoutMs) : false,
    backend && replica.leadershipAnswers ? replica.leadershipAnswers(timeoutMs) : undefined,
  ]);
  return { redis: redisUp, ...(backend && leadershipUp !== undefined ? { [backend]: leadershipUp } : {}) };
}
