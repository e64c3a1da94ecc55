/**
 * Who leads a target and who the live members are, read from the leadership backend the way the replicas
 * decide it — read-only: `status`, `explain` and `/api/v1/explain` never campaign. Each backend implements
 * it (src/leadership/etcd/election-read.ts, src/leadership/zookeeper/election-read.ts); every name comes from
 * src/queue/job-identity.ts.
 *
 * No backend keeps the time a term began, so `status` takes "since when" from Redis instead
 * (src/status/target-status.ts).
 */
import type { TargetRef } from '../queue/job-identity.ts';

/** The leadership backends, by the name the configuration and `status` use. */
export type LeadershipBackendKind = 'etcd' | 'zookeeper';

/** A target's election as the backend has it. */
export interface ElectionState {
  /** The leading replica's id; undefined when no replica campaigns (a leaderless target). */
  readonly leader: string | undefined;
  /** The other candidates, next leader first. */
  readonly candidates: readonly string[];
}

/** Release 0.1.0 as the backend shows it for one target: its live replicas and who leads its old election. */
export interface PreviousReleaseState {
  /** The live 0.1.0 replicas (any target), sorted. */
  readonly members: readonly string[];
  /** The leader of the target's 0.1.0 election (a 0.1.0 replica, or this version's leader waiting on it). */
  readonly leader: string | undefined;
}

/** Read-only access to a leadership backend's elections and members. */
export interface ElectionReader {
  /** Which backend: named in `status` and `explain` ("no replica campaigns in zookeeper"). */
  readonly backend: LeadershipBackendKind;
  /**
   * Reads a target's election.
   * @throws the client's error when the backend cannot be reached.
   */
  election(target: TargetRef): Promise<ElectionState>;
  /**
   * Reads the live members of a membership scope (src/queue/job-identity.ts `membershipScope`): replica id →
   * its membership value (src/leadership/assignment.ts).
   * @throws the client's error when the backend cannot be reached.
   */
  members(scope: string): Promise<Map<string, string>>;
  /**
   * The namespaces of cluster `cluster` with at least one candidate now, sorted: what `status` shows for a
   * `context:*` target without asking the API server.
   * @throws the client's error when the backend cannot be reached.
   */
  campaigning(cluster: string): Promise<string[]>;
  /**
   * Backends release 0.1.0 ran on (etcd) only: release 0.1.0's live replicas and the leader of the target's 0.1.0 election.
   * @throws the client's error when the backend cannot be reached.
   */
  previousRelease?(target: TargetRef): Promise<PreviousReleaseState>;
}
