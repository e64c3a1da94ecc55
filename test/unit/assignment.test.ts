import { describe, expect, it } from 'vitest';
import {
  assignTargets,
  clustersLine,
  memberValue,
  parseMemberValue,
  targetSetValue,
  unreadyOf,
} from '../../src/leadership/assignment.ts';

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

describe('assignTargets with members not ready for some targets', () => {
  const all = (ts: readonly string[]) => new Set(ts);

  it.each([
    [6, 3],
    [12, 3],
    [100, 5],
    [7, 2],
  ])(
    '%i targets, %i members, one ready for none: it is assigned nothing, the others share ⌈T/(R−1)⌉',
    (t, r) => {
      const ts = targets(t);
      const ms = members(r);
      const broken = 'replica-0';
      const a = assignTargets(ts, ms, new Map([[broken, all(ts)]]));
      expect(a.owners.size).toBe(t);
      expect([...a.owners.values()]).not.toContain(broken);
      expect(a.cap).toBe(Math.ceil(t / (r - 1)));
      for (const n of loads(a.owners).values()) expect(n).toBeLessThanOrEqual(a.cap);
    },
  );

  it('a member not ready for one target keeps its other targets; that one goes to a ready member', () => {
    const ts = targets(30);
    const ms = members(3);
    const before = assignTargets(ts, ms);
    const mine = [...before.owners].filter(([, o]) => o === 'replica-1').map(([tg]) => tg);
    const [lost, ...kept] = mine;
    if (lost === undefined) throw new Error('replica-1 was assigned nothing');
    const after = assignTargets(ts, ms, new Map([['replica-1', new Set([lost])]]));
    expect(after.owners.get(lost)).not.toBe('replica-1');
    for (const tg of kept) expect(after.owners.get(tg)).toBe('replica-1');
  });

  it('more targets unready on a member than the others can take under the cap: still each to a ready member', () => {
    // replica-0 is ready only for ns-0; replica-1 and replica-2 for everything: the cap counts 3 members
    // (each ready for something), so the two take more than the cap between them.
    const ts = targets(9);
    const a = assignTargets(ts, members(3), new Map([['replica-0', new Set(ts.slice(1))]]));
    expect(a.owners.size).toBe(9);
    for (const tg of ts.slice(1)) expect(a.owners.get(tg)).not.toBe('replica-0');
  });

  it('a target no member is ready for is assigned as if all were (an API outage does not move leadership)', () => {
    const ts = targets(12);
    const ms = members(3);
    const none = new Map(ms.map((m) => [m, all(ts)]));
    expect(Object.fromEntries(assignTargets(ts, ms, none).owners)).toEqual(
      Object.fromEntries(assignTargets(ts, ms).owners),
    );
  });

  it('the same on every replica: unready sets read from the membership values in any order', () => {
    const ts = targets(20);
    const set = targetSetValue(ts);
    const values = [
      ['replica-2', parseMemberValue(memberValue(set, [ts[3] ?? '', ts[1] ?? ''], ts.length))],
      ['replica-0', parseMemberValue(memberValue(set, ts, ts.length))],
      ['replica-1', parseMemberValue(memberValue(set, [], ts.length))],
    ] as const;
    const mine = assignTargets(ts, members(3), unreadyOf(values, ts));
    const theirs = assignTargets(
      [...ts].reverse(),
      members(3).reverse(),
      unreadyOf([...values].reverse(), ts),
    );
    expect(Object.fromEntries(mine.owners)).toEqual(Object.fromEntries(theirs.owners));
    expect([...mine.owners.values()]).not.toContain('replica-0');
    expect(mine.owners.get(ts[3] ?? '')).toBe('replica-1');
  });
});

describe('membership value', () => {
  const set = targetSetValue(['k:a', 'k:b', 'k:c']);
  it.each([
    ['all ready → the target set alone', [] as string[], set, []],
    ['none ready → unready *', ['k:a', 'k:b', 'k:c'], `${set}\nunready *`, 'all'],
    ['some → a sorted JSON list', ['k:c', 'k:a'], `${set}\nunready ["k:a","k:c"]`, ['k:a', 'k:c']],
  ])('%s', (_name, unready, value, parsed) => {
    expect(memberValue(set, unready, 3)).toBe(value);
    expect(parseMemberValue(value)).toEqual({ targetSet: set, unready: parsed, clusters: {} });
  });

  it('the clusters line: each cluster name with its fingerprints, after the unready line', () => {
    const clusters = clustersLine({ 'prod-eu': ['ca:0123456789ab', 'ca:ba9876543210'] });
    const value = memberValue(set, ['k:a'], 3, clusters);
    expect(value).toBe(`${set}\nunready ["k:a"]\nclusters {"prod-eu":["ca:0123456789ab","ca:ba9876543210"]}`);
    expect(parseMemberValue(value)).toEqual({
      targetSet: set,
      unready: ['k:a'],
      clusters: { 'prod-eu': ['ca:0123456789ab', 'ca:ba9876543210'] },
    });
    expect(parseMemberValue(`${set}\nclusters {"x":[1,"ca:aa"],"y":"no"}`).clusters).toEqual({
      x: ['ca:aa'],
    });
    expect(parseMemberValue(`${set}\nclusters not json`).clusters).toEqual({});
  });

  it('a value of another shape is a target set with every target ready', () => {
    expect(parseMemberValue('replica-7')).toEqual({ targetSet: 'replica-7', unready: [], clusters: {} });
    expect(parseMemberValue(`${set}\nsomething else`)).toEqual({ targetSet: set, unready: [], clusters: {} });
  });
});
