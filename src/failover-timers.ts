/**
 * The failover timers: every interval that decides how fast cleaning moves on after a failure, in one table.
 * The modules that use them take their defaults from here, and docs/how-it-works.md ("Failover timers")
 * lists the same rows with what each decides (test/unit/failover-timers.test.ts checks that the two agree).
 *
 * Two kinds: fixed intervals ({@link FAILOVER_TIMERS}, ms) and those that follow the election's TTL and the
 * `overdueGrace` setting ({@link leaseTimers}). All are measured on the monotonic clock.
 */

/** The fixed failover intervals, ms. */
export const FAILOVER_TIMERS = {
  /**
   * An elected replica whose informer has not listed the pods yet does not consume; it logs a warning this
   * often while it waits (each a line with `waitedMs` and the informer's `restarts`), so a wait of 30 s is
   * never silent.
   */
  informerSyncWarnMs: 10_000,
  /**
   * An informer unable to list or watch for this long: its cache is no longer trusted (each re-check GETs the
   * pod) and the replica is not ready for the target (a leader hands it over).
   */
  staleCacheAfterMs: 10_000,
  /**
   * A replica whose own connection to Redis has been down this long is not ready for its targets (a leader
   * hands them over to a replica that reaches Redis; src/queue/redis-outage.ts).
   */
  redisDownNotReadyMs: 10_000,
  /** The informer's list+watch restart: first backoff (then ×2 per failure, with jitter ×U(0.5, 1)). */
  informerBackoffBaseMs: 500,
  /** The informer's longest restart backoff. */
  informerBackoffMaxMs: 30_000,
  /** Failures further apart than this start the backoff over (client-go's reset duration). */
  informerBackoffResetMs: 120_000,
  /**
   * A new term's takeover of the jobs the previous leader still holds (BullMQ's active list) may hold up the
   * worker's start this long; past it the worker starts and those jobs come back when their locks lapse.
   */
  takeOverTimeoutMs: 2_000,
  /** A BullMQ job lock (`lockDuration`): a frozen leader's jobs not taken over return this long after it froze. */
  jobLockMs: 10_000,
  /** A term's end waits this long for the worker to close (in-flight DELETEs answered, jobs put back). */
  consumerCloseTimeoutMs: 4_000,
  /** etcd: calls and streams avoid a member that failed a call this recently (while another has not). */
  avoidFailedMemberMs: 5_000,
  /** The self-check runs this often (overdue pods, a stuck leader, fenced jobs). */
  selfCheckIntervalMs: 5_000,
  /** Fenced jobs with no progress in between for this long (or half of `overdueGrace`, if shorter): a warning. */
  fencedWarnMs: 10_000,
} as const;

/** Intervals that follow the election TTL and `overdueGrace`, ms. */
export interface LeaseTimers {
  /** The election TTL (etcd: the lease TTL; ZooKeeper: the session timeout asked for). */
  readonly ttlMs: number;
  /**
   * A leader stops DELETEs once its last sign of life from the store is this old: TTL − min(1 s, TTL/5), a
   * little before the store can expire its session (clock rates, timer granularity).
   */
  readonly fenceAfterMs: number;
  /**
   * A target with no candidate at all for this long is campaigned for by every ready replica, not only by
   * its assigned one: one TTL.
   */
  readonly fallbackMs: number;
  /**
   * A pod this long past its deadline is overdue (metrics, alerts): `overdueGrace`, default 2 × TTL + 30 s, so
   * that one failover (the old lease expiring, the new leader syncing and reconciling) never counts.
   */
  readonly overdueGraceMs: number;
  /** A leader with overdue pods and no progress for this long steps down: `overdueGrace`. */
  readonly leaderStuckMs: number;
  /** A follower logs an alarm for a pod this far past its deadline: 2 × `overdueGrace`. */
  readonly followerAlarmMs: number;
}

/**
 * The lease-derived timers.
 * @param ttlSeconds the election TTL, s (config `electionTtl`)
 * @param overdueGraceMs config `overdueGrace`, ms (undefined: the default, 2 × TTL + 30 s)
 */
export function leaseTimers(ttlSeconds: number, overdueGraceMs?: number): LeaseTimers {
  const ttlMs = ttlSeconds * 1000;
  const grace = overdueGraceMs ?? 2 * ttlMs + 30_000;
  return {
    ttlMs,
    fenceAfterMs: sessionValidMs(ttlMs),
    fallbackMs: ttlMs,
    overdueGraceMs: grace,
    leaderStuckMs: grace,
    followerAlarmMs: 2 * grace,
  };
}

/**
 * How long a leader may act on its last sign of life from the store, ms, given how long the store keeps a
 * silent session, ms (etcd: the lease TTL; ZooKeeper: the granted session timeout). Stops DELETEs a little
 * before the server can expire it: its clock's rate and ours, timer granularity. The margin is 1 s, or a
 * fifth of a shorter session.
 */
export function sessionValidMs(sessionMs: number): number {
  return sessionMs - Math.min(1000, sessionMs / 5);
}
