/**
 * How long a replica's own connection to Redis has been down: since the connection last stopped being ready
 * (closed, refused, reconnecting), until it is ready again. A replica that cannot reach Redis cannot take a job,
 * whatever its election says, so past {@link FAILOVER_TIMERS}`.redisDownNotReadyMs` it reports its targets not
 * ready (reason `redis`, src/cleaner/target-cleaner.ts): a leader hands them over to a replica whose path works,
 * and it is not a fallback candidate while one is ready (src/leadership/leadership-group.ts). When Redis itself
 * is down, every replica is not ready alike and the assignment ignores readiness: leadership stays where it is.
 *
 * A path that hangs (connections accepted, nothing answered) keeps the connection "ready": the self-check finds
 * that leader stuck instead (src/cleaner/self-check.ts). Intervals use the monotonic clock.
 */
import type { MonotonicClock } from '../clock.ts';
import type { RedisClient } from './redis-client.ts';

/** The outage of one connection, as {@link watchRedisOutage} follows it. */
export interface RedisOutage {
  /** How long the connection has not been ready, ms; 0 while it is ready (or has not been ready yet). */
  downForMs(): number;
}

/**
 * Follows `redis`'s connection events (ioredis `ready`, `close`, `end`; the same for a Cluster): down from the
 * first of them after `ready` until the next `ready`. Before the first `ready` it reports 0: whether Redis has
 * answered once is the cluster-name check's to say (src/cleaner/cluster-claims.ts).
 */
export function watchRedisOutage(redis: RedisClient, monotonicNow: MonotonicClock): RedisOutage {
  let downSinceMs: number | undefined;
  let wasReady = false;
  const down = () => {
    if (wasReady) downSinceMs ??= monotonicNow();
  };
  redis.on('ready', () => {
    wasReady = true;
    downSinceMs = undefined;
  });
  redis.on('close', down);
  redis.on('end', down);
  return {
    downForMs: () => (downSinceMs === undefined ? 0 : monotonicNow() - downSinceMs),
  };
}
