/**
 * The shared leadership machinery — the campaign loop (src/leadership/candidate-state.ts) and the balancer
 * (src/leadership/leadership-group.ts `createLeadershipGroup`) — driven with several replicas in one process
 * over an in-memory backend (test/helpers/fake-leadership-store.ts): one leader per election, resign and
 * stepDown hand over, fencing refuses a replica that no longer leads, the balance over replicas (at most
 * ⌈T / R⌉ each), a replica whose session expires, and readiness keeping a replica out of a target's line.
 *
 * Why: it is the shared code's safety net, fast and without servers (a change to the loop or the balancer
 * is caught here before the integration suites run), and it shows a new backend's authors, by example, what
 * a backend must provide (src/leadership/backend.ts). The real backends, etcd and ZooKeeper, are held to
 * test/integration/leadership-contract.test.ts, the same kind of cases against real servers; a new backend
 * must pass that suite too.
 *
 * Every case also checks, from the replicas' own term events, that no target ever has two leaders at once.
 * Real clock, no fixed sleeps: each step waits for its condition.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assignTargets } from '../../src/leadership/assignment.ts';
import type { BackendElection } from '../../src/leadership/backend.ts';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import { createLeadershipGroup, type LeadershipGroup } from '../../src/leadership/leadership-group.ts';
import {
  createFakeBackend,
  createFakeLeadershipStore,
  type FakeLeadershipStore,
} from '../helpers/fake-leadership-store.ts';
import { type MemoryLog, memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

/** A target with no candidate for this long is campaigned for by every replica (small: tests wait on it). */
const FALLBACK_MS = 200;

interface Replica {
  readonly id: string;
  readonly group: LeadershipGroup;
  readonly memory: MemoryLog;
  /** One election per target, in the order of the test's targets. */
  readonly elections: BackendElection[];
  /** Per target: the terms begun and ended, in order (`elected`, `lost: <reason>`). */
  readonly events: string[][];
}

const targetsOf = (n: number) => Array.from({ length: n }, (_, i) => `ctx/ns-${i}`);
const prefixOf = (target: string) => `elections/${target}/`;

/** The replicas of one test over one store, and the check that no target has two leaders at once. */
function fixture() {
  const store: FakeLeadershipStore = createFakeLeadershipStore();
  const replicas: Replica[] = [];
  /** Per target: how many replicas lead it now, as their own term events say. */
  const leadingNow = new Map<string, number>();
  /** Every moment a target had two leaders. */
  const doubles: string[] = [];

  function replica(
    id: string,
    targets: readonly string[],
    opts: { balanced?: boolean; ready?: (target: string) => boolean } = {},
  ): Replica {
    const memory = memoryLogger('info');
    const group = createLeadershipGroup({
      backend: (ctx) => createFakeBackend(store, id, ctx),
      replicaId: id,
      log: memory.log,
      monotonicNow: () => performance.now(),
      balanced: opts.balanced ?? true,
      fallbackMs: FALLBACK_MS,
    });
    const events: string[][] = [];
    const elections = targets.map((target) => {
      const e = group.election(target, prefixOf(target), memory.log);
      const mine: string[] = [];
      events.push(mine);
      const { ready } = opts;
      if (ready) e.readyWhen(() => ready(target));
      e.addEventHandler({
        onElected: () => {
          mine.push('elected');
          const n = (leadingNow.get(target) ?? 0) + 1;
          leadingNow.set(target, n);
          if (n > 1) doubles.push(`${target}: ${id} elected while another leads`);
        },
        onLost: (reason) => {
          mine.push(`lost: ${reason}`);
          leadingNow.set(target, (leadingNow.get(target) ?? 0) - 1);
        },
      });
      e.start();
      return e;
    });
    group.start();
    const r = { id, group, memory, elections, events };
    replicas.push(r);
    return r;
  }

  return { store, replicas, doubles, replica };
}

let current: ReturnType<typeof fixture> | undefined;
function setup() {
  current = fixture();
  return current;
}
afterEach(async () => {
  for (const r of current?.replicas ?? []) await r.group.close();
  current = undefined;
});

/** Waits for a condition: 2 s at most, looking every 5 ms. */
const until = <T>(what: string, check: () => T | Promise<T>) => waitFor(what, check, 2000, 5);

const leaderOf = (rs: readonly Replica[], i: number) => rs.filter((r) => r.elections[i]?.isLeader);
/** Every one of `t` targets led by exactly one of `rs` (as the replicas themselves say). */
const ledOnce = (rs: readonly Replica[], t: number) =>
  Array.from({ length: t }, (_, i) => leaderOf(rs, i).length).every((n) => n === 1);
const leading = (rs: readonly Replica[]) =>
  Object.fromEntries(rs.map((r) => [r.id, r.elections.filter((e) => e.isLeader).length]));
const fenceOf = (r: Replica, i: number) => r.elections[i]?.fence(new AbortController().signal);
/** The replicas whose `fence()` for target `i` resolves, all asked at once. */
async function fenceWinners(rs: readonly Replica[], i: number): Promise<string[]> {
  const ok = await Promise.all(
    rs.map((r) =>
      fenceOf(r, i)
        ?.then(() => r.id)
        .catch(() => undefined),
    ),
  );
  return ok.filter((x) => x !== undefined);
}

describe('the shared leadership code over an in-memory backend', () => {
  it.each([
    { balanced: false, inLine: 3 },
    { balanced: true, inLine: 1 },
  ])(
    'three replicas, one target (balanced: $balanced) → exactly one leader; resign → another elected, fence() refuses the first',
    async ({ balanced, inLine }) => {
      const { store, doubles, replica } = setup();
      const [target] = targetsOf(1) as [string];
      const rs = ['r1', 'r2', 'r3'].map((id) => replica(id, [target], { balanced }));
      const first = await until('a leader', () => rs.find((r) => r.elections[0]?.isLeader));
      // Unbalanced, every replica is in line; balanced, only the target's owner campaigns.
      await until(`${inLine} in line`, () => store.line(prefixOf(target)).length === inLine);
      expect(leaderOf(rs, 0)).toEqual([first]);
      expect(store.line(prefixOf(target))[0]?.replicaId).toBe(first.id);
      if (balanced) expect(first.group.balance().owners[target]).toBe(first.id);
      for (const r of rs) expect(await r.elections[0]?.currentLeader()).toBe(first.id);
      await fenceOf(first, 0);
      expect(first.elections[0]?.stillLeader()).toBe(true);

      await first.elections[0]?.resign();
      const second = await until('a new leader', () =>
        rs.find((r) => r !== first && r.elections[0]?.isLeader),
      );
      expect(first.events[0]).toEqual(['elected', 'lost: resigned']);
      expect(first.elections[0]?.stillLeader()).toBe(false);
      await expect(fenceOf(first, 0)).rejects.toThrow(FencedError);
      expect(leaderOf(rs, 0)).toEqual([second]);
      expect(await fenceWinners(rs, 0)).toEqual([second.id]);
      if (balanced) {
        // The owner resigned but is still a member: nobody else is assigned the target, so the others take it
        // as a fallback once it has had no candidate for FALLBACK_MS, and the ones not elected withdraw.
        expect(
          rs.some((r) =>
            r.memory.lines.some((l) => l.msg === 'no candidate for this target: campaigning as a fallback'),
          ),
        ).toBe(true);
        await until('only the new leader in line', () => store.line(prefixOf(target)).length === 1);
      }
      // Handed over on the resigned entry's deletion: every session lives on.
      expect(store.sessions()).toBe(3);
      expect(doubles).toEqual([]);
    },
  );

  it('stepDown: the next candidate is elected, the one that stepped down campaigns again behind it', async () => {
    const { store, doubles, replica } = setup();
    const targets = targetsOf(1);
    const prefix = prefixOf(targets[0] as string);
    const a = replica('a', targets, { balanced: false });
    await until('a leads', () => a.elections[0]?.isLeader);
    const b = replica('b', targets, { balanced: false });
    await until('b in line', () => store.line(prefix).length === 2);
    expect(b.elections[0]?.isLeader).toBe(false);

    a.elections[0]?.stepDown('stuck (test)');
    await until('b leads', () => b.elections[0]?.isLeader);
    expect(a.events[0]).toEqual(['elected', 'lost: stepped down: stuck (test)']);
    await until(
      'a in line again, behind b',
      () =>
        store
          .line(prefix)
          .map((c) => c.replicaId)
          .join() === 'b,a',
    );
    await expect(fenceOf(a, 0)).rejects.toThrow(FencedError);
    await fenceOf(b, 0);

    await b.elections[0]?.resign();
    await until('a leads again', () => a.elections[0]?.isLeader);
    expect(a.events[0]).toEqual(['elected', 'lost: stepped down: stuck (test)', 'elected']);
    expect(doubles).toEqual([]);
  });

  it('12 targets, 3 replicas balanced → every target led once, by its owner, none over ceil(12/3) = 4; close leaves nothing', async () => {
    const { store, doubles, replicas, replica } = setup();
    const T = 12;
    const targets = targetsOf(T);
    const rs = ['b1', 'b2', 'b3'].map((id) => replica(id, targets));
    await until('balanced', () => ledOnce(rs, T) && Object.values(leading(rs)).every((n) => n === 4));
    const balance = rs[0]?.group.balance();
    expect(balance?.cap).toBe(4);
    for (const r of rs) expect(r.group.balance()).toEqual(balance);
    expect(balance?.members).toEqual(['b1', 'b2', 'b3']);
    for (const [i, target] of targets.entries()) {
      const owner = balance?.owners[target];
      expect(leaderOf(rs, i).map((r) => r.id)).toEqual([owner]);
      // Only the owner campaigned: it is alone in line.
      expect(store.line(prefixOf(target)).map((c) => c.replicaId)).toEqual([owner]);
      expect(await fenceWinners(rs, i)).toEqual([owner]);
    }
    // Balanced from the first look: per replica one session; per target one create and one read of the line
    // (and the 12 fencing reads above).
    expect(store.ops).toBeLessThanOrEqual(3 + 2 * T + T);
    expect(store.sessions()).toBe(3);
    expect(doubles).toEqual([]);

    for (const r of replicas) await r.group.close();
    expect(rs.flatMap((r) => r.elections).some((e) => e.isLeader)).toBe(false);
    expect(store.sessions()).toBe(0);
    expect(store.members()).toEqual([]);
    expect(targets.flatMap((t) => store.line(prefixOf(t)))).toEqual([]);
    // A stop is a planned end of every term (info), not a loss (warn).
    for (const r of rs) expect(r.memory.lines.filter((l) => l.msg === 'leadership lost')).toEqual([]);
  });

  it('a replica whose session expires (nothing resigned) → the survivors take its targets, one leader each', async () => {
    const { store, doubles, replica } = setup();
    const T = 12;
    const targets = targetsOf(T);
    const rs = ['d1', 'd2', 'd3'].map((id) => replica(id, targets));
    const [victim, ...survivors] = rs as [Replica, ...Replica[]];
    await until('balanced', () => ledOnce(rs, T) && Object.values(leading(rs)).every((n) => n === 4));
    const victimLed = victim.elections.flatMap((e, i) => (e.isLeader ? [i] : []));
    expect(victimLed).toHaveLength(4);

    store.expire(victim.id);
    // Its terms end at once, as a loss; nothing of it is left in the store.
    expect(victim.elections.some((e) => e.isLeader)).toBe(false);
    for (const i of victimLed) expect(victim.events[i]).toEqual(['elected', 'lost: session expired']);
    expect(victim.group.backend.live).toBe(false);
    expect(store.members()).toEqual(['d2', 'd3']);

    await until(
      'the survivors lead all, 6 each',
      () => ledOnce(survivors, T) && Object.values(leading(survivors)).every((n) => n === 6),
    );
    for (const r of survivors) expect(r.group.balance().members).toEqual(['d2', 'd3']);
    for (const i of victimLed) {
      await expect(fenceOf(victim, i)).rejects.toThrow(FencedError);
      expect(await fenceWinners(rs, i)).toEqual(leaderOf(rs, i).map((r) => r.id));
    }
    expect(targets.flatMap((t) => store.line(prefixOf(t))).filter((c) => c.replicaId === victim.id)).toEqual(
      [],
    );
    expect(doubles).toEqual([]);
  });

  it('readyWhen(false) for a target → that replica is not elected for it while a ready one exists; ready again → it takes it over', async () => {
    const { store, doubles, replica } = setup();
    const T = 6;
    const targets = targetsOf(T);
    const ids = ['n1', 'n2', 'n3'];
    // A target n1 would own if it were ready: readiness alone keeps it away.
    const x = targets.findIndex((t) => assignTargets(targets, ids).owners.get(t) === 'n1');
    expect(x).toBeGreaterThanOrEqual(0);
    const target = targets[x] as string;
    const others = ids.slice(1).map((id) => replica(id, targets));
    await until('n2 and n3 lead all', () => ledOnce(others, T));

    let ready = false;
    const n1 = replica('n1', targets, { ready: (t) => t !== target || ready });
    const rs = [n1, ...others];
    /** Every target led once, by the owner n1's balance names. */
    const settled = () => {
      const { owners } = n1.group.balance();
      return targets.every(
        (t, i) =>
          leaderOf(rs, i)
            .map((r) => r.id)
            .join() === owners[t],
      );
    };
    await until('n1 has its share of the others', () => settled() && n1.elections.some((e) => e.isLeader));
    const balance = n1.group.balance();
    expect(balance.notReady).toEqual({ [target]: ['n1'] });
    expect(balance.owners[target]).not.toBe('n1');
    expect(n1.events[x]).toEqual([]);
    expect(store.line(prefixOf(target)).map((c) => c.replicaId)).not.toContain('n1');
    for (const r of others) expect(r.group.balance().notReady).toEqual({ [target]: ['n1'] });

    // Ready again: its membership value says so, the target is assigned to it, the leader hands it over.
    const before = leaderOf(rs, x)[0] as Replica;
    ready = true;
    await until('n1 leads the target', () => n1.elections[x]?.isLeader && settled());
    expect(n1.group.balance().notReady).toEqual({});
    expect(before.events[x]?.at(-1)).toBe('lost: stepped down: handing over to n1, its assigned replica');
    expect(await fenceWinners(rs, x)).toEqual(['n1']);
    expect(doubles).toEqual([]);
  });
});
