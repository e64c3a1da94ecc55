/**
 * Which live replica should lead each target: a pure function of (targets, live members), computed the same
 * way by every replica from its view of etcd, so that they agree without talking to each other.
 *
 * The rule (**rendezvous hashing with a cap**): every (member, target) pair gets a score, the first 48 bits of
 * SHA-256(`member \0 target`); targets are taken in a fixed order (sorted by their key, `cluster/namespace`), and each goes to
 * the member with the highest score among those that have fewer than ⌈T / R⌉ targets so far (ties go to the
 * smaller member id). So no member is assigned more than ⌈T / R⌉, and a member joining or leaving moves
 * few targets: rendezvous hashing alone moves only the targets whose best member changed (about T / R), and
 * the cap moves a few more.
 *
 * **Readiness**: a member that reports a target not ready (it cannot clean it now: its informer has not listed
 * the pods, or has been unable to list or watch for a while) is skipped for that target, and R counts only the
 * members ready for at least one target. A target no member is ready for goes to the members as if all were
 * ready: when every replica's informer fails the same way (an API outage), leadership does not move around, and
 * the leader's term waits for its informer.
 */
import { createHash } from 'node:crypto';

/** The rule in one sentence, as `/api/v1/leaders` shows it. */
export const ASSIGNMENT_RULE =
  'rendezvous hashing capped at ceil(targets / live replicas): targets in key order each go to the ' +
  'highest-scoring live replica (sha256 of "replica\\0target") that has fewer than the cap, skipping replicas ' +
  'that report the target not ready (unless none is ready for it; the cap counts replicas ready for some target)';

/** The owner of each target and the cap each member was held to. */
export interface Assignment {
  /** Target key (`cluster/namespace`) → member id. Empty when there is no member. */
  readonly owners: ReadonlyMap<string, string>;
  /** ⌈T / R⌉ (0 without members). */
  readonly cap: number;
}

/** The score of `member` for `target` (48 bits of SHA-256). */
function score(member: string, target: string): number {
  return createHash('sha256').update(`${member}\0${target}`).digest().readUIntBE(0, 6);
}

/**
 * Assigns every target to one member, at most ⌈T / R⌉ per member, R the members ready for some target. Pure
 * and deterministic: the result depends only on the sets (not their order, nor duplicates).
 * @param targets target keys (`cluster/namespace`)
 * @param members live member (replica) ids
 * @param unready member id → the targets it reports not ready (absent: ready for all); see the module header
 */
export function assignTargets(
  targets: Iterable<string>,
  members: Iterable<string>,
  unready: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
): Assignment {
  const ts = [...new Set(targets)].sort();
  const ms = [...new Set(members)].sort();
  if (ms.length === 0) return { owners: new Map(), cap: 0 };
  const readyFor = (m: string, t: string) => !unready.get(m)?.has(t);
  const someReady = ms.filter((m) => ts.some((t) => readyFor(m, t)));
  const cap = Math.ceil(ts.length / (someReady.length > 0 ? someReady.length : ms.length));
  const load = new Map<string, number>(ms.map((m) => [m, 0]));
  const owners = new Map<string, string>();
  for (const t of ts) {
    const ready = ms.filter((m) => readyFor(m, t));
    const eligible = ready.length > 0 ? ready : ms;
    const ranked = eligible
      .map((m) => ({ m, s: score(m, t) }))
      .sort((a, b) => b.s - a.s || (a.m < b.m ? -1 : 1));
    // Every member ready for it may be at the cap (others are not ready for it): then the least loaded.
    const owner =
      ranked.find(({ m }) => (load.get(m) ?? 0) < cap)?.m ??
      ranked.reduce<string | undefined>(
        (best, { m }) => (best === undefined || (load.get(m) ?? 0) < (load.get(best) ?? 0) ? m : best),
        undefined,
      );
    if (owner === undefined) continue;
    owners.set(t, owner);
    load.set(owner, (load.get(owner) ?? 0) + 1);
  }
  return { owners, cap };
}

/**
 * The target set part of a replica's membership value: its set of targets, as a hash of the sorted,
 * de-duplicated keys (`cluster/namespace`) — `targets:<16 hex digits of SHA-256>`. Replicas balance only with the members whose
 * target set equals theirs (src/leadership/leadership-group.ts); `status` computes the same value from the
 * configuration to find them.
 * @param targets target keys (`cluster/namespace`), in any order
 */
export function targetSetValue(targets: Iterable<string>): string {
  const labels = [...new Set(targets)].sort().join('\n');
  return `targets:${createHash('sha256').update(labels).digest('hex').slice(0, 16)}`;
}

/** A membership value, parsed ({@link memberValue}). */
export interface MemberValue {
  /** The member's target set ({@link targetSetValue}). */
  readonly targetSet: string;
  /** The targets it cannot clean now (target keys); `all` when it reports none ready. */
  readonly unready: readonly string[] | 'all';
  /**
   * The fingerprints of each cluster it serves, by cluster name (src/kube/cluster-identity.ts): how replicas
   * given one explicit name for two clusters find each other (src/cleaner/cluster-claims.ts). Empty when the
   * value has none.
   */
  readonly clusters: Readonly<Record<string, readonly string[]>>;
}

/** The `clusters` line of a membership value: cluster name → its fingerprints, as JSON. */
export function clustersLine(clusters: Readonly<Record<string, readonly string[]>>): string {
  return `clusters ${JSON.stringify(clusters)}`;
}

/**
 * The value of a replica's membership key (`<root>clusters/<scope>/members/<id>`): its target set
 * ({@link targetSetValue}); then, when some targets are not ready on it, a line `unready *` (none ready: a
 * starting replica) or `unready <JSON array of target keys>`; then, when given, the `clusters` line
 * ({@link clustersLine}). One key per replica, whatever the number of targets.
 * @param targetSet this replica's {@link targetSetValue}
 * @param unready the keys of its targets that are not ready
 * @param total how many targets it serves (all unready → `*`)
 * @param clusters its {@link clustersLine}, if any
 */
export function memberValue(
  targetSet: string,
  unready: readonly string[],
  total: number,
  clusters?: string,
): string {
  const lines = [targetSet];
  if (unready.length > 0)
    lines.push(unready.length >= total ? 'unready *' : `unready ${JSON.stringify([...unready].sort())}`);
  if (clusters) lines.push(clusters);
  return lines.join('\n');
}

/**
 * Parses a membership value ({@link memberValue}); a value of another shape (an older replica's, a replica
 * id) has itself as target set, every target ready and no clusters. Lines it does not know are ignored.
 */
export function parseMemberValue(value: string): MemberValue {
  const [targetSet = '', ...rest] = value.split('\n');
  let unready: MemberValue['unready'] = [];
  let clusters: Record<string, readonly string[]> = {};
  for (const line of rest) {
    if (line === 'unready *') unready = 'all';
    else if (line.startsWith('unready ')) {
      try {
        const list: unknown = JSON.parse(line.slice('unready '.length));
        if (Array.isArray(list)) unready = list.filter((x) => typeof x === 'string');
      } catch {
        // not ours: every target ready
      }
    } else if (line.startsWith('clusters ')) {
      try {
        const parsed: unknown = JSON.parse(line.slice('clusters '.length));
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
          clusters = Object.fromEntries(
            Object.entries(parsed as Record<string, unknown>)
              .filter(([, v]) => Array.isArray(v))
              .map(([k, v]) => [k, (v as unknown[]).filter((x) => typeof x === 'string')]),
          );
      } catch {
        // not ours: no claims
      }
    }
  }
  return { targetSet, unready, clusters };
}

/**
 * The unready targets of each member, for {@link assignTargets}.
 * @param members member id → parsed membership value (only those with unready targets matter)
 * @param targets the target keys (`all` expands to them)
 */
export function unreadyOf(
  members: Iterable<readonly [string, MemberValue]>,
  targets: readonly string[],
): Map<string, ReadonlySet<string>> {
  const out = new Map<string, ReadonlySet<string>>();
  for (const [id, v] of members) {
    if (v.unready === 'all') out.set(id, new Set(targets));
    else if (v.unready.length > 0) out.set(id, new Set(v.unready));
  }
  return out;
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
  /** Target key (`cluster/namespace`) → the member it is assigned to (absent without members). */
  readonly owners: Readonly<Record<string, string>>;
  /** Target key → the members that report it not ready, sorted; only targets some member cannot clean. */
  readonly notReady: Readonly<Record<string, readonly string[]>>;
}

/**
 * The balance of `targets` over `members`, given who leads each target now. Pure.
 * @param targets target keys (`cluster/namespace`); `targets` in the result is their number
 * @param members live member ids, sorted (as the result lists them)
 * @param leaders the leading replica of each target (undefined: none), one entry per target
 * @param unready member id → the targets it reports not ready ({@link unreadyOf})
 * @param assignment `assignTargets(targets, members, unready)`, when the caller has it already
 */
export function describeBalance(
  targets: readonly string[],
  members: readonly string[],
  leaders: Iterable<string | undefined>,
  unready: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
  assignment: Assignment = assignTargets(targets, members, unready),
): LeadershipBalance {
  const share: Record<string, { assigned: number; leading: number }> = {};
  const of = (m: string) => {
    share[m] ??= { assigned: 0, leading: 0 };
    return share[m];
  };
  for (const m of members) of(m);
  for (const owner of assignment.owners.values()) of(owner).assigned += 1;
  for (const leader of leaders) if (leader !== undefined) of(leader).leading += 1;
  const notReady: Record<string, string[]> = {};
  const known = new Set(targets);
  for (const m of members)
    for (const t of unready.get(m) ?? []) {
      if (!known.has(t)) continue;
      notReady[t] ??= [];
      notReady[t].push(m);
    }
  return {
    rule: ASSIGNMENT_RULE,
    members,
    targets: targets.length,
    cap: assignment.cap,
    share,
    owners: Object.fromEntries(assignment.owners),
    notReady,
  };
}
