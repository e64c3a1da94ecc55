/**
 * Benchmark: failover. A coordinated fleet elects a leader; the bench kills it (SIGKILL: its lease must
 * expire, target ≤ election TTL + 1 s) or stops it (SIGTERM: it resigns, target ≤ 1 s) and at once
 * creates driver pods that are already due, so the first DELETE after the signal measures the takeover:
 * election of a new leader, its reconcile, and its worker picking up due jobs. After each trial a fresh
 * replica replaces the one that left, so every trial starts with the same fleet size.
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
  return { config: opts, trials };
}
