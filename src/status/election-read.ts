/**
 * Who leads a target and who the live members are, read from the leadership backend the way the replicas
 * decide it — read-only: `status`, `explain` and `/api/v1/explain` never campaign. Every name comes from
 * src/queue/job-identity.ts.
 * - etcd (src/leadership/etcd-leadership.ts): the keys under the target's election prefix,
 *   `<etcdKeyPrefix>clusters/<cluster>/election/<namespace>/<lease id>` = replica id, the lowest create
 *   revision leads; the members of a scope are the keys `<etcdKeyPrefix>clusters/<scope>/members/<replica id>`;
 *   release 0.1.0's replicas and elections, while a rolling update from it runs, are under `members/` and
 *   `election/` (src/leadership/previous-release-gate.ts).
 * - ZooKeeper (src/leadership/zookeeper-election.ts): the candidate nodes of the target's election
 *   directory, the lowest sequence leads; the members are the nodes `<root>/clusters/<scope>/members/<id>`
 *   (src/status/zookeeper-read.ts).
 *
 * Neither keeps the time a term began, so `status` takes "since when" from Redis instead
 * (src/status/target-status.ts).
 */
import type { Etcd3 } from 'etcd3';
import { ETCD_ROOT } from '../leadership/etcd-session.ts';
import {
  clusterElectionsPrefix,
  electionPrefix,
  membersPrefix,
  previousReleaseElectionPrefix,
  previousReleaseMembersPrefix,
  type TargetRef,
} from '../queue/job-identity.ts';

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
  readonly backend: 'etcd' | 'zookeeper';
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
   * etcd only: release 0.1.0's live replicas and the leader of the target's 0.1.0 election.
   * @throws the client's error when the backend cannot be reached.
   */
  previousRelease?(target: TargetRef): Promise<PreviousReleaseState>;
}

/** The reader of an etcd client; `root` is the `etcdKeyPrefix` (default `spark-driver-cleaner/`). */
export function etcdElectionReader(etcd: Etcd3, root: string = ETCD_ROOT): ElectionReader {
  const leaderOf = async (prefix: string) => {
    const kvs = (await etcd.namespace(prefix).getAll().sort('Create', 'Ascend').exec()).kvs;
    const [first, ...rest] = kvs;
    return { leader: first?.value.toString(), candidates: rest.map((kv) => kv.value.toString()) };
  };
  return {
    backend: 'etcd',
    election: (target) => leaderOf(electionPrefix(target, root)),
    async members(scope) {
      const prefix = membersPrefix(scope, root);
      const kvs = (await etcd.getAll().prefix(prefix).exec()).kvs;
      return new Map(kvs.map((kv) => [kv.key.toString().slice(prefix.length), kv.value.toString()]));
    },
    async campaigning(cluster) {
      // Candidate keys live on their replica's lease: a key under the namespace means a campaign now.
      const prefix = clusterElectionsPrefix(cluster, root);
      const keys = await etcd.getAll().prefix(prefix).keys();
      return [...new Set(keys.map((k) => k.slice(prefix.length).split('/')[0] ?? '').filter(Boolean))].sort();
    },
    async previousRelease(target) {
      const prefix = previousReleaseMembersPrefix(root);
      const [keys, old] = await Promise.all([
        etcd.getAll().prefix(prefix).keys(),
        leaderOf(previousReleaseElectionPrefix(target, root)),
      ]);
      return { members: keys.map((k) => k.slice(prefix.length)).sort(), leader: old.leader };
    },
  };
}
