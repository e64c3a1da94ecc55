/**
 * The nemesis's seeded PRNG and schedule generator (test/nemesis/prng.ts, schedule.ts): the same seed
 * gives the same schedule, every kind of fault appears in a CI-size run, and the generator's limits hold.
 */
import { describe, expect, it } from 'vitest';
import { createPrng, seedFromEnv } from '../nemesis/prng.ts';
import {
  describeEvent,
  FAULT_KINDS,
  faultKindsFor,
  generateSchedule,
  type NemesisEvent,
  parseExclude,
  parseLeadership,
  parseRedisMode,
  type RedisMode,
  type ScheduleOptions,
} from '../nemesis/schedule.ts';

const base: ScheduleOptions = {
  seed: 1,
  durationMs: 75_000,
  replicas: 3,
  fakedReplica: 2,
  namespaces: ['nem-a', 'nem-b', 'nem-c'],
};
const SEEDS = [0, 1, 2, 42, 1234, 99_999, 2 ** 32 - 1];

/** Intervals a resource is busy in, from a schedule: [start, end] of each fault on it. */
function busy(events: NemesisEvent[], match: (e: NemesisEvent) => boolean): [number, number][] {
  return events.filter(match).map((e) => [e.atMs, e.atMs + e.durationMs]);
}
const overlaps = (spans: [number, number][]) =>
  spans.some(([a0, a1], i) => spans.some(([b0, b1], j) => i !== j && a0 < b1 && b0 < a1));
const isProcess = (e: NemesisEvent) =>
  e.kind === 'replica-kill' || e.kind === 'replica-stop' || e.kind === 'replica-term';

describe('createPrng', () => {
  it('same seed → same sequence; another seed or label → another one; values in range', () => {
    const a = createPrng(7);
    const b = createPrng(7);
    const xs = Array.from({ length: 50 }, () => a.next());
    expect(Array.from({ length: 50 }, () => b.next())).toEqual(xs);
    expect(createPrng(8).next()).not.toBe(xs[0]);
    expect(createPrng(7).fork('x').next()).not.toBe(createPrng(7).fork('y').next());
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    const r = createPrng(3);
    const ints = Array.from({ length: 500 }, () => r.int(2, 5));
    expect(new Set(ints)).toEqual(new Set([2, 3, 4, 5]));
  });

  it.each([
    ['unset → a random seed', undefined, 'number'],
    ['empty → a random seed', '', 'number'],
    ['"1234" → 1234', '1234', 1234],
    ['" 7 " → 7 (trimmed)', ' 7 ', 7],
    ['"4294967295" (2³²−1) → itself', '4294967295', 4_294_967_295],
  ] as const)('SEED %s', (_name, raw, want) => {
    const seed = seedFromEnv({ SEED: raw });
    if (want === 'number') expect(Number.isInteger(seed) && seed >= 0).toBe(true);
    else expect(seed).toBe(want);
  });

  it.each([['-1'], ['1.5'], ['abc'], ['4294967296'], ['0x10']])('SEED %j is refused, naming SEED', (raw) => {
    expect(() => seedFromEnv({ SEED: raw })).toThrow(/^SEED: ".*" is not an integer from 0 to 4294967295/);
  });
});

describe('generateSchedule', () => {
  it('is deterministic: the same options give the same schedule, another seed another one', () => {
    expect(generateSchedule(base)).toEqual(generateSchedule(base));
    expect(generateSchedule({ ...base, seed: 2 })).not.toEqual(generateSchedule(base));
  });

  it.each(SEEDS)('seed %i, CI size: every kind of fault of single mode at least once', (seed) => {
    const kinds = new Set(generateSchedule({ ...base, seed }).map((e) => e.kind));
    expect([...kinds].sort()).toEqual(faultKindsFor('single').sort());
  });

  it.each(SEEDS)(
    'seed %i, on ZooKeeper: ZooKeeper’s store faults instead of etcd’s, and the finale kills ZooKeeper past the session timeout',
    (seed) => {
      const events = generateSchedule({ ...base, seed, leadership: 'zookeeper' });
      const kinds = new Set(events.map((e) => e.kind));
      for (const k of kinds) expect(faultKindsFor('single', 'zookeeper')).toContain(k);
      expect(kinds).toContain('zookeeper-drop-answers');
      expect(kinds).toContain('zookeeper-follower-cut');
      // One store fault at a time: a cut never overlaps a kill, and ends before the finale.
      const store = events.filter((e) => e.kind === 'zookeeper-kill' || e.kind === 'zookeeper-follower-cut');
      for (const [i, e] of store.entries()) {
        const next = store[i + 1];
        if (next) expect(next.atMs).toBeGreaterThanOrEqual(e.atMs + e.durationMs);
      }
      expect(kinds).not.toContain('etcd-kill');
      expect(kinds).not.toContain('etcd-drop-answers');
      const finale = events.findLast((e) => e.kind === 'zookeeper-kill');
      expect(finale?.durationMs).toBeGreaterThanOrEqual(4500);
      expect((finale?.atMs ?? 0) + (finale?.durationMs ?? 0)).toBeLessThanOrEqual(base.durationMs - 1500);
      expect(finale?.atMs).toBeGreaterThanOrEqual(base.durationMs - 1500 - 5500);
    },
  );

  it('NEMESIS_LEADERSHIP: unset is etcd; an unknown backend is refused, naming the variable', () => {
    expect(parseLeadership(undefined)).toBe('etcd');
    expect(parseLeadership(' zookeeper ')).toBe('zookeeper');
    expect(() => parseLeadership('consul')).toThrow(
      /^NEMESIS_LEADERSHIP: "consul" is not a leadership backend/,
    );
  });

  it.each(SEEDS)('seed %i: faults start after the warm-up and end within the run, in start order', (seed) => {
    const events = generateSchedule({ ...base, seed });
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i));
    for (const e of events) {
      expect(e.atMs).toBeGreaterThanOrEqual(3000);
      expect(e.atMs + e.durationMs).toBeLessThanOrEqual(base.durationMs);
    }
    expect(events.map((e) => e.atMs)).toEqual([...events.map((e) => e.atMs)].sort((a, b) => a - b));
  });

  it.each(SEEDS)(
    'seed %i: one fault at a time per resource; one replica always outside process faults',
    (seed) => {
      const events = generateSchedule({ ...base, seed });
      for (let r = 0; r < base.replicas; r++)
        expect(overlaps(busy(events, (e) => isProcess(e) && 'replica' in e && e.replica === r))).toBe(false);
      expect(overlaps(busy(events, (e) => e.kind === 'clock-step'))).toBe(false);
      expect(overlaps(busy(events, (e) => e.kind === 'retention-change'))).toBe(false);
      expect(overlaps(busy(events, (e) => e.kind === 'etcd-kill'))).toBe(false);
      expect(overlaps(busy(events, (e) => e.kind === 'redis-pause' || e.kind === 'redis-restart'))).toBe(
        false,
      );
      const processSpans = busy(events, isProcess);
      for (const [start] of processSpans) {
        const down = processSpans.filter(([s, end]) => s <= start && start < end).length;
        expect(down).toBeLessThanOrEqual(base.replicas - 1);
      }
      const apiSpans = busy(events, (e) => e.kind.startsWith('api-'));
      for (const [start] of apiSpans)
        expect(apiSpans.filter(([s, end]) => s <= start && start < end).length).toBeLessThanOrEqual(2);
    },
  );

  it.each(SEEDS)(
    'seed %i: a retention change restarts one replica with 6–12 s or 1–2 s for 10–20 s',
    (seed) => {
      const changes = generateSchedule({ ...base, seed }).filter((e) => e.kind === 'retention-change');
      expect(changes.length).toBeGreaterThanOrEqual(1);
      for (const e of changes) {
        if (e.kind !== 'retention-change') continue;
        expect(e.replica).toBeGreaterThanOrEqual(0);
        expect(e.replica).toBeLessThan(base.replicas);
        expect(
          e.retentionMs >= 6000 ? e.retentionMs <= 12_000 : e.retentionMs >= 1000 && e.retentionMs <= 2000,
        ).toBe(true);
        expect(e.durationMs).toBeGreaterThanOrEqual(10_000);
        expect(e.durationMs).toBeLessThanOrEqual(20_000);
      }
    },
  );

  it.each(SEEDS)(
    'seed %i: the retention changes are drawn apart: every other fault is where the seed had it without them',
    (seed) => {
      const strip = (events: NemesisEvent[]) =>
        events.filter((e) => e.kind !== 'retention-change').map(({ id: _id, ...e }) => e);
      expect(strip(generateSchedule({ ...base, seed }))).toEqual(
        strip(generateSchedule({ ...base, seed, exclude: ['retention-change'] })),
      );
      expect(
        generateSchedule({ ...base, seed, durationMs: 30 * 60_000 }).filter(
          (e) => e.kind === 'retention-change',
        ).length,
      ).toBe(15);
    },
  );

  it.each(SEEDS)('seed %i: clock steps are on the faked replica, by 2 to 20 s either way', (seed) => {
    for (const e of generateSchedule({ ...base, seed })) {
      if (e.kind !== 'clock-step') continue;
      expect(e.replica).toBe(base.fakedReplica);
      expect(Math.abs(e.offsetSeconds)).toBeGreaterThanOrEqual(2);
      expect(Math.abs(e.offsetSeconds)).toBeLessThanOrEqual(20);
    }
  });

  it('most windows of lost etcd answers have a replica restarting (campaigning) inside them', () => {
    // A window can lack one only when every replica is busy with another fault at its start.
    const drops = SEEDS.flatMap((seed) => {
      const events = generateSchedule({ ...base, seed });
      return events
        .filter((e) => e.kind === 'etcd-drop-answers')
        .map((drop) =>
          events.some((e) => e.kind === 'replica-term' && e.atMs > drop.atMs && e.atMs <= drop.atMs + 1300),
        );
    });
    expect(drops.length).toBeGreaterThanOrEqual(SEEDS.length);
    expect(drops.filter(Boolean).length / drops.length).toBeGreaterThanOrEqual(0.6);
  });

  it.each([['clock-step'], ['replica-term'], ['etcd-drop-answers', 'api-slow']] as const)(
    'NEMESIS_EXCLUDE %j: those kinds never appear, every other one does',
    (...exclude) => {
      for (const seed of SEEDS) {
        const kinds = new Set(generateSchedule({ ...base, seed, exclude }).map((e) => e.kind));
        expect([...kinds].sort()).toEqual(
          faultKindsFor('single')
            .filter((k) => !exclude.includes(k as never))
            .sort(),
        );
      }
    },
  );

  it.each([
    ['unset → none', undefined, []],
    ['"clock-step" → one kind', 'clock-step', ['clock-step']],
    ['" clock-step , api-slow " → two, trimmed', ' clock-step , api-slow ', ['clock-step', 'api-slow']],
  ] as const)('parseExclude: %s', (_name, raw, want) => {
    expect(parseExclude(raw)).toEqual(want);
  });

  it.each(SEEDS)(
    'seed %i, CI size: a leader frozen past the job lock, a DELETE outage longer than overdueGrace, a clock 10–20 s ahead, and etcd killed past the TTL last',
    (seed) => {
      const events = generateSchedule({ ...base, seed });
      // Breaking the fence (a woken leader DELETEs again), the overdue gauge (never overdue otherwise) and the
      // worker's restart on re-election (every target re-elected at the end) must each fail some invariant.
      expect(
        events.some((e) => e.kind === 'replica-stop' && e.leaderOf !== undefined && e.durationMs >= 15_500),
      ).toBe(true);
      expect(events.some((e) => e.kind === 'delete-outage' && e.durationMs >= 36_000 + 14_000)).toBe(true);
      expect(
        events.some(
          (e) =>
            e.kind === 'clock-step' &&
            e.offsetSeconds >= 10 &&
            e.durationMs >= 8000 &&
            e.onceLeading?.length === base.namespaces.length,
        ),
      ).toBe(true);
      const finale = events.findLast((e) => e.kind === 'etcd-kill');
      expect(finale?.durationMs).toBeGreaterThanOrEqual(4500);
      expect(Math.max(...events.map((e) => e.atMs))).toBe(finale?.atMs);
    },
  );

  it.each(SEEDS)(
    "seed %i, CI size: one replica's path to Redis cut for good early enough to be taken over before the run is judged, its slot never planned for a process fault; healed cuts on other slots",
    (seed) => {
      const events = generateSchedule({ ...base, seed });
      const cuts = events.filter((e) => e.kind === 'redis-path-cut');
      const forGood = cuts.filter((e) => e.forGood);
      expect(forGood).toHaveLength(1);
      const [cut] = forGood;
      if (!cut) return;
      // overdueGrace 36 s + a self-check period and the queue look (10 s) + a TTL and the backlog: well inside
      // the last deadline + the settle time (35 s).
      expect(cut.atMs).toBeGreaterThanOrEqual(3000);
      expect(cut.atMs).toBeLessThanOrEqual(base.durationMs - 60_000);
      expect(cut.atMs + cut.durationMs).toBe(base.durationMs);
      expect(
        events.filter(
          (e) => isProcess(e) && 'replica' in e && e.replica === cut.replica && e.atMs >= cut.atMs,
        ),
      ).toEqual([]);
      const healed = cuts.filter((e) => !e.forGood);
      expect(healed.length).toBeGreaterThanOrEqual(1);
      for (const e of healed) {
        expect(e.replica).not.toBe(cut.replica);
        expect(e.durationMs).toBeGreaterThanOrEqual(3000);
        expect(e.durationMs).toBeLessThanOrEqual(20_000);
      }
      expect(overlaps(busy(events, (e) => e.kind === 'redis-path-cut' && !e.forGood))).toBe(false);
    },
  );

  it('a run shorter than 63 s has no cut for good (it could not be taken over in time)', () => {
    for (const seed of SEEDS) {
      const cuts = generateSchedule({ ...base, seed, durationMs: 50_000 }).filter(
        (e) => e.kind === 'redis-path-cut',
      );
      expect(cuts.filter((e) => e.forGood)).toEqual([]);
    }
  });

  it('a random (not mandatory) DELETE outage is rare: a soak is not blinded most of the time', () => {
    const events = generateSchedule({ ...base, durationMs: 30 * 60_000 });
    const outageMs = events.filter((e) => e.kind === 'delete-outage').reduce((n, e) => n + e.durationMs, 0);
    expect(outageMs / (30 * 60_000)).toBeLessThan(0.35);
  });

  it('parseExclude refuses an unknown kind, naming NEMESIS_EXCLUDE and the known kinds', () => {
    expect(() => parseExclude('clock')).toThrow(
      /^NEMESIS_EXCLUDE: "clock" is not a fault kind; expected some of replica-kill, .*delete-outage, retention-change$/,
    );
  });

  it('a longer run has more faults, at about one start per mean gap', () => {
    const short = generateSchedule(base).length;
    const long = generateSchedule({ ...base, durationMs: 30 * 60_000 }).length;
    expect(long).toBeGreaterThan(short * 10);
    expect(long).toBeLessThan((30 * 60_000) / 1000);
  });

  it.each([
    [
      'SIGKILL',
      { id: 3, atMs: 12_345, durationMs: 2000, kind: 'replica-kill', replica: 1 },
      '+ 12.3 s  #3 replica-kill      SIGKILL r1, restarted after 2.0 s',
    ],
    [
      'clock step back',
      { id: 0, atMs: 3000, durationMs: 5000, kind: 'clock-step', replica: 2, offsetSeconds: -7 },
      "+  3.0 s  #0 clock-step        r2's wall clock -7 s for 5.0 s",
    ],
    [
      '429 in one namespace',
      {
        id: 9,
        atMs: 40_000,
        durationMs: 1500,
        kind: 'api-status',
        status: 429,
        verb: 'delete',
        namespace: 'nem-b',
        retryAfterSeconds: 2,
      },
      '+ 40.0 s  #9 api-status        API 429 on delete in nem-b (Retry-After 2) for 1.5 s',
    ],
    [
      "a leader's own path to Redis wedged",
      {
        id: 5,
        atMs: 20_000,
        durationMs: 8000,
        kind: 'redis-path-cut',
        replica: 0,
        leaderOf: 'nem-a',
        how: 'wedge',
      },
      "+ 20.0 s  #5 redis-path-cut    the leader of nem-a (else r0)'s own path to Redis wedged (connections hang) for 8.0 s",
    ],
    [
      "a replica's path to Redis refused for good",
      {
        id: 1,
        atMs: 7000,
        durationMs: 68_000,
        kind: 'redis-path-cut',
        replica: 2,
        how: 'refuse',
        forGood: true,
      },
      "+  7.0 s  #1 redis-path-cut    r2's own path to Redis refused until the run is judged",
    ],
    [
      'a ZooKeeper follower cut off',
      {
        id: 5,
        atMs: 20_000,
        durationMs: 13_000,
        kind: 'zookeeper-follower-cut',
        follower: 1,
        namespace: 'nem-c',
      },
      '+ 20.0 s  #5 zookeeper-follower-cut ZooKeeper follower #1 cut off from its peers for 13.0 s, the leader of nem-c moved onto it first',
    ],
  ] as [string, NemesisEvent, string][])('describeEvent: %s', (_name, e, line) => {
    expect(describeEvent(e)).toBe(line);
  });
});

describe('generateSchedule: Redis modes', () => {
  const HA = ['redis-sentinel-failover', 'redis-cluster-master-kill'];
  const MODES: [RedisMode, string[], string][] = [
    ['single', HA, ''],
    [
      'sentinel',
      ['redis-restart', 'redis-pause', 'redis-path-cut', 'redis-cluster-master-kill'],
      'redis-sentinel-failover',
    ],
    [
      'cluster',
      ['redis-restart', 'redis-pause', 'redis-path-cut', 'redis-sentinel-failover'],
      'redis-cluster-master-kill',
    ],
  ];

  it.each(MODES)('%s: the kinds drawn are every kind but %j (and, on etcd, ZooKeeper’s)', (mode, never) => {
    const zookeeper = ['zookeeper-kill', 'zookeeper-drop-answers', 'zookeeper-follower-cut'];
    expect(faultKindsFor(mode).sort()).toEqual(
      FAULT_KINDS.filter((k) => !never.includes(k) && !zookeeper.includes(k)).sort(),
    );
  });

  it.each(MODES)('%s: never draws %j, in CI-size runs or a 30 min soak', (mode, never) => {
    for (const seed of SEEDS)
      for (const durationMs of [75_000, 30 * 60_000]) {
        const kinds = new Set(
          generateSchedule({ ...base, seed, durationMs, redisMode: mode }).map((e) => e.kind),
        );
        expect([...kinds].filter((k) => never.includes(k))).toEqual([]);
      }
  });

  it.each(SEEDS)(
    'seed %i, CI size: every kind of each HA mode at least once, its failover included',
    (seed) => {
      for (const [mode, , failover] of MODES.slice(1)) {
        const kinds = new Set(generateSchedule({ ...base, seed, redisMode: mode }).map((e) => e.kind));
        expect([...kinds].sort()).toEqual(faultKindsFor(mode).sort());
        expect(kinds.has(failover as NemesisEvent['kind'])).toBe(true);
      }
    },
  );

  it('single mode is the default: the same schedules as without a mode (replays keep their seeds)', () => {
    for (const seed of SEEDS)
      expect(generateSchedule({ ...base, seed, redisMode: 'single' })).toEqual(
        generateSchedule({ ...base, seed }),
      );
  });

  it.each(SEEDS)(
    'seed %i: a failover has Redis to itself, 15 s past its end, and ends within the run; cluster kills name a target',
    (seed) => {
      for (const mode of ['sentinel', 'cluster'] as const) {
        const events = generateSchedule({ ...base, seed, durationMs: 10 * 60_000, redisMode: mode });
        const redis = events.filter((e) => e.kind.startsWith('redis-'));
        expect(redis.length).toBeGreaterThan(1);
        for (const [i, e] of redis.entries()) {
          expect(e.atMs + e.durationMs + 15_000).toBeLessThanOrEqual(10 * 60_000);
          const next = redis[i + 1];
          if (next) expect(next.atMs).toBeGreaterThanOrEqual(e.atMs + e.durationMs + 15_000);
          if (e.kind === 'redis-cluster-master-kill') expect(base.namespaces).toContain(e.namespace);
        }
      }
    },
  );

  it('parseRedisMode: unset or empty is single; a mode is itself; anything else is refused, naming NEMESIS_REDIS', () => {
    expect(parseRedisMode(undefined)).toBe('single');
    expect(parseRedisMode('')).toBe('single');
    expect(parseRedisMode(' cluster ')).toBe('cluster');
    expect(parseRedisMode('sentinel')).toBe('sentinel');
    expect(() => parseRedisMode('clustr')).toThrow(
      /^NEMESIS_REDIS: "clustr" is not a Redis mode; expected one of single, sentinel, cluster$/,
    );
  });

  it.each([
    [
      'Sentinel failover',
      { id: 4, atMs: 20_000, durationMs: 3000, kind: 'redis-sentinel-failover' },
      '+ 20.0 s  #4 redis-sentinel-failover SIGKILL the Sentinel master, back as a replica 3.0 s after the promotion',
    ],
    [
      'Cluster master kill',
      { id: 5, atMs: 21_000, durationMs: 2500, kind: 'redis-cluster-master-kill', namespace: 'nem-b' },
      "+ 21.0 s  #5 redis-cluster-master-kill SIGKILL the master of nem-b's queue slot, back as a replica 2.5 s after the failover",
    ],
    [
      "a leader's own path to Redis wedged",
      {
        id: 5,
        atMs: 20_000,
        durationMs: 8000,
        kind: 'redis-path-cut',
        replica: 0,
        leaderOf: 'nem-a',
        how: 'wedge',
      },
      "+ 20.0 s  #5 redis-path-cut    the leader of nem-a (else r0)'s own path to Redis wedged (connections hang) for 8.0 s",
    ],
    [
      "a replica's path to Redis refused for good",
      {
        id: 1,
        atMs: 7000,
        durationMs: 68_000,
        kind: 'redis-path-cut',
        replica: 2,
        how: 'refuse',
        forGood: true,
      },
      "+  7.0 s  #1 redis-path-cut    r2's own path to Redis refused until the run is judged",
    ],
  ] as [string, NemesisEvent, string][])('describeEvent: %s', (_name, e, line) => {
    expect(describeEvent(e)).toBe(line);
  });
});
