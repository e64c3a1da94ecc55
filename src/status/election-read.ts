/**
 * Who leads a target, read from etcd the way the candidates decide it (src/leadership/etcd-leadership.ts):
 * the keys under the target's election prefix, `prefix/<lease id>` = replica id; the key with the lowest
 * create revision leads, the others wait in that order. Read-only: `status` and `explain` never campaign.
 *
 * etcd keeps no time with a revision, and a lease's TTL is renewed by every keepalive, so etcd cannot say
 * since when a replica leads; `status` takes that from Redis instead (src/status/target-status.ts).
 */
import type { Etcd3 } from 'etcd3';
import { electionPrefix, type TargetRef } from '../queue/job-identity.ts';

/** A target's election as etcd has it. */
export interface ElectionState {
  /** The leading replica's id; undefined when no replica campaigns (a leaderless target). */
  readonly leader: string | undefined;
  /** The leader key's lease id (decimal), when there is a leader. */
  readonly leaseId: string | undefined;
  /** The other candidates, next leader first. */
  readonly candidates: readonly string[];
}

/**
 * Reads a target's election (`root`: the `etcdKeyPrefix`, default `spark-driver-cleaner/`).
 * @throws the etcd client's error when etcd cannot be reached.
 */
export async function readElection(etcd: Etcd3, target: TargetRef, root?: string): Promise<ElectionState> {
  const kvs = (await etcd.namespace(electionPrefix(target, root)).getAll().sort('Create', 'Ascend').exec())
    .kvs;
  const [first, ...rest] = kvs;
  return {
    leader: first?.value.toString(),
    leaseId: first?.lease,
    candidates: rest.map((kv) => kv.value.toString()),
  };
}
