/**
 * Who leads a target and who the live members are, read from the leadership backend the way the replicas
 * decide it — read-only: `status`, `explain` and `/api/v1/explain` never campaign.
 * - etcd (src/leadership/etcd-leadership.ts): the keys under the target's election prefix,
 *   `prefix/<lease id>` = replica id, the lowest create revision leads; the members are the keys
 *   `<etcdKeyPrefix>members/<replica id>`.
 * - ZooKeeper (src/leadership/zookeeper-election.ts): the candidate nodes of the target's election
 *   directory, the lowest sequence leads; the members are the nodes `<root>/members/<replica id>`
 *   (src/status/zookeeper-read.ts).
 *
 * Neither keeps the time a term began, so `status` takes "since when" from Redis instead
 * (src/status/target-status.ts).
 */
import type { Etcd3 } from 'etcd3';
import { ETCD_ROOT } from '../leadership/etcd-session.ts';
import { electionPrefix, type TargetRef } from '../queue/job-identity.ts';

/** A target's election as the backend has it. */
export interface ElectionState {
  /** The leading replica's id; undefined when no replica campaigns (a leaderless target). */
  readonly leader: string | undefined;
  /** The other candidates, next leader first. */
  readonly candidates: readonly string[];
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
   * Reads the live members: replica id → its membership value (src/leadership/assignment.ts).
   * @throws the client's error when the backend cannot be reached.
   */
  members(): Promise<Map<string, string>>;
  /**
   * The namespaces of `context` (a resolved context name) with at least one candidate now, sorted: what
   * `status` shows for a `context:*` target without asking the API server.
   * @throws the client's error when the backend cannot be reached.
   */
  campaigning(context: string): Promise<string[]>;
}

/** The reader of an etcd client; `root` is the `etcdKeyPrefix` (default `spark-driver-cleaner/`). */
export function etcdElectionReader(etcd: Etcd3, root: string = ETCD_ROOT): ElectionReader {
  const membersPrefix = `${root}members/`;
  return {
    backend: 'etcd',
    async election(target) {
      const kvs = (
        await etcd.namespace(electionPrefix(target, root)).getAll().sort('Create', 'Ascend').exec()
      ).kvs;
      const [first, ...rest] = kvs;
      return { leader: first?.value.toString(), candidates: rest.map((kv) => kv.value.toString()) };
    },
    async members() {
      const kvs = (await etcd.getAll().prefix(membersPrefix).exec()).kvs;
      return new Map(kvs.map((kv) => [kv.key.toString().slice(membersPrefix.length), kv.value.toString()]));
    },
    async campaigning(context) {
      // Candidate keys live on their replica's lease: a key under the namespace means a campaign now.
      const prefix = `${root}election/${encodeURIComponent(context)}/`;
      const keys = await etcd.getAll().prefix(prefix).keys();
      return [...new Set(keys.map((k) => k.slice(prefix.length).split('/')[0] ?? '').filter(Boolean))].sort();
    },
  };
}
