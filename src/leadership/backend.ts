/**
 * What a leadership backend (etcd, ZooKeeper) provides to the balancer (src/leadership/leadership-group.ts),
 * which holds the balancing and term rules once for both: a replica's session with its membership entry, a
 * view of the members and of every election's candidates, and per target an election whose candidacy the
 * balancer turns on and off. Each backend keeps one leader per election and fences each DELETE on its own
 * store; the balancer only decides who campaigns.
 */
import type { LimitFunction } from 'p-limit';
import type { Logger } from '../log.ts';
import type { Leadership } from './leadership.ts';

/** How long a leader may act on its last sign of life from the store (src/failover-timers.ts). */
export { sessionValidMs } from '../failover-timers.ts';

/**
 * The least time between two writes of the membership value, ms: a replica whose 1,000 informers sync one after
 * another writes its entry a few times, not 1,000 times (every replica's view sees each write).
 */
export const MEMBER_VALUE_MIN_GAP_MS = 500;

/** One candidate of an election, as the view shows it. */
export interface Candidate {
  /** The candidate's key or node path, unique in the election. */
  readonly key: string;
  /** The candidate's replica id. */
  readonly replicaId: string;
}

/** A replica's view of the live members and of every election's candidates. */
export interface MembersView {
  /** True once the first read is applied. */
  readonly synced: boolean;
  /** The candidates of an election, the leader (first in line) first. */
  candidates(prefix: string): readonly Candidate[];
  /** The live member ids (replicas whose membership entry exists), sorted. */
  members(): readonly string[];
  /** The value of a live member's entry (src/leadership/assignment.ts `memberValue`). */
  memberValue(id: string): string | undefined;
  /** Calls `cb` after each applied change (of members, or of candidates). */
  onChange(cb: () => void): void;
}

/** An election of one target: a {@link Leadership} whose candidacy the balancer turns on and off. */
export interface BackendElection extends Leadership {
  /** The election's prefix (etcd key prefix, ZooKeeper path ending with `/`). */
  readonly prefix: string;
  /** Started and not resigned. */
  readonly active: boolean;
  /** Whether this replica should be a candidate. */
  readonly wanted: boolean;
  /** The readiness probe's answer now ({@link Leadership.readyWhen}; true without a probe). */
  readonly ready: boolean;
  /**
   * Neither campaigning nor leading, nor deleting its entry after a term: a candidate entry of this replica's
   * session seen now in this election belongs to no term (a create applied with its answer lost).
   */
  readonly idle: boolean;
  /**
   * Becomes a candidate (true) or withdraws (false): withdrawing ends a campaign not yet elected and deletes
   * its entry; a term already won goes on until `stepDown` or `resign`.
   */
  setWanted(wanted: boolean): void;
}

/** What the balancer gives a backend when it creates it. */
export interface BackendContext {
  /** The membership value now (written at each registration and by `refreshMemberValue`). */
  memberValue: () => string;
  /** Bounds the replica's concurrent campaign calls. */
  limit: LimitFunction;
}

/** A replica's leadership backend. */
export interface LeadershipBackend<E extends BackendElection = BackendElection> {
  readonly view: MembersView;
  /**
   * True while the replica's session lives (etcd: a granted lease; ZooKeeper: a session connected, or
   * suspended and not yet given up). The balancer withdraws every candidacy otherwise.
   */
  readonly live: boolean;
  /** Calls `cb` whenever the session becomes live (a new lease, a new or reconnected session). */
  onLive(cb: () => void): void;
  /** Writes the membership value again if it changed (coalesced, rate-limited by the backend). */
  refreshMemberValue(): void;
  /** Creates the election of one target (not started). */
  election(prefix: string, log: Logger): E;
  /**
   * When the session is live and `election` is idle and not wanted: deletes this replica's candidate entries
   * of it (of this session) that no term holds, calling `done` when a deletion settles. Returns true while
   * one of its entries is being deleted (the balancer then does not campaign in that election: a campaign
   * would adopt the entry being deleted).
   */
  tidy(election: E, done: () => void): boolean;
  /** Starts the session and the view (idempotent). */
  start(): void;
  /**
   * Leaves: every term of `elections` ends as resigned, the session ends so that every entry of this replica
   * goes at once. Never rejects; the balancer bounds it with {@link LeadershipBackend.closeTimeoutMs}.
   */
  close(elections: readonly E[]): Promise<void>;
  /** The longest `close()` should take, ms. */
  readonly closeTimeoutMs: number;
}
