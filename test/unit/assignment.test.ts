import { describe, expect, it } from 'vitest';
import { assignTargets } from '../../src/leadership/assignment.ts';

const targets = (n: number) => Array.from({ length: n }, (_, i) => `ctx:ns-${i}`);
const members = (n: number) => Array.from({ length: n }, (_, i) => `replica-${i}`);

/** Targets per member. */
function loads(owners: ReadonlyMap<string, string>): Map<string, number> {
  const l = new Map<string, number>();
  for (const o of owners.values()) l.set(o, (l.get(o) ?? 0) + 1);
  return l;
}

/** How many targets changed owner between two assignments (over the targets of the first). */
function moved(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): number {
  let n = 0;
  for (const [t, o] of a) if (b.get(t) !== o) n++;
  return n;
}

describe('assignTargets (rendezvous hashing capped at ⌈T/R⌉)', () => {
  it.each([
    [12, 3],
    [100, 3],
    [300, 3],
    [1000, 5],
    [10, 3],
    [7, 4],
    [3, 5],
  ])('%i targets, %i members: every target assigned to a member, none over ⌈T/R⌉', (t, r) => {
    const a = assignTargets(targets(t), members(r));
    expect(a.cap).toBe(Math.ceil(t / r));
    expect(a.owners.size).toBe(t);
    for (const o of a.owners.values()) expect(members(r)).toContain(o);
    for (const n of loads(a.owners).values()) expect(n).toBeLessThanOrEqual(a.cap);
    // While T ≥ R, every member leads something.
    if (t >= r) expect(loads(a.owners).size).toBe(r);
  });

  it('deterministic: the same sets in any order, with duplicates, give the same assignment', () => {
    const a = assignTargets(targets(50), members(4));
    const shuffled = [...targets(50)].reverse();
    const b = assignTargets(
      [...shuffled, 'ctx:ns-3'],
      ['replica-2', 'replica-0', 'replica-3', 'replica-1', 'replica-0'],
    );
    expect([...b.owners].sort()).toEqual([...a.owners].sort());
    expect(b.cap).toBe(a.cap);
  });

  it('no member: nothing assigned', () => {
    expect(assignTargets(targets(5), []).owners.size).toBe(0);
  });

  it('minimal movement: a member joining takes about its share, and moves little else', () => {
    for (const [t, r] of [
      [12, 3],
      [100, 3],
      [300, 3],
      [1000, 5],
    ] as const) {
      const before = assignTargets(targets(t), members(r));
      const after = assignTargets(targets(t), members(r + 1));
      const share = loads(after.owners).get(`replica-${r}`) ?? 0;
      const m = moved(before.owners, after.owners);
      // The newcomer's targets had to move; at most a few more move between the others (the cap's spill-over).
      expect(share).toBeGreaterThanOrEqual(Math.floor(t / (r + 1)));
      expect(m - share, `${t} targets, ${r} → ${r + 1} members`).toBeLessThanOrEqual(Math.ceil(0.05 * t) + 1);
    }
  });

  it('minimal movement: a member leaving moves its targets, and few of the others', () => {
    for (const [t, r] of [
      [12, 3],
      [100, 3],
      [300, 3],
      [1000, 5],
    ] as const) {
      const before = assignTargets(targets(t), members(r));
      const after = assignTargets(targets(t), members(r).slice(1)); // replica-0 left
      const kept = new Map([...before.owners].filter(([, o]) => o !== 'replica-0'));
      expect(moved(kept, after.owners), `${t} targets, ${r} → ${r - 1} members`).toBeLessThanOrEqual(
        Math.ceil(0.05 * t) + 1,
      );
    }
  });

  it('the same assignment on every replica: it depends on nothing but the two sets', () => {
    // As two replicas compute it: separately, from sets read in different orders.
    const mine = assignTargets(['k:a', 'k:b', 'k:c', 'k:d'], ['x', 'y']);
    const theirs = assignTargets(['k:d', 'k:c', 'k:b', 'k:a'], ['y', 'x']);
    expect(Object.fromEntries(mine.owners)).toEqual(Object.fromEntries(theirs.owners));
    expect([...loads(mine.owners).values()]).toEqual([2, 2]);
  });
});
