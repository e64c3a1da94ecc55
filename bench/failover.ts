/**
 * Benchmark: failover. A coordinated fleet elects a leader; the bench kills it (SIGKILL: its lease must
 * expire, target ≤ election TTL + 1 s) or stops it (SIGTERM: it resigns, target ≤ 1 s) and at once
 * creates driver pods that are already due, so the first DELETE after the signal measures the takeover:
 * election of a new leader, its reconcile, and its worker picking up due jobs. After each trial a fresh
 * replica replaces the one that left, so every trial starts with the same fleet size.
 *
 * Frozen leader ({@link benchFrozenLeader}, a fleet of its own): the leader is frozen (SIGSTOP) while it holds
 * due jobs in flight, and woken (SIGCONT) `frozenMs` later. Its jobs are held in flight by re-checking `live`
 * and holding its GETs at the API server (a latency fault, cleared at the freeze), so no DELETE of theirs has
 * left. Measured: each pod's lateness (DELETE arrival − deadline) and the last DELETE after the new leader's
 * election (target ≤ TTL + 1 s), DELETEs per pod.
 */
import type { ReplicaProcess } from '../harness/sandbox/replica-process.ts';
import {
  type BenchEnv,
  createDrivers,
  driversLeft,
  spawnFleet,
  spawnOne,
  stopFleet,
  until,
} from './harness.ts';

/** Options of {@link benchFailover}. */
export interface FailoverOptions {
  replicas: number;
  /** Trials per signal. */
  trials: number;
  /** SDC_ELECTION_TTL_SECONDS of the fleet, s. */
  electionTtlSeconds: number;
  /** Due pods created right after each signal. */
  pods: number;
  /** Frozen-leader trials to run after the others, on a fleet of their own ({@link benchFrozenLeader}). */
  frozen?: FrozenLeaderOptions;
}

/** One trial. All times are ms after the signal was sent. */
export interface FailoverTrial {
  signal: 'SIGKILL' | 'SIGTERM';
  trial: number;
  oldLeader: string;
  newLeader: string | null;
  /** The new leader logged 'elected leader'. */
  electedAfterMs: number | null;
  /** The first DELETE of one of these pods arrived at the API server. */
  firstDeleteAfterMs: number | null;
  /** The new leader logged its first 'driver pod deleted' for one of these pods. */
  newLeaderFirstDeleteAfterMs: number | null;
  /** Every pod of the trial was gone. */
  allDeletedAfterMs: number;
  /** DELETE requests for the trial's pods (target: one per pod). */
  deleteRequests: number;
  /** The target this trial is held to, ms. */
  targetMs: number;
}

/** Result of {@link benchFailover}. */
export interface FailoverResult {
  config: FailoverOptions;
  trials: FailoverTrial[];
  /** The frozen-leader trials ({@link benchFrozenLeader}), when run. */
  frozen?: FrozenLeaderResult;
}

/** Options of {@link benchFrozenLeader}. */
export interface FrozenLeaderOptions {
  replicas: number;
  trials: number;
  /** SDC_ELECTION_TTL_SECONDS of the fleet, s. */
  electionTtlSeconds: number;
  /** Due pods whose jobs the leader holds when it freezes. */
  pods: number;
  /** How long the leader stays frozen, ms. */
  frozenMs: number;
}

/** One frozen-leader trial. Times are ms after the freeze unless said otherwise. */
export interface FrozenLeaderTrial {
  trial: number;
  oldLeader: string;
  newLeader: string | null;
  /** Jobs the new leader logged it took over at its election. */
  tookOver: number;
  electedAfterMs: number | null;
  firstDeleteAfterMs: number | null;
  lastDeleteAfterMs: number | null;
  /** Last accepted DELETE of the trial's pods − the new leader's election, ms (target ≤ TTL + 1 s). */
  lastDeleteAfterElectionMs: number | null;
  /** DELETE arrival − deadline over the trial's pods, ms. */
  latenessP50Ms: number;
  latenessMaxMs: number;
  /** Every pod of the trial was gone. */
  allDeletedAfterMs: number;
  /** DELETE requests and accepted DELETEs for the trial's pods (target: one each per pod). */
  deleteRequests: number;
  acceptedDeletes: number;
  /** The target, ms after the new leader's election. */
  targetMs: number;
}

/** Result of {@link benchFrozenLeader}. */
export interface FrozenLeaderResult {
  config: FrozenLeaderOptions;
  trials: FrozenLeaderTrial[];
}

interface Election {
  replica: string;
  atMs: number;
}

/**
 * Runs `trials` SIGKILL trials, then `trials` SIGTERM trials, on one fleet.
 * @throws BenchTimeoutError when no new leader cleans the pods in time.
 */
export async function benchFailover(
  env: BenchEnv,
  opts: FailoverOptions,
  progress: (msg: string) => void,
): Promise<FailoverResult> {
  const namespace = 'failover';
  const elections: Election[] = [];
  const firstDeleteBy = new Map<string, number>(); // replica → epoch ms of its latest-trial first DELETE
  let trialUids = new Set<string>();
  const spec = {
    mode: 'coordinated' as const,
    count: opts.replicas,
    namespace,
    queuePrefix: namespace,
    idPrefix: 'failover',
    env: {
      SDC_ELECTION_TTL_SECONDS: String(opts.electionTtlSeconds),
      SDC_API_QPS: '200',
      SDC_API_BURST: '200',
    },
    onLine: (id: string, l: Record<string, unknown>) => {
      const at = Date.parse(String(l.time));
      if (l.msg === 'elected leader') elections.push({ replica: id, atMs: at });
      if (l.msg === 'driver pod deleted' && trialUids.has(String(l.uid)) && !firstDeleteBy.has(id))
        firstDeleteBy.set(id, at);
    },
  };
  progress(`failover: ${opts.replicas} replicas, TTL ${opts.electionTtlSeconds} s`);
  const fleet: ReplicaProcess[] = await spawnFleet(env, spec);
  let nextId = opts.replicas + 1;
  const trials: FailoverTrial[] = [];
  try {
    for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
      for (let t = 1; t <= opts.trials; t++) {
        const alive = fleet.filter((r) => r.child.exitCode === null && r.child.signalCode === null);
        const aliveIds = new Set(alive.map((r) => r.id));
        const leaderId = [...elections].reverse().find((e) => aliveIds.has(e.replica))?.replica;
        const leader = alive.find((r) => r.id === leaderId);
        if (!leader) throw new Error('failover: no live leader before the trial');
        const electionsBefore = elections.length;
        firstDeleteBy.clear();
        const t0 = env.now();
        leader.kill(signal);
        // Due already (finished 10 s ago, retention 1 s): only leadership stands between them and DELETE.
        const pods = createDrivers(env.server, namespace, opts.pods, () => t0 - 10_000, 1000);
        trialUids = new Set(pods.map((p) => p.uid));
        await until(
          `failover (${signal}) cleaned the trial's pods`,
          () => driversLeft(env.server, namespace) === 0,
          opts.electionTtlSeconds * 3000 + 30_000,
        );
        const allDeletedAfterMs = env.now() - t0;
        await leader.exited;
        // The first replica elected after the kill may hand the target over to its assigned owner (balanced
        // leadership) before it deletes anything: the new leader is the first elected one that deleted.
        const newElections = elections.slice(electionsBefore).filter((e) => e.replica !== leader.id);
        if (newElections.length)
          await until(
            'new leader log line',
            () => newElections.some((e) => firstDeleteBy.has(e.replica)),
            10_000,
          );
        const newElection = newElections.find((e) => firstDeleteBy.has(e.replica)) ?? newElections[0];
        const newLeader = newElection?.replica ?? null;
        const deletes = env.server.requests
          .recent()
          .filter((r) => r.verb === 'delete' && r.uid !== undefined && trialUids.has(r.uid));
        const firstAt = deletes.length ? Math.min(...deletes.map((r) => r.atMs)) : undefined;
        const byNew = newLeader ? firstDeleteBy.get(newLeader) : undefined;
        const trial: FailoverTrial = {
          signal,
          trial: t,
          oldLeader: leader.id,
          newLeader,
          electedAfterMs: newElection ? newElection.atMs - t0 : null,
          firstDeleteAfterMs: firstAt !== undefined ? firstAt - t0 : null,
          newLeaderFirstDeleteAfterMs: byNew !== undefined ? byNew - t0 : null,
          allDeletedAfterMs,
          deleteRequests: deletes.length,
          targetMs: signal === 'SIGKILL' ? opts.electionTtlSeconds * 1000 + 1000 : 1000,
        };
        progress(
          `  ${signal} #${t}: elected +${trial.electedAfterMs} ms, first DELETE +${trial.firstDeleteAfterMs} ms`,
        );
        trials.push(trial);
        // Back to full strength before the next trial.
        const fresh = spawnOne(env, spec, `failover-${nextId++}`);
        fleet.push(fresh);
        await fresh.waitForLine((l) => l.msg === 'replica started', 60_000);
      }
    }
  } finally {
    await stopFleet(fleet);
  }
  const frozen = opts.frozen ? await benchFrozenLeader(env, opts.frozen, progress) : undefined;
  return { config: opts, trials, ...(frozen ? { frozen } : {}) };
}

/** The value at quantile `q` (0–1) of sorted numbers. */
function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

/**
 * Runs `trials` frozen-leader trials on a fleet of its own (recheck `live`, 100 jobs in flight): due pods
 * whose GETs the API server holds, the leader frozen once it holds all their jobs and woken `frozenMs` later.
 * @throws BenchTimeoutError when the pods are not cleaned in time.
 */
export async function benchFrozenLeader(
  env: BenchEnv,
  opts: FrozenLeaderOptions,
  progress: (msg: string) => void,
): Promise<FrozenLeaderResult> {
  const namespace = 'failover-frozen';
  const elections: Election[] = [];
  const tookOver = new Map<string, number>(); // replica → jobs it took over in the current trial
  const spec = {
    mode: 'coordinated' as const,
    count: opts.replicas,
    namespace,
    queuePrefix: namespace,
    idPrefix: 'frozen',
    env: {
      SDC_ELECTION_TTL_SECONDS: String(opts.electionTtlSeconds),
      SDC_RECHECK: 'live',
      SDC_CONCURRENCY: '100',
      SDC_API_QPS: '200',
      SDC_API_BURST: '200',
    },
    onLine: (id: string, l: Record<string, unknown>) => {
      if (l.msg === 'elected leader') elections.push({ replica: id, atMs: Date.parse(String(l.time)) });
      if (String(l.msg).startsWith('took over')) tookOver.set(id, (tookOver.get(id) ?? 0) + Number(l.jobs));
    },
  };
  progress(
    `frozen leader: ${opts.replicas} replicas, TTL ${opts.electionTtlSeconds} s, ${opts.pods} jobs held, ` +
      `frozen ${opts.frozenMs / 1000} s`,
  );
  const fleet: ReplicaProcess[] = await spawnFleet(env, spec);
  const trials: FrozenLeaderTrial[] = [];
  const podsPath = `/namespaces/${namespace}/pods/`;
  /**
   * The leader once leadership has settled: every replica a member and the target led by the replica it is
   * assigned to (balanced leadership hands it over as replicas join), as a replica's `/api/v1/leaders` says.
   */
  const settledLeader = async (): Promise<ReplicaProcess | undefined> => {
    const alive = fleet.filter((r) => r.child.exitCode === null && r.child.signalCode === null);
    const url = alive[0]?.lines.find((l) => l.msg === 'http server listening')?.url;
    if (!url) return undefined;
    const body = (await (
      await fetch(`${url}/api/v1/leaders`, { signal: AbortSignal.timeout(5000) })
    )
      .json()
      .catch(() => undefined)) as
      | {
          targets: Record<string, { leader: string | null; assigned?: string | null }>;
          balance?: { members: string[] };
        }
      | undefined;
    const row = body && Object.entries(body.targets).find(([k]) => k.endsWith(`:${namespace}`))?.[1];
    if (!row?.leader || row.leader !== row.assigned || body?.balance?.members.length !== alive.length)
      return undefined;
    const leader = alive.find((r) => r.id === row.leader);
    const last = leader?.lines.findLast((l) =>
      ['elected leader', 'leadership lost', 'leadership ended'].includes(String(l.msg)),
    );
    return last?.msg === 'elected leader' ? leader : undefined;
  };
  try {
    for (let t = 1; t <= opts.trials; t++) {
      const leader = await until('frozen leader: leadership settled', settledLeader, 60_000, 500);
      const electionsBefore = elections.length;
      tookOver.clear();
      const startedAt = env.now();
      const held = env.server.faults.inject({ verb: 'get', path: podsPath, latencyMs: 120_000 });
      // Due as they are created: finished a retention ago (deadlines on whole seconds, at most now).
      const pods = createDrivers(env.server, namespace, opts.pods, () => startedAt - 1000, 1000);
      const uids = new Set(pods.map((p) => p.uid));
      await until(
        'frozen leader: the leader holds every job (their GETs arrived)',
        () =>
          env.server.requests
            .arrivals()
            .filter((a) => a.verb === 'get' && a.atMs >= startedAt && a.path.includes(podsPath)).length >=
          opts.pods,
        30_000,
      );
      const t0 = env.now();
      leader.kill('SIGSTOP');
      env.server.faults.clear(held);
      let goneAt: number | undefined;
      const gone = () => {
        if (goneAt === undefined && driversLeft(env.server, namespace) === 0) goneAt = env.now();
        return goneAt !== undefined;
      };
      await until(
        'frozen leader: the freeze over',
        () => {
          gone(); // noted while frozen
          return env.now() - t0 >= opts.frozenMs;
        },
        opts.frozenMs + 5_000,
      );
      leader.kill('SIGCONT');
      await until('frozen leader: every pod deleted', gone, 120_000);
      const allDeletedAfterMs = (goneAt ?? env.now()) - t0;
      const newElection = elections.slice(electionsBefore).find((e) => e.replica !== leader.id);
      const deletes = env.server.requests.deletes().filter((r) => r.uid !== undefined && uids.has(r.uid));
      const accepted = deletes.filter((r) => r.code === 200 || r.code === 202);
      const deadline = new Map(pods.map((p) => [p.uid, p.deadlineMs]));
      const lateness = accepted
        .map((r) => r.atMs - (deadline.get(r.uid ?? '') ?? r.atMs))
        .sort((a, b) => a - b);
      const firstAt = accepted.length ? Math.min(...accepted.map((r) => r.atMs)) : undefined;
      const lastAt = accepted.length ? Math.max(...accepted.map((r) => r.atMs)) : undefined;
      const trial: FrozenLeaderTrial = {
        trial: t,
        oldLeader: leader.id,
        newLeader: newElection?.replica ?? null,
        tookOver: newElection ? (tookOver.get(newElection.replica) ?? 0) : 0,
        electedAfterMs: newElection ? newElection.atMs - t0 : null,
        firstDeleteAfterMs: firstAt !== undefined ? firstAt - t0 : null,
        lastDeleteAfterMs: lastAt !== undefined ? lastAt - t0 : null,
        lastDeleteAfterElectionMs: lastAt !== undefined && newElection ? lastAt - newElection.atMs : null,
        latenessP50Ms: quantile(lateness, 0.5),
        latenessMaxMs: lateness.at(-1) ?? Number.NaN,
        allDeletedAfterMs,
        deleteRequests: deletes.length,
        acceptedDeletes: accepted.length,
        targetMs: opts.electionTtlSeconds * 1000 + 1000,
      };
      progress(
        `  frozen #${t}: elected +${trial.electedAfterMs} ms, took over ${trial.tookOver}, last DELETE ` +
          `+${trial.lastDeleteAfterMs} ms (${trial.lastDeleteAfterElectionMs} ms after the election), lateness ` +
          `p50 ${trial.latenessP50Ms} ms max ${trial.latenessMaxMs} ms, ${trial.deleteRequests} DELETEs`,
      );
      trials.push(trial);
      // The woken replica ends its stale term before the next trial picks the leader.
      await leader.waitForLine(
        (l) => l.msg === 'stopped consuming' && Date.parse(String(l.time)) >= t0,
        30_000,
      );
    }
  } finally {
    await stopFleet(fleet);
  }
  return { config: opts, trials };
}
