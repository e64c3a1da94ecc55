/**
 * How leaderships are balanced, read from the leadership backend the way the replicas' balancer decides it
 * (src/leadership/leadership-group.ts), for `status`: the live members are the membership entries of the
 * replicas' scope (etcd: the keys `<etcdKeyPrefix>clusters/<scope>/members/<replica id>` on each replica's
 * session lease; ZooKeeper: the ephemeral nodes `<root>/clusters/<scope>/members/<replica id>`,
 * src/leadership/election-reader.ts); a replica balances with the
 * members whose key's value names the same set of targets (a hash of the target keys,
 * src/leadership/assignment.ts `targetSetValue`), so `status` counts those whose value matches the configured
 * targets. The value also names the targets a replica cannot clean now (not ready: its informer has not listed
 * or is down); the assignment is the replicas' own pure function (`assignTargets`, skipping those), so `status`
 * shows what they compute from the same keys. Read-only.
 */
import {
  describeBalance,
  type LeadershipBalance,
  parseMemberValue,
  targetSetValue,
  unreadyOf,
} from '../leadership/assignment.ts';
import type { ElectionReader } from '../leadership/election-reader.ts';

/** The balance as the backend has it for the configured targets. */
export interface BalanceStatus extends LeadershipBalance {
  /** Live members that serve another set of targets (another deployment, a rollout changing targets), sorted. */
  readonly otherMembers: readonly string[];
}

/**
 * The balance of `targets` over the members serving exactly these targets. Pure.
 * @param targets the configured target keys (`cluster/namespace`, src/queue/job-identity.ts `targetKey`)
 * @param members the live members, id → membership value (`ElectionReader.members`)
 * @param leaders the leader of each target in `targets` order (null or undefined: none)
 */
export function balanceOf(
  targets: readonly string[],
  members: ReadonlyMap<string, string>,
  leaders: readonly (string | null | undefined)[],
): BalanceStatus {
  const value = targetSetValue(targets);
  const ids = [...members.keys()].sort();
  const parsed = new Map(ids.map((m) => [m, parseMemberValue(members.get(m) ?? '')]));
  const peers = ids.filter((m) => parsed.get(m)?.targetSet === value);
  return {
    ...describeBalance(
      targets,
      peers,
      leaders.map((l) => l ?? undefined),
      unreadyOf(
        peers.map((m) => [m, parsed.get(m) ?? { targetSet: value, unready: [], clusters: {} }] as const),
        targets,
      ),
    ),
    otherMembers: ids.filter((m) => parsed.get(m)?.targetSet !== value),
  };
}

/**
 * Reads the members of `scope` (src/queue/job-identity.ts `membershipScope`) from the backend and computes
 * the balance of `targets` (see {@link balanceOf}).
 * @throws the client's error when the backend cannot be reached.
 */
export async function readBalance(
  elections: ElectionReader,
  scope: string,
  targets: readonly string[],
  leaders: readonly (string | null | undefined)[],
): Promise<BalanceStatus> {
  return balanceOf(targets, await elections.members(scope), leaders);
}
