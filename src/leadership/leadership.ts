/**
 * Leadership of one target (context, namespace): only the leader's worker consumes the target's queue.
 * Implementations: an election on a leadership backend — etcd (src/leadership/etcd/election.ts, on the
 * replica's shared session lease) or ZooKeeper (src/leadership/zookeeper/election.ts, on its shared session) —
 * balanced by src/leadership/leadership-group.ts; and, without a backend, local leadership
 * (src/leadership/local-leadership.ts) where this replica always leads.
 */

/** Callbacks of a leadership ({@link Leadership.addEventHandler}); they must not throw. */
export interface LeadershipEvents {
  /** This replica became the leader (a new term). */
  onElected: () => void;
  /** This replica stopped being the leader: lease lost or stale, resigned, or shutting down. */
  onLost: (reason: string) => void;
}

/**
 * The freshness of a replica's session with its leadership backend, as each backend measures it (exported as
 * one gauge per backend: src/telemetry/metrics.ts). Times in ms, monotonic.
 * - `etcd`: `keepaliveAgeMs`, how long ago the last successful keepalive of the lease was sent. Keepalives go
 *   every TTL/3; a leader fences itself once TTL − min(1 s, TTL/5) has passed without one (src/failover-timers.ts),
 *   and etcd expires the lease at TTL.
 * - `zookeeper`: `disconnectedMs`, how long the session has been without a connection; 0 while connected (the
 *   client's pings keep a connected session alive). A leader stops its DELETEs as soon as the connection drops;
 *   the server expires the session after its timeout, and the replica gives it up then and opens a new one.
 *
 * A new backend adds its own variant here, and its gauge beside the others in src/telemetry/metrics.ts: one
 * name per measure, each meaning what it says.
 */
export type SessionHealth =
  | { readonly backend: 'etcd'; readonly keepaliveAgeMs: number }
  | { readonly backend: 'zookeeper'; readonly disconnectedMs: number };

/** One target's leadership as seen from this replica. */
export interface Leadership {
  /**
   * Subscribes `events` to every term from now on, as client-go's `AddEventHandler`: subscribe before
   * `start()`.
   */
  addEventHandler(events: LeadershipEvents): void;
  /**
   * Tells the leadership how to ask whether this replica can clean the target now (its informer has listed the
   * pods and is not down for long): the etcd election campaigns, and counts this replica as a member the
   * target may be assigned to, only while `probe()` is true, and hands the target over to a ready replica when
   * it turns false (src/leadership/leadership-group.ts). Local leadership has no one to hand over to and
   * ignores it. Call before `start()`; without a probe the replica counts as ready. `probe` must be cheap: it
   * is asked about once a second.
   */
  readyWhen(probe: () => boolean): void;
  /** Starts campaigning (idempotent). */
  start(): void;
  /**
   * Leaves: ends the term, deletes this replica's candidate entry and stops campaigning. Idempotent. The next
   * candidate in line is elected at once; balanced, a target whose assigned replica resigned while it stays a
   * member has no candidate until the balancer's fallback (one TTL), which is why a replica leaves by closing
   * its whole group (the session ends: every target reassigned at once, src/leadership/leadership-group.ts).
   */
  resign(): Promise<void>;
  /**
   * Ends the current term so that another replica may lead: the etcd election deletes this term's candidate
   * key (a candidate in line is elected at once) and, if this replica is still to be a candidate, campaigns
   * again at the back of the line (alone, it begins a new term); local leadership ends the term and begins a
   * new one (a fresh worker). A no-op when not leading. Used by the self-check when this leader is stuck
   * (src/cleaner/self-check.ts) and by the balancer to hand a target over
   * (src/leadership/leadership-group.ts).
   */
  stepDown(reason: string): void;
  readonly isLeader: boolean;
  /**
   * Fencing: resolves only if this replica may DELETE now. Checks the lease is fresh (a TTL has not passed
   * since the last successful keepalive) and the leader key still exists with our create revision.
   * @throws FencedError otherwise.
   */
  fence(signal: AbortSignal): Promise<void>;
  /** The I/O-free part of {@link Leadership.fence}: leader and lease fresh. */
  stillLeader(): boolean;
  /**
   * How fresh this replica's session with the leadership backend is, in that backend's own terms (ms, on the
   * monotonic clock); undefined when not campaigning, while the replica holds no session (etcd: no lease
   * granted; ZooKeeper: never connected yet, or a session given up), and for local leadership, which has none.
   */
  readonly session: SessionHealth | undefined;
  /** The replica id of the current leader of this target, if known. */
  currentLeader(): Promise<string | undefined>;
  /**
   * What keeps this replica from consuming although it may be elected (src/leadership/gated-leadership.ts):
   * each closed gate's reason (`previous-release`, `cluster-name-conflict`), its message, and whether the
   * election has elected this replica. Absent or empty: nothing holds it.
   */
  heldBy?(): readonly { readonly reason: string; readonly why: string; readonly elected: boolean }[];
}

/** The subscribers of one leadership: each told in subscription order. */
export interface LeadershipSubscribers extends LeadershipEvents {
  add(events: LeadershipEvents): void;
}

/** Creates an empty {@link LeadershipSubscribers}, for the implementations of {@link Leadership}. */
export function leadershipSubscribers(): LeadershipSubscribers {
  const all: LeadershipEvents[] = [];
  return {
    add: (events) => {
      all.push(events);
    },
    onElected: () => {
      for (const e of all) e.onElected();
    },
    onLost: (reason) => {
      for (const e of all) e.onLost(reason);
    },
  };
}
