/**
 * Benchmark: a burst of pods all due at the same instant (10,000 in the full run), cleaned by one leader
 * with no rate limit (SDC_API_QPS and SDC_API_BURST very high), as a ratio of the sandbox API server's
 * raw DELETE rate from a plain client loop measured in the same run on the same server (the physical
 * limit here). Target: ratio ≥ 0.5. Measured for the `live` and `cache` re-check modes.
 *
 * The pods are created while the replica runs, with a deadline far enough ahead that every job is
 * enqueued (delayed) before it, so the figure measures cleaning, not enqueueing.
 */
import type { RecheckMode } from '../src/config/schema.ts';
import { queueName } from '../src/queue/job-identity.ts';
import { measureRawDeleteRate, type RawDeleteRate } from './apiserver-delete-rate.ts';
import {
  type BenchEnv,
  createDrivers,
  driversLeft,
  ownCpuMs,
  processCpuMs,
  recheckTag,
  redisCpuMs,
  round,
  sampleSeries,
  spawnFleet,
  stopFleet,
  until,
} from './harness.ts';
import { createMemoryCgroup, deploymentMemoryLimitBytes, type MemoryCgroup } from './memory-cgroup.ts';

/** Options of {@link benchBurst}. */
export interface BurstOptions {
  pods: number;
  /**
   * Leader runs: re-check mode, SDC_CONCURRENCY (the product default is 100) and whether the leader runs as
   * deployed, in a cgroup limited to the Deployment's `limits.memory` (Node then sizes a smaller heap).
   */
  runs: BurstRunSpec[];
}

/** One leader run of {@link BurstOptions.runs}. */
export interface BurstRunSpec {
  recheck: RecheckMode;
  concurrency: number;
  asDeployed?: boolean;
}

/** One leader's run. */
export interface BurstRun {
  recheck: RecheckMode;
  /** SDC_CONCURRENCY of the leader (the product default is 100). */
  concurrency: number;
  /** The memory limit of the cgroup the leader ran in (as deployed), bytes; absent: none. */
  memoryLimitBytes?: number;
  /** Pod creation to every job delayed in Redis, ms. */
  enqueueMs: number;
  /** Every job was enqueued before the pods came due. */
  enqueuedBeforeDeadline: boolean;
  /** The common deadline to the last pod gone, ms. */
  cleanMs: number;
  podsPerSecond: number;
  /** podsPerSecond / the raw loop's DELETE/s. */
  ratioToRaw: number;
  /** Best one-second window, pods/s. */
  peakPodsPerSecond: number;
  deleteRequests: number;
  getRequests: number;
  leaked: number;
  /**
   * CPU used during the cleaning, as a share of one core (1 = one core busy all the time): the leader
   * process, Redis, etcd, and the bench process (mostly the in-process sandbox API server). Tells what limits
   * the rate on this machine.
   */
  cpuShare: { leader: number; redis: number; etcd: number; apiServerAndBench: number };
  /** CPU time of the leader process per pod cleaned, ms: its ceiling is 1000 / this pods/s on one core. */
  leaderCpuMsPerPod: number;
  /** `[ms since the deadline, DELETE requests so far]`, sampled every 100 ms. */
  series: [number, number][];
}

/** Result of {@link benchBurst}. */
export interface BurstResult {
  config: BurstOptions;
  /** The raw loop's trial with the median rate: the denominator of every ratio. */
  raw: RawDeleteRate;
  /** DELETE/s of each raw trial (one loop of `pods` DELETEs each; short runs vary by ±20 % here). */
  rawTrials?: number[];
  runs: BurstRun[];
}

/** Raw loops run before the leader runs; the median is the physical limit the ratios use. */
const RAW_TRIALS = 3;

function peakPerSecond(series: [number, number][]): number {
  let best = 0;
  let j = 0;
  for (let i = 0; i < series.length; i++) {
    const [t, v] = series[i] as [number, number];
    while (j < i && (series[j] as [number, number])[0] < t - 1000) j++;
    const [t0, v0] = series[j] as [number, number];
    if (t - t0 >= 900) best = Math.max(best, ((v - v0) / (t - t0)) * 1000);
  }
  return Math.round(best);
}

async function leaderRun(
  env: BenchEnv,
  pods: number,
  { recheck, concurrency }: BurstRunSpec,
  cgroup: MemoryCgroup | undefined,
  memoryLimitBytes: number | undefined,
  raw: number,
): Promise<BurstRun> {
  const { server } = env;
  const namespace = `burst-${recheckTag(recheck)}-${concurrency}${cgroup ? '-deployed' : ''}`;
  const fleet = await spawnFleet(env, {
    ...(cgroup ? { cgroupFor: () => cgroup.dir } : {}),
    mode: 'coordinated',
    count: 1,
    namespace,
    queuePrefix: namespace,
    idPrefix: namespace,
    env: {
      SDC_API_QPS: '100000',
      SDC_API_BURST: '100000',
      SDC_RECHECK: recheck,
      SDC_RETENTION: '600s',
      SDC_CONCURRENCY: String(concurrency),
    },
  });
  try {
    const created = env.now();
    const leadMs = Math.max(5000, pods * 3);
    const deadline = Math.ceil((created + leadMs) / 1000) * 1000;
    createDrivers(server, namespace, pods, () => deadline - 600_000, 600_000);
    const delayedKey = `${namespace}:${queueName({ cluster: server.clusterName, namespace })}:delayed`;
    await until(
      'every burst job delayed',
      async () => (await env.redisClient.zcard(delayedKey)) >= pods,
      300_000,
      100,
    );
    const enqueueMs = env.now() - created;
    const enqueuedBeforeDeadline = env.now() < deadline;
    await until('the burst deadline', () => env.now() >= deadline, leadMs + 300_000, 5);
    const before = server.requests.countsByVerb();
    const deletes = () => (server.requests.countsByVerb().delete ?? 0) - (before.delete ?? 0);
    const sampler = sampleSeries(deletes, env.now);
    const pid = fleet[0]?.pid ?? 0;
    const etcdPid = env.etcd.members[0]?.pid ?? 0;
    const cpu0 = {
      leader: processCpuMs(pid),
      redis: await redisCpuMs(env.redisClient),
      etcd: processCpuMs(etcdPid),
      own: ownCpuMs(),
    };
    // Poll a counter, not the pod list: listing 10,000 pods clones them all on the API server's thread.
    await until('a DELETE for every burst pod', () => deletes() >= pods, 600_000, 20);
    const cleanMs = env.now() - deadline;
    await until('every burst pod gone', () => driversLeft(server, namespace) === 0, 30_000, 500);
    const leaderCpuMs = processCpuMs(pid) - cpu0.leader;
    const cpuShare = {
      leader: round(leaderCpuMs / cleanMs, 2),
      redis: round(((await redisCpuMs(env.redisClient)) - cpu0.redis) / cleanMs, 2),
      etcd: round((processCpuMs(etcdPid) - cpu0.etcd) / cleanMs, 2),
      apiServerAndBench: round((ownCpuMs() - cpu0.own) / cleanMs, 2),
    };
    const series = sampler.stop();
    const after = server.requests.countsByVerb();
    const podsPerSecond = Math.round((pods / cleanMs) * 1000);
    return {
      recheck,
      concurrency,
      ...(cgroup && memoryLimitBytes !== undefined ? { memoryLimitBytes } : {}),
      enqueueMs,
      enqueuedBeforeDeadline,
      cleanMs,
      podsPerSecond,
      ratioToRaw: round(podsPerSecond / raw, 3),
      peakPodsPerSecond: peakPerSecond(series),
      deleteRequests: (after.delete ?? 0) - (before.delete ?? 0),
      getRequests: (after.get ?? 0) - (before.get ?? 0),
      leaked: driversLeft(server, namespace),
      cpuShare,
      leaderCpuMsPerPod: round(leaderCpuMs / pods, 2),
      series,
    };
  } finally {
    await stopFleet(fleet);
    cgroup?.remove();
  }
}

/**
 * Measures the raw loop first (same pod count, one watch as one informer holds), then one leader per
 * re-check mode.
 * @throws BenchTimeoutError when enqueueing or cleaning takes more than 5 minutes.
 */
export async function benchBurst(
  env: BenchEnv,
  opts: BurstOptions,
  progress: (msg: string) => void,
): Promise<BurstResult> {
  const trials: RawDeleteRate[] = [];
  for (let i = 1; i <= RAW_TRIALS; i++) {
    progress(`burst: raw DELETE loop over ${opts.pods} pods (${i}/${RAW_TRIALS})`);
    const namespace = `burst-raw-${i}`;
    const rawPods = createDrivers(env.server, namespace, opts.pods, () => env.now(), 1000);
    const trial = await measureRawDeleteRate(
      env.server,
      rawPods.map((p) => ({ namespace, name: p.name, uid: p.uid })),
      { concurrency: 16, watches: 1 },
    );
    progress(`  → ${trial.deletesPerSecond} DELETE/s`);
    trials.push(trial);
  }
  const sorted = [...trials].sort((a, b) => a.deletesPerSecond - b.deletesPerSecond);
  const raw = sorted[Math.floor(sorted.length / 2)] as RawDeleteRate;
  progress(`  → median ${raw.deletesPerSecond} DELETE/s`);
  const runs: BurstRun[] = [];
  for (const spec of opts.runs) {
    const limit = spec.asDeployed ? deploymentMemoryLimitBytes() : undefined;
    const cgroup =
      limit === undefined ? undefined : createMemoryCgroup(`sdc-bench-burst-${process.pid}`, limit);
    if (spec.asDeployed && !cgroup) {
      progress('burst: no memory cgroup could be created here: the leader as deployed is not measured');
      continue;
    }
    progress(
      `burst: ${opts.pods} pods due at once, one leader, no rate limit, recheck=${spec.recheck}, ` +
        `concurrency ${spec.concurrency}${cgroup ? `, as deployed (memory limit ${(limit ?? 0) / 2 ** 20} MiB)` : ''}`,
    );
    const run = await leaderRun(env, opts.pods, spec, cgroup, limit, raw.deletesPerSecond);
    progress(`  → ${run.podsPerSecond} pods/s (${run.ratioToRaw} of raw), enqueue ${run.enqueueMs} ms`);
    runs.push(run);
  }
  return { config: opts, raw, rawTrials: trials.map((t) => t.deletesPerSecond), runs };
}
