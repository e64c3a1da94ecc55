/**
 * The nemesis schedule: which fault starts when, on what, and for how long — a pure function of the seed
 * and the run's shape, so that a failing run is replayed exactly with `SEED=…`.
 *
 * Every kind of fault appears at least once when the run is long enough (the CI size is), in an order the
 * seed shuffles; then random ones fill the rest of the run, starting on average every `meanGapMs`, so that
 * faults follow one another and overlap. Two limits keep the run meaningful rather than merely dead: one
 * fault at a time per resource (a replica's process, its clock, the leadership store, Redis, the retention
 * setting), at least one replica outside a process fault when one starts, and at most two API faults at once.
 */
import { createPrng, type Prng } from './prng.ts';

/** Faults on a replica process: SIGKILL (restart after), SIGSTOP (SIGCONT after), SIGTERM (restart after). */
export type ProcessFaultKind = 'replica-kill' | 'replica-stop' | 'replica-term';

/** Every kind of fault the nemesis injects. */
export const FAULT_KINDS = [
  'replica-kill',
  'replica-stop',
  'replica-term',
  'clock-step',
  'etcd-kill',
  'etcd-drop-answers',
  'zookeeper-kill',
  'zookeeper-drop-answers',
  'zookeeper-follower-cut',
  'redis-restart',
  'redis-pause',
  'redis-path-cut',
  'redis-sentinel-failover',
  'redis-cluster-master-kill',
  'api-status',
  'api-reset',
  'api-slow',
  'api-drop-watches',
  'api-stall-watches',
  'delete-outage',
  'retention-change',
] as const;

/** One kind of fault. */
export type FaultKind = (typeof FAULT_KINDS)[number];

/** The Redis the replicas use: one server, a Sentinel setup, or a Cluster (`NEMESIS_REDIS`). */
export const REDIS_MODES = ['single', 'sentinel', 'cluster'] as const;
/** One Redis mode of the nemesis. */
export type RedisMode = (typeof REDIS_MODES)[number];

/**
 * The fault kinds that make no sense in each Redis mode, never drawn there: the HA kinds outside their
 * mode, and in Sentinel and Cluster modes the single server's restart on a fresh port, its freeze and one
 * replica's own path cut (the replicas find Redis through the sentinels or the cluster's nodes, which give them
 * the servers' own addresses: no relay of a replica's own stands between them).
 */
const NOT_IN_MODE: Record<RedisMode, readonly FaultKind[]> = {
  single: ['redis-sentinel-failover', 'redis-cluster-master-kill'],
  sentinel: ['redis-restart', 'redis-pause', 'redis-path-cut', 'redis-cluster-master-kill'],
  cluster: ['redis-restart', 'redis-pause', 'redis-path-cut', 'redis-sentinel-failover'],
};

/** The leadership backend the replicas use (`NEMESIS_LEADERSHIP`): etcd, or ZooKeeper. */
export const LEADERSHIPS = ['etcd', 'zookeeper'] as const;
/** One leadership backend of the nemesis. */
export type Leadership = (typeof LEADERSHIPS)[number];

/** The fault kinds of the other backend's store, never drawn with a backend. */
const NOT_WITH_LEADERSHIP: Record<Leadership, readonly FaultKind[]> = {
  etcd: ['zookeeper-kill', 'zookeeper-drop-answers', 'zookeeper-follower-cut'],
  zookeeper: ['etcd-kill', 'etcd-drop-answers'],
};

/** The fault kinds drawn in a Redis mode on a leadership backend, in {@link FAULT_KINDS} order. */
export function faultKindsFor(mode: RedisMode, leadership: Leadership = 'etcd'): FaultKind[] {
  return FAULT_KINDS.filter(
    (k) => !NOT_IN_MODE[mode].includes(k) && !NOT_WITH_LEADERSHIP[leadership].includes(k),
  );
}

/**
 * Parses `NEMESIS_LEADERSHIP` (unset or empty: `etcd`).
 * @throws TypeError naming NEMESIS_LEADERSHIP, the value and the known backends.
 */
export function parseLeadership(raw: string | undefined): Leadership {
  const value = (raw ?? '').trim() || 'etcd';
  if (!(LEADERSHIPS as readonly string[]).includes(value))
    throw new TypeError(
      `NEMESIS_LEADERSHIP: "${raw}" is not a leadership backend; expected one of ${LEADERSHIPS.join(', ')}`,
    );
  return value as Leadership;
}

/**
 * Parses `NEMESIS_CLUSTERS` (unset or empty: 1).
 * @throws TypeError naming NEMESIS_CLUSTERS and the value when it is neither 1 nor 2.
 */
export function parseClusters(raw: string | undefined): 1 | 2 {
  const value = (raw ?? '').trim() || '1';
  if (value !== '1' && value !== '2')
    throw new TypeError(`NEMESIS_CLUSTERS: "${raw}" is not a number of clusters; expected 1 or 2`);
  return Number(value) as 1 | 2;
}

/**
 * Parses `NEMESIS_REDIS` (unset or empty: `single`).
 * @throws TypeError naming NEMESIS_REDIS, the value and the known modes.
 */
export function parseRedisMode(raw: string | undefined): RedisMode {
  const mode = (raw ?? '').trim() || 'single';
  if (!(REDIS_MODES as readonly string[]).includes(mode))
    throw new TypeError(
      `NEMESIS_REDIS: "${raw}" is not a Redis mode; expected one of ${REDIS_MODES.join(', ')}`,
    );
  return mode as RedisMode;
}

/** API verbs a sandbox fault can match (`*`: all). */
export type FaultVerb = 'delete' | 'get' | 'list' | 'watch' | '*';

interface Base {
  /** Position in the schedule (0-based, in start order). */
  id: number;
  /** Start, ms after the schedule's start. */
  atMs: number;
  /** How long the fault lasts (the outage, the freeze, the gap before a restart), ms; 0 for instant ones. */
  durationMs: number;
}

/** One scheduled fault. Times in ms; `replica` is a slot index (r0, r1, …). */
export type NemesisEvent = Base &
  (
    | {
        kind: ProcessFaultKind;
        /** The slot to hit; with `leaderOf`, the one hit when that leader cannot be (busy, or unknown). */
        replica: number;
        /** Hit the leader of this namespace at that moment instead (when it is in no other process fault). */
        leaderOf?: string;
      }
    | {
        kind: 'clock-step';
        replica: number;
        offsetSeconds: number;
        /**
         * Wait (at most `durationMs`) until the replica leads one of these namespaces, then step: a replica
         * whose clock is ahead can only delete early while it leads.
         */
        onceLeading?: readonly string[];
      }
    | { kind: 'etcd-kill' }
    | { kind: 'etcd-drop-answers'; path: string; count: number; mode: 'reset' | 'cut'; holdMs: number }
    | { kind: 'zookeeper-kill' }
    | {
        /**
         * The ZooKeeper relays pass `count` creates (a campaign) to a server, then hold each connection silent
         * until `holdMs` after the server answered and cut it: the node exists, its creator never heard so.
         */
        kind: 'zookeeper-drop-answers';
        count: number;
        holdMs: number;
      }
    | {
        /**
         * A follower is cut off from its peers (its quorum and election links silent) while its clients still
         * reach it; healed after `durationMs`. First the namespace's leader is moved onto it and the other
         * replicas off it. It answers reads from what it has until it gives up on its leader (10 s), while the
         * quorum expires the sessions on it (3 s) and elects others.
         */
        kind: 'zookeeper-follower-cut';
        /** Which follower (by index among the serving ones, modulo their number). */
        follower: number;
        /** The namespace whose leader is moved onto that follower first. */
        namespace: string;
      }
    | { kind: 'redis-restart' }
    | { kind: 'redis-pause' }
    | {
        /**
         * One replica's own path to Redis (its relay) wedged — connections accepted, nothing answered — or
         * refused, while the others' work; healed after the duration, or, `forGood`, never in the run (the
         * replica stays cut off until the run is judged: a target it led must be taken by another replica).
         */
        kind: 'redis-path-cut';
        /** The slot to cut; with `leaderOf`, the one cut when that leader cannot be (unknown, or cut already). */
        replica: number;
        leaderOf?: string;
        how: 'wedge' | 'refuse';
        forGood?: true;
      }
    | {
        /** SIGKILL the Sentinel setup's master; once a new one is promoted, wait `durationMs`, then start it again as a replica. */
        kind: 'redis-sentinel-failover';
      }
    | {
        /** SIGKILL the master of the namespace's queue slot; once its replica took over, wait `durationMs`, then restart it (a replica). */
        kind: 'redis-cluster-master-kill';
        namespace: string;
      }
    | {
        kind: 'api-status';
        status: 403 | 429 | 500 | 503;
        verb: FaultVerb;
        namespace?: string;
        retryAfterSeconds?: number;
      }
    | { kind: 'api-reset'; verb: FaultVerb; namespace?: string }
    | { kind: 'api-slow'; verb: FaultVerb; latencyMs: number; namespace?: string }
    | { kind: 'api-drop-watches'; compact: boolean; namespace?: string }
    | {
        /**
         * The namespace's watches stall (open, silent, then everything at once) while a person deletes
         * finished drivers due during the stall: only the handler's re-check can see those deletions.
         */
        kind: 'api-stall-watches';
        namespace: string;
      }
    | { kind: 'delete-outage'; namespace: string }
    | {
        /**
         * The replica is restarted (SIGTERM) with another retention, runs with it for the duration, then is
         * restarted with the fleet's: two replicas of one fleet disagree on the retention, as in a rolling
         * update that changes it. Every DELETE is judged by the retention of the process that sent it.
         */
        kind: 'retention-change';
        replica: number;
        /** The changed replica's retention, ms (the fleet's is 3 s): longer (6–12 s) or shorter (1–2 s). */
        retentionMs: number;
      }
  );

/** The shape of the run the schedule is for. */
export interface ScheduleOptions {
  seed: number;
  /** Every fault starts and ends within [0, durationMs], ms. */
  durationMs: number;
  /** Number of replica slots (≥ 2). */
  replicas: number;
  /** The slot whose wall clock libfaketime can step. */
  fakedReplica: number;
  /** The targets' namespaces (API faults may be limited to one). */
  namespaces: readonly string[];
  /** Mean time between two fault starts, ms (default 3000). */
  meanGapMs?: number;
  /** Kinds never to inject (to tell whether one of them causes a failure); default none. */
  exclude?: readonly FaultKind[];
  /** The Redis the replicas use: only the kinds that make sense there are drawn (default `single`). */
  redisMode?: RedisMode;
  /** The leadership backend: only its store's kinds are drawn (default `etcd`). */
  leadership?: Leadership;
}

/** The gRPC path of etcd's transaction (the campaign's put-if-absent). */
export const ETCD_TXN_PATH = '^/etcdserverpb\\.KV/Txn$';
/** etcd's unary calls the product makes (campaign, fencing read, lease grant and revoke). */
export const ETCD_UNARY_PATH = '^/etcdserverpb\\.(KV/(Txn|Range)|Lease/(LeaseGrant|LeaseRevoke))$';

/** Nothing starts in the first seconds: the replicas are electing and pods are starting to flow. */
const WARMUP_MS = 3000;
/** A restarted replica is left alone this long before another process fault may hit it, ms. */
const BOOT_MS = 2000;
const MAX_API_FAULTS = 2;

/** [min, max] duration of each kind, ms (a freeze: see FREEZES). */
/**
 * A freeze is drawn from one of three ranges, equally likely: shorter than the lease TTL (3 s); longer than
 * it, shorter than BullMQ's job lock (10 s); longer than the lock and the stall check (10 s + 5 s) — only
 * then does another leader re-run the frozen one's jobs, so only then can a woken leader that skipped its
 * fence DELETE a second time.
 */
const FREEZES: readonly [number, number][] = [
  [1000, 2500],
  [3500, 9000],
  [15_500, 20_000],
];

const DURATION: Record<FaultKind, [number, number]> = {
  'replica-kill': [500, 6000],
  'replica-stop': [1000, 20_000],
  'replica-term': [0, 3000],
  'clock-step': [3000, 12_000],
  'etcd-kill': [1500, 8000],
  'etcd-drop-answers': [8000, 12_000],
  'zookeeper-kill': [1500, 8000],
  'zookeeper-drop-answers': [8000, 12_000],
  // Past the follower's own give-up (10 s), so that the sessions on it move to the quorum's side.
  'zookeeper-follower-cut': [12_000, 16_000],
  'redis-restart': [0, 0],
  'redis-pause': [1000, 6000],
  // Healed within the grace (36 s): the replica's connections must recover; the cut for good is apart.
  'redis-path-cut': [3000, 20_000],
  // From the new master's promotion to the old one's return as a replica.
  'redis-sentinel-failover': [2000, 8000],
  'redis-cluster-master-kill': [2000, 8000],
  'api-status': [1500, 6000],
  'api-reset': [1000, 4000],
  'api-slow': [2000, 6000],
  'api-drop-watches': [1000, 4000],
  // Past the deadline of the pods a person deletes as it starts (finished then: due after the 3 s retention).
  'api-stall-watches': [6000, 9000],
  // Longer than the product's overdueGrace (36 s) by 14–18 s: pods are in fact overdue for that long.
  'delete-outage': [50_000, 54_000],
  // Long enough for the restarted replica to list, lead its share and delete with its own retention.
  'retention-change': [10_000, 20_000],
};

/**
 * The finale: the leadership store (etcd, or ZooKeeper) killed for longer than the lease TTL or session timeout
 * (3 s) at the very end, after every other fault, so that every target's leadership is lost and won again
 * by replica processes that keep running — most of them
 * leading a target again in the same process, whose new term must start its worker again. Only in runs
 * long enough for the other faults first (the CI size is).
 */
const FINALE: [number, number] = [4500, 5500];
/** The finale ends this long before the run does, ms. */
const FINALE_MARGIN_MS = 1500;
/**
 * A Redis failover keeps Redis busy past its planned length: the failure detection (2 s), the promotion, and
 * the old master's resync as a replica. Another Redis fault waits this long after it, ms.
 */
const FAILOVER_SETTLE_MS = 15_000;
/** A random (not mandatory) `delete-outage` is placed only with this chance: one is long, and blinds a target. */
const OUTAGE_CHANCE = 0.1;
/**
 * The cut for good starts within this window before the run's last 60 s, ms. Its replica's targets wait
 * `overdueGrace` (36 s) + a self-check period (5 s) + the queue look (5 s) for the step-down, then a TTL for the
 * next leader: all that must end before the run is judged (the last deadline + the settle time, 35 s).
 */
const CUT_FOR_GOOD_WITHIN_MS = 10_000;

/** An event before it gets its id (`Omit` spread over the union's members). */
type Draft = NemesisEvent extends infer E ? (E extends unknown ? Omit<E, 'id'> : never) : never;

/** Generates the schedule: deterministic in `opts` (same options → same events). */
export function generateSchedule(opts: ScheduleOptions): NemesisEvent[] {
  const rng = createPrng(opts.seed).fork('schedule');
  const meanGapMs = opts.meanGapMs ?? 3000;
  const busyUntil = new Map<string, number>();
  /** When the finale (the store killed past the TTL) starts; undefined: no finale (a short run). */
  let finaleAt: number | undefined;
  /** The slot whose path to Redis is cut for good; undefined: none (a short run, or another Redis mode). */
  let cutForGood: number | undefined;
  const apiEnds: number[] = [];
  /** [start, end) of the mandatory Redis failover, its settling included: no other may overlap it. */
  const failoverSpans: [number, number][] = [];
  const drafts: Draft[] = [];
  const free = (resource: string, t: number) => (busyUntil.get(resource) ?? -1) <= t;
  const replicasInFaults = (t: number) => {
    let n = 0;
    for (let r = 0; r < opts.replicas; r++) if (!free(`r${r}`, t)) n++;
    return n;
  };

  /** The fault of `kind` at `t` (and a companion), or undefined when it does not fit there. */
  const place = (kind: FaultKind, t: number, mandatory: boolean): Draft[] | undefined => {
    if (kind === 'delete-outage' && !mandatory && !rng.chance(OUTAGE_CHANCE)) return undefined;
    // The mandatory freeze is the long one, of a leader: only then does another leader re-run the frozen
    // one's jobs, so only then would a woken leader that skipped its fence DELETE a second time.
    const longFreeze = kind === 'replica-stop' && mandatory;
    const [lo, hi] =
      kind === 'replica-stop'
        ? longFreeze
          ? (FREEZES[2] ?? [15_500, 20_000])
          : rng.pick(FREEZES)
        : DURATION[kind];
    const durationMs = Math.min(Math.round(rng.between(lo, hi + 1)), opts.durationMs - t);
    if (durationMs < lo) return undefined;
    const ns = () => (rng.chance(0.5) ? rng.pick(opts.namespaces) : undefined);
    switch (kind) {
      case 'replica-kill':
      case 'replica-stop':
      case 'replica-term': {
        const r = pickReplica(t, durationMs);
        // Most process faults aim at a target's leader: a leader frozen or killed with DELETEs in flight is
        // what fencing, stall recovery and handover are for.
        return r
          ? [
              {
                ...r,
                kind,
                leaderOf: longFreeze || rng.chance(0.6) ? rng.pick(opts.namespaces) : undefined,
              },
            ]
          : undefined;
      }
      case 'clock-step': {
        if (!free('clock', t)) return undefined;
        const drawn = (rng.chance(0.5) ? 1 : -1) * rng.int(2, 20);
        // The mandatory step is forward by 10–20 s for at least 8 s: a replica whose clock is ahead must not
        // delete early, and pods finish all the time, so some fall due within its error. (Same draws as a
        // random step: the rest of the schedule does not move.)
        const offsetSeconds = mandatory ? Math.max(10, Math.abs(drawn)) : drawn;
        const stepMs = mandatory ? Math.max(8000, durationMs) : durationMs;
        // The mandatory step may wait up to its own length for the replica to lead.
        const spanMs = mandatory ? 2 * stepMs : stepMs;
        if (t + spanMs > opts.durationMs) return undefined;
        busyUntil.set('clock', t + spanMs);
        const step = {
          kind,
          atMs: t,
          durationMs: stepMs,
          replica: opts.fakedReplica,
          offsetSeconds,
        } as const;
        return [mandatory ? { ...step, onceLeading: opts.namespaces } : step];
      }
      case 'etcd-kill':
      case 'zookeeper-kill':
      case 'zookeeper-follower-cut':
      case 'redis-restart':
      case 'redis-pause': {
        const storeFault =
          kind === 'etcd-kill' || kind === 'zookeeper-kill' || kind === 'zookeeper-follower-cut';
        const resource = storeFault ? 'store' : 'redis';
        if (!free(resource, t)) return undefined;
        if (storeFault && finaleAt !== undefined && t + durationMs + 1000 > finaleAt) return undefined;
        // A restart takes a moment too: the next fault on the same server waits at least a second.
        busyUntil.set(resource, t + Math.max(durationMs, 1000));
        if (kind === 'zookeeper-follower-cut')
          return [
            { kind, atMs: t, durationMs, follower: rng.int(0, 1), namespace: rng.pick(opts.namespaces) },
          ];
        return [{ kind, atMs: t, durationMs }];
      }
      case 'redis-sentinel-failover':
      case 'redis-cluster-master-kill': {
        const end = t + durationMs + FAILOVER_SETTLE_MS;
        if (!free('redis', t) || end > opts.durationMs || failoverSpans.some(([a, b]) => t < b && a < end))
          return undefined;
        busyUntil.set('redis', end);
        return kind === 'redis-sentinel-failover'
          ? [{ kind, atMs: t, durationMs }]
          : [{ kind, atMs: t, durationMs, namespace: rng.pick(opts.namespaces) }];
      }
      case 'etcd-drop-answers':
      case 'zookeeper-drop-answers': {
        if (!free('store-net', t)) return undefined;
        busyUntil.set('store-net', t + durationMs);
        const drop: Draft =
          kind === 'etcd-drop-answers'
            ? {
                kind,
                atMs: t,
                durationMs,
                path: rng.chance(0.8) ? ETCD_TXN_PATH : ETCD_UNARY_PATH,
                count: rng.int(1, 2),
                mode: rng.chance(0.7) ? 'reset' : 'cut',
                holdMs: rng.int(500, 3000),
              }
            : { kind, atMs: t, durationMs, count: rng.int(1, 2), holdMs: rng.int(500, 3000) };
        const out: Draft[] = [drop];
        // Campaigns inside the window: a replica restarting campaigns for every target, 700 ms apart, so
        // the revision moves on while an answer is held. Then the others restart one after the other: a
        // replica whose retried campaign took a wrong revision waits for its own key, and once the keys
        // before it are gone nobody leads that target.
        const first = opts.exclude?.includes('replica-term')
          ? undefined
          : pickReplica(t + 300, rng.int(0, 1000));
        if (first !== undefined) {
          out.push(first);
          const done = [first.replica];
          for (const [lo, hi] of [
            [4000, 6000],
            [8000, 10_000],
          ] as const) {
            const next = pickReplica(t + rng.int(lo, hi), rng.int(0, 1000), done);
            if (next) {
              out.push(next);
              done.push(next.replica);
            }
          }
        }
        return out;
      }
      case 'retention-change':
        // Placed apart, from a PRNG of its own (retentionChanges): never in this pass.
        return undefined;
      case 'redis-path-cut': {
        // One healed cut at a time, on a slot not cut for good (the injector skips that one too).
        if (!free('redis-path', t)) return undefined;
        busyUntil.set('redis-path', t + durationMs);
        const slots = [...Array(opts.replicas).keys()].filter((r) => r !== cutForGood);
        return [
          {
            kind,
            atMs: t,
            durationMs,
            replica: rng.pick(slots),
            leaderOf: rng.chance(0.6) ? rng.pick(opts.namespaces) : undefined,
            how: rng.chance(0.5) ? 'wedge' : 'refuse',
          },
        ];
      }
      case 'delete-outage': {
        if (!free('delete-outage', t)) return undefined;
        busyUntil.set('delete-outage', t + durationMs);
        return [{ kind, atMs: t, durationMs, namespace: rng.pick(opts.namespaces) }];
      }
      case 'api-status':
      case 'api-reset':
      case 'api-slow':
      case 'api-drop-watches':
      case 'api-stall-watches': {
        if (apiEnds.filter((end) => end > t).length >= MAX_API_FAULTS) return undefined;
        apiEnds.push(t + durationMs);
        if (kind === 'api-stall-watches')
          return [{ kind, atMs: t, durationMs, namespace: rng.pick(opts.namespaces) }];
        if (kind === 'api-status') {
          const status = rng.pick([403, 429, 500, 503] as const);
          const verb = rng.pick(['delete', 'get', 'list', 'watch', '*'] as const);
          const namespace = ns();
          const retryAfterSeconds = status === 429 ? rng.int(1, 2) : undefined;
          return [{ kind, atMs: t, durationMs, status, verb, namespace, retryAfterSeconds }];
        }
        if (kind === 'api-reset')
          return [
            {
              kind,
              atMs: t,
              durationMs,
              verb: rng.pick(['delete', 'get', 'list', 'watch', '*']),
              namespace: ns(),
            },
          ];
        if (kind === 'api-slow')
          return [
            {
              kind,
              atMs: t,
              durationMs,
              verb: rng.pick(['delete', 'get', 'list', '*']),
              latencyMs: rng.int(300, 3000),
              namespace: ns(),
            },
          ];
        return [{ kind, atMs: t, durationMs, compact: rng.chance(0.4), namespace: ns() }];
      }
    }
  };

  /**
   * A SIGTERM+restart of a replica free at `t` (not in `except`) for `durationMs`, keeping one replica outside
   * process faults; undefined when none fits or it would end after the run.
   */
  const pickReplica = (
    t: number,
    durationMs: number,
    except: readonly number[] = [],
  ): (Draft & { kind: ProcessFaultKind; replica: number }) | undefined => {
    if (t + durationMs > opts.durationMs || replicasInFaults(t) + 1 > opts.replicas - 1) return undefined;
    // Nothing starts after the finale (a companion restart of lost etcd answers could be drawn there).
    if (finaleAt !== undefined && t >= finaleAt) return undefined;
    const candidates = [...Array(opts.replicas).keys()].filter(
      (r) => !except.includes(r) && r !== cutForGood && free(`r${r}`, t),
    );
    if (candidates.length === 0) return undefined;
    const r = rng.pick(candidates);
    busyUntil.set(`r${r}`, t + durationMs + BOOT_MS);
    return { kind: 'replica-term', atMs: t, durationMs, replica: r };
  };

  const drawn = faultKindsFor(opts.redisMode ?? 'single', opts.leadership).filter(
    (k) => !opts.exclude?.includes(k),
  );
  // The retention changes are placed apart (below), so that every other fault is where each seed always had it.
  const kinds = drawn.filter((k) => k !== 'retention-change');
  if (kinds.length === 0) return [];
  // The long ones first: the DELETE outage, then the ZooKeeper follower cut (which shares the store with the
  // kills), must fit in the run (a CI run is only 75 s).
  const first: readonly FaultKind[] = ['delete-outage', 'zookeeper-follower-cut'];
  const rank = (k: FaultKind) => (first.includes(k) ? first.indexOf(k) : first.length);
  const mandatory: FaultKind[] = shuffle([...kinds], rng).sort((a, b) => rank(a) - rank(b));
  const finaleMs = Math.round(rng.between(FINALE[0], FINALE[1] + 1));
  const finaleKind = opts.leadership === 'zookeeper' ? 'zookeeper-kill' : 'etcd-kill';
  const withFinale = kinds.includes(finaleKind) && opts.durationMs >= 60_000;
  finaleAt = withFinale ? opts.durationMs - FINALE_MARGIN_MS - finaleMs : undefined;
  // The mode's Redis failover (Sentinel, Cluster) is placed first, at a seeded moment early in the run and
  // settled before the finale: it holds Redis for ~20 s, which the sequential pass would not always find
  // in a 75 s run. (Single mode has none: its schedules are drawn exactly as without a mode.)
  const failover = kinds.find((k) => k === 'redis-sentinel-failover' || k === 'redis-cluster-master-kill');
  if (failover) {
    mandatory.splice(mandatory.indexOf(failover), 1);
    const [lo, hi] = DURATION[failover];
    const durationMs = Math.round(rng.between(lo, hi + 1));
    const latest = Math.min(
      WARMUP_MS + 40_000,
      (finaleAt ?? opts.durationMs) - durationMs - FAILOVER_SETTLE_MS,
    );
    if (latest >= WARMUP_MS) {
      const atMs = Math.round(rng.between(WARMUP_MS, latest));
      failoverSpans.push([atMs, atMs + durationMs + FAILOVER_SETTLE_MS]);
      drafts.push(
        failover === 'redis-sentinel-failover'
          ? { kind: failover, atMs, durationMs }
          : { kind: failover, atMs, durationMs, namespace: rng.pick(opts.namespaces) },
      );
    }
  }
  // One replica's path to Redis cut for good, at a seeded moment 60–70 s before the run ends (just after the
  // warm-up in a CI run), on a seeded slot that no process fault hits from then on (a restarted process would
  // forget that it stepped down). Its targets must be taken over by the others before the run is judged; the
  // kind stays mandatory, so a healed cut of another slot comes too.
  const latest = opts.durationMs - 60_000;
  if (kinds.includes('redis-path-cut') && latest >= WARMUP_MS) {
    const atMs = Math.round(rng.between(Math.max(WARMUP_MS, latest - CUT_FOR_GOOD_WITHIN_MS), latest));
    cutForGood = rng.int(0, opts.replicas - 1);
    drafts.push({
      kind: 'redis-path-cut',
      atMs,
      durationMs: opts.durationMs - atMs,
      replica: cutForGood,
      how: rng.chance(0.5) ? 'wedge' : 'refuse',
      forGood: true,
    });
  }
  let t = WARMUP_MS;
  while (t < (finaleAt ?? opts.durationMs)) {
    let placed: Draft[] | undefined;
    // The first kind not yet seen that fits now; once all were seen, any kind.
    for (const kind of mandatory.length > 0 ? [...mandatory] : [rng.pick(kinds)]) {
      placed = place(kind, t, mandatory.length > 0);
      if (placed) {
        const i = mandatory.indexOf(kind);
        if (i >= 0) mandatory.splice(i, 1);
        break;
      }
    }
    if (placed) drafts.push(...placed);
    // Exponential gaps (a Poisson process of fault starts), at least 200 ms; 500 ms to retry a busy moment.
    t += placed ? Math.max(200, Math.round(-Math.log(1 - rng.next()) * meanGapMs)) : 500;
  }
  if (finaleAt !== undefined) drafts.push({ kind: finaleKind, atMs: finaleAt, durationMs: finaleMs });
  if (drawn.includes('retention-change')) drafts.push(...retentionChanges(opts, finaleAt ?? opts.durationMs));
  return drafts.sort((a, b) => a.atMs - b.atMs).map((d, id) => ({ ...d, id }) as NemesisEvent);
}

/** One retention change per this much of the run (the first in the first such slot), ms. */
const RETENTION_SLOT_MS = 120_000;

/**
 * The `retention-change` faults: one per {@link RETENTION_SLOT_MS} of the run (a CI-size run has one), each at a
 * seeded moment of its slot, over by `endMs`, on a seeded replica, drawn from a PRNG of their own so that the
 * other faults' schedule is the one each seed drew before the kind existed (replays keep their seeds). The
 * changed replica keeps running (only its two restarts are brief), so it does not count as down; a process
 * fault that finds it busy then is applied to another replica (injectors.ts).
 */
function retentionChanges(opts: ScheduleOptions, endMs: number): Draft[] {
  const rng = createPrng(opts.seed).fork('retention');
  const [lo, hi] = DURATION['retention-change'];
  const out: Draft[] = [];
  for (let from = WARMUP_MS; from < endMs; from += RETENTION_SLOT_MS) {
    const durationMs = Math.round(rng.between(lo, hi + 1));
    const latest = Math.min(from + RETENTION_SLOT_MS, endMs) - durationMs - BOOT_MS;
    if (latest < from) break;
    const atMs = Math.round(rng.between(from, latest));
    const replica = rng.int(0, opts.replicas - 1);
    // Mostly raised (the guarantee a raise must keep: pods others enqueued with a shorter one are kept).
    const retentionMs = rng.chance(0.7) ? rng.int(6000, 12_000) : rng.int(1000, 2000);
    out.push({ kind: 'retention-change', atMs, durationMs, replica, retentionMs });
  }
  return out;
}

function shuffle<T>(items: T[], rng: Prng): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The process a process fault hits: `r1`, or `the leader of nem-a (else r1)`. */
function who(e: { replica: number; leaderOf?: string }): string {
  return e.leaderOf ? `the leader of ${e.leaderOf} (else r${e.replica})` : `r${e.replica}`;
}

/** One line describing a fault, e.g. `+ 12.3 s  #4 replica-kill r1, restarted after 2.0 s`. */
export function describeEvent(e: NemesisEvent): string {
  const where = (ns: string | undefined) => (ns ? ` in ${ns}` : '');
  let what: string;
  switch (e.kind) {
    case 'replica-kill':
      what = `SIGKILL ${who(e)}, restarted after ${secs(e.durationMs)}`;
      break;
    case 'replica-stop':
      what = `SIGSTOP ${who(e)}, SIGCONT after ${secs(e.durationMs)}`;
      break;
    case 'replica-term':
      what = `SIGTERM ${who(e)}, restarted ${secs(e.durationMs)} after it exits`;
      break;
    case 'clock-step':
      what = `r${e.replica}'s wall clock ${e.offsetSeconds > 0 ? '+' : ''}${e.offsetSeconds} s for ${secs(e.durationMs)}${e.onceLeading ? ' (once it leads a target)' : ''}`;
      break;
    case 'etcd-kill':
      what = `SIGKILL etcd, restarted after ${secs(e.durationMs)}`;
      break;
    case 'etcd-drop-answers':
      what = `etcd proxy loses ${e.count} answer(s) of ${e.path} (${e.mode} after ${e.holdMs} ms) within ${secs(e.durationMs)}`;
      break;
    case 'zookeeper-kill':
      what = `SIGKILL ZooKeeper, restarted after ${secs(e.durationMs)}`;
      break;
    case 'zookeeper-drop-answers':
      what = `ZooKeeper relays lose the answers of ${e.count} create(s) (cut ${e.holdMs} ms after each) within ${secs(e.durationMs)}`;
      break;
    case 'zookeeper-follower-cut':
      what = `ZooKeeper follower #${e.follower} cut off from its peers for ${secs(e.durationMs)}, the leader of ${e.namespace} moved onto it first`;
      break;
    case 'redis-restart':
      what = 'Redis restarted empty';
      break;
    case 'redis-pause':
      what = `SIGSTOP Redis for ${secs(e.durationMs)}`;
      break;
    case 'redis-path-cut': {
      const how = e.how === 'wedge' ? 'wedged (connections hang)' : 'refused';
      what = `${who(e)}'s own path to Redis ${how} ${e.forGood ? 'until the run is judged' : `for ${secs(e.durationMs)}`}`;
      break;
    }
    case 'redis-sentinel-failover':
      what = `SIGKILL the Sentinel master, back as a replica ${secs(e.durationMs)} after the promotion`;
      break;
    case 'redis-cluster-master-kill':
      what = `SIGKILL the master of ${e.namespace}'s queue slot, back as a replica ${secs(e.durationMs)} after the failover`;
      break;
    case 'api-status':
      what = `API ${e.status} on ${e.verb}${where(e.namespace)}${e.retryAfterSeconds ? ` (Retry-After ${e.retryAfterSeconds})` : ''} for ${secs(e.durationMs)}`;
      break;
    case 'api-reset':
      what = `API resets ${e.verb}${where(e.namespace)} for ${secs(e.durationMs)}`;
      break;
    case 'api-slow':
      what = `API answers ${e.verb}${where(e.namespace)} after ${e.latencyMs} ms for ${secs(e.durationMs)}`;
      break;
    case 'delete-outage':
      what = `API 503 on delete in ${e.namespace} for ${secs(e.durationMs)} (pods overdue for real)`;
      break;
    case 'api-drop-watches':
      what = `API drops watches${where(e.namespace)}${e.compact ? ' after a compaction (410)' : ''} for ${secs(e.durationMs)}`;
      break;
    case 'api-stall-watches':
      what = `API watches in ${e.namespace} stall for ${secs(e.durationMs)}; a person deletes pods due meanwhile`;
      break;
    case 'retention-change':
      what = `r${e.replica} restarted with retention ${secs(e.retentionMs)} for ${secs(e.durationMs)}, then with the fleet's`;
      break;
  }
  return `+${secs(e.atMs).padStart(7)}  #${e.id} ${e.kind.padEnd(17)} ${what}`;
}

/** The schedule as text: a header line, then one line per fault. */
export function formatSchedule(
  seed: number,
  events: readonly NemesisEvent[],
  durationMs: number,
  exclude: readonly FaultKind[] = [],
): string {
  const without = exclude.length > 0 ? ` (without ${exclude.join(', ')})` : '';
  return [
    `seed ${seed}: ${events.length} faults over ${secs(durationMs)}${without}`,
    ...events.map(describeEvent),
  ].join('\n');
}

/**
 * Parses `NEMESIS_EXCLUDE` (comma-separated fault kinds).
 * @throws TypeError naming NEMESIS_EXCLUDE, the unknown kind and the known ones.
 */
export function parseExclude(raw: string | undefined): FaultKind[] {
  const items = (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items)
    if (!(FAULT_KINDS as readonly string[]).includes(item))
      throw new TypeError(
        `NEMESIS_EXCLUDE: "${item}" is not a fault kind; expected some of ${FAULT_KINDS.join(', ')}`,
      );
  return items as FaultKind[];
}
