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
