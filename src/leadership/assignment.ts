/**
 * Which live replica should lead each target: a pure function of (targets, live members), computed the same
 * way by every replica from its view of etcd, so that they agree without talking to each other.
 *
 * The rule (**rendezvous hashing with a cap**): every (member, target) pair gets a score, the first 48 bits of
 * SHA-256(`member \0 target`); targets are taken in a fixed order (sorted by their label), and each goes to
 * the member with the highest score among those that have fewer than ⌈T / R⌉ targets so far (ties go to the
 * smaller member id). So no member is assigned more than ⌈T / R⌉, and a member joining or leaving moves
 * few targets: rendezvous hashing alone moves only the targets whose best member changed (about T / R), and
 * the cap moves a few more.
 */
import { createHash } from 'node:crypto';

/** The rule in one sentence, as `/api/v1/leaders` shows it. */
export const ASSIGNMENT_RULE =
  'rendezvous hashing capped at ceil(targets / live replicas): targets in label order each go to the ' +
  'highest-scoring live replica (sha256 of "replica\\0target") that has fewer than the cap';

/** The owner of each target and the cap each member was held to. */
export interface Assignment {
  /** Target label → member id. Empty when there is no member. */
  readonly owners: ReadonlyMap<string, string>;
  /** ⌈T / R⌉ (0 without members). */
  readonly cap: number;
}

/** The score of `member` for `target` (48 bits of SHA-256). */
function score(member: string, target: string): number {
  return createHash('sha256').update(`${member}\0${target}`).digest().readUIntBE(0, 6);
}

/**
 * Assigns every target to one member, at most ⌈T / R⌉ per member. Pure and deterministic: the result depends
 * only on the two sets (not their order, nor duplicates).
 * @param targets target labels (`context:namespace`)
 * @param members live member (replica) ids
 */
export function assignTargets(targets: Iterable<string>, members: Iterable<string>): Assignment {
  const ts = [...new Set(targets)].sort();
  const ms = [...new Set(members)].sort();
  if (ms.length === 0) return { owners: new Map(), cap: 0 };
  const cap = Math.ceil(ts.length / ms.length);
  const load = new Map<string, number>(ms.map((m) => [m, 0]));
  const owners = new Map<string, string>();
  for (const t of ts) {
    const ranked = ms.map((m) => ({ m, s: score(m, t) })).sort((a, b) => b.s - a.s || (a.m < b.m ? -1 : 1));
    // Some member is below the cap: fewer than T targets were assigned so far and R × cap ≥ T.
    const owner = ranked.find(({ m }) => (load.get(m) ?? 0) < cap)?.m ?? ms[0];
    if (owner === undefined) continue;
    owners.set(t, owner);
    load.set(owner, (load.get(owner) ?? 0) + 1);
  }
  return { owners, cap };
}

/**
 * The value of a replica's membership key (`spark-driver-cleaner/members/<id>`): its set of targets, as a
 * hash of the sorted, de-duplicated labels — `targets:<16 hex digits of SHA-256>`. Replicas balance only with
 * the members whose value equals theirs (src/leadership/etcd-leadership-group.ts); `status` computes the same
 * value from the configuration to find them.
 * @param targets target labels (`context:namespace`), in any order
 */
export function targetSetValue(targets: Iterable<string>): string {
  const labels = [...new Set(targets)].sort().join('\n');
  return `targets:${createHash('sha256').update(labels).digest('hex').slice(0, 16)}`;
}

/** How leaderships are balanced over the live members, as `/api/v1/leaders` and `status --json` show it. */
export interface LeadershipBalance {
  /** The assignment rule, in one sentence. */
  readonly rule: string;
  /** The live members serving the same targets (replica ids), sorted. */
  readonly members: readonly string[];
  /** Targets balanced. */
  readonly targets: number;
  /** ⌈targets / members⌉: the most any member is assigned (0 without members). */
  readonly cap: number;
  /**
   * Per replica: targets assigned to it, and targets it leads now (etcd's lowest candidate key). Every
   * member has an entry; so does a leader that is not a member (it left, or serves other targets).
   */
  readonly share: Readonly<Record<string, { readonly assigned: number; readonly leading: number }>>;
  /** Target label → the member it is assigned to (absent without members). */
  readonly owners: Readonly<Record<string, string>>;
}

/**
 * The balance of `targets` over `members`, given who leads each target now. Pure.
 * @param targets target labels (`context:namespace`); `targets` in the result is their number
 * @param members live member ids, sorted (as the result lists them)
 * @param leaders the leading replica of each target (undefined: none), one entry per target
 * @param assignment `assignTargets(targets, members)`, when the caller has it already
 */
export function describeBalance(
  targets: readonly string[],
  members: readonly string[],
  leaders: Iterable<string | undefined>,
  assignment: Assignment = assignTargets(targets, members),
): LeadershipBalance {
  const share: Record<string, { assigned: number; leading: number }> = {};
  const of = (m: string) => {
    share[m] ??= { assigned: 0, leading: 0 };
    return share[m];
  };
  for (const m of members) of(m);
  for (const owner of assignment.owners.values()) of(owner).assigned += 1;
  for (const leader of leaders) if (leader !== undefined) of(leader).leading += 1;
  return {
    rule: ASSIGNMENT_RULE,
    members,
    targets: targets.length,
    cap: assignment.cap,
    share,
    owners: Object.fromEntries(assignment.owners),
  };
}
