/**
 * The {@link ElectionReader} of etcd (src/leadership/election-reader.ts), as the replicas decide
 * (src/leadership/etcd/election.ts): the keys under the target's election prefix,
 *   `<etcdKeyPrefix>clusters/<cluster>/election/<namespace>/<lease id>` = replica id, the lowest create
 *   revision leads; the members of a scope are the keys `<etcdKeyPrefix>clusters/<scope>/members/<replica id>`;
 *   release 0.1.0's replicas and elections, while a rolling update from it runs, are under `members/` and
 *   `election/` (src/leadership/previous-release-gate.ts).
 */
import type { Etcd3 } from 'etcd3';
import {
  clusterElectionsPrefix,
  electionPrefix,
  membersPrefix,
  previousReleaseElectionPrefix,
  previousReleaseMembersPrefix,
} from '../../queue/job-identity.ts';
import type { ElectionReader } from '../election-reader.ts';
import { ETCD_ROOT } from './session.ts';

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
