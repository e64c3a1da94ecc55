/**
 * The benchmark run: starts one bench environment (Redis, etcd, with `leadership` ZooKeeper, sandbox API
 * server), runs the selected
 * benchmarks one after another (one fleet of replica processes alive at a time), writes every raw
 * figure plus the machine's facts to `bench/results/<name>.json`, and renders `bench/REPORT.md` with
 * its SVG charts. `quick` sizes everything down to stay under two minutes (CI smoke).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, freemem, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchApiRate } from './api-rate.ts';
import { benchBurst } from './burst.ts';
import { benchCost } from './cost.ts';
import { benchDeletesPerPod } from './deletes-per-pod.ts';
import { benchFailover } from './failover.ts';
import {
  type BenchEnv,
  type BenchLeadership,
  onLeadership,
  redisInfo,
  round,
  startBenchEnv,
} from './harness.ts';
import { benchLateness } from './lateness.ts';
import { benchRedisFailover } from './redis-failover.ts';
import { renderReport } from './report.ts';
import type { BenchResults, MachineFacts } from './results.ts';
import { benchScale, type ScaleSize } from './scale.ts';

/** The benchmarks, in the order they run. */
export const BENCHMARKS = [
  'deletes',
  'failover',
  'lateness',
  'burst',
  'cost',
  'scale',
  'redis-failover',
] as const;
/**
 * What a run without `--only` runs: every benchmark but `redis-failover`, which starts its own Sentinel and
 * Cluster deployments and takes ~5 minutes (`npm run bench -- --only redis-failover`).
 */
export const DEFAULT_BENCHMARKS: readonly BenchmarkName[] = BENCHMARKS.filter((b) => b !== 'redis-failover');
/** One benchmark's name. */
export type BenchmarkName = (typeof BENCHMARKS)[number];

/** Options of {@link runBench}. */
export interface RunBenchOptions {
  /** Small sizes and short windows: under two minutes in all. */
  quick: boolean;
  /** Benchmarks to run (default all). */
  only?: readonly BenchmarkName[];
  /** Results file name without `.json` (default `quick` or `full`). */
  name?: string;
  /** Directory of the results JSON (default `bench/results`). */
  resultsDir?: string;
  /**
   * Where to write the Markdown report and its SVG charts; `null` = no report. Default: `bench/` (the
   * committed REPORT.md) for a full run of every benchmark, else `<resultsDir>/<name>/`, so that a quick or
   * partial run does not overwrite the full run's report.
   */
  reportDir?: string | null;
  /**
   * Sizes of the scale benchmark (default 100×3 and 300×3; 4×2 when quick). The 1,000 × 5 soak is
   * `--scale-sizes 1000x5` (bench/README.md).
   */
  scaleSizes?: readonly ScaleSize[];
  /** The scale benchmark's `informerScope` (`--scale-scope`; default the product's, `namespace`). */
  scaleScope?: 'namespace' | 'cluster';
  /** Run the scale benchmark's replicas as the Deployment does (`--scale-as-deployed`; ScaleOptions.asDeployed). */
  scaleAsDeployed?: boolean;
  /**
   * The leadership backends `deletes` and `failover` measure, one after the other on the same services
   * (`--leadership etcd,zookeeper`; default etcd alone). The other benchmarks run on the first.
   */
  leadership?: readonly BenchLeadership[];
  /** Clock, epoch ms. */
  now: () => number;
  /** Progress lines (default stderr). */
  progress?: (msg: string) => void;
}

/** Directory of this module: `bench/`. */
export const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));

function versionOf(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return (r.stdout || r.stderr || '').split('\n')[0]?.trim() ?? '';
}

async function machineFacts(env: BenchEnv, now: () => number): Promise<MachineFacts> {
  const cpu = cpus();
  const server = await redisInfo(env.redisClient, 'server');
  return {
    date: new Date(now()).toISOString(),
    cores: cpu.length,
    cpuModel: cpu[0]?.model ?? 'unknown',
    memoryMiB: Math.round(totalmem() / 1024 / 1024),
    freeMemoryMiB: Math.round(freemem() / 1024 / 1024),
    node: process.version,
    platform: `${process.platform} ${release()}`,
    redis: server.redis_version ?? 'unknown',
    etcd: versionOf('etcd', ['--version']),
    ...(env.zookeeper
      ? { zookeeper: `zookeeper ${versionOf('dpkg-query', ['-W', '-f', '$' + '{Version}', 'zookeeper'])}` }
      : {}),
    loadAverageAtStart: loadavg().map((x) => round(x, 2)),
    loadAverageAtEnd: [],
  };
}

/** The failover benchmark at the run's size, on `env`'s leadership backend. */
function failover(env: BenchEnv, q: boolean, progress: (msg: string) => void) {
  return benchFailover(
    env,
    {
      replicas: 3,
      trials: q ? 1 : 3,
      electionTtlSeconds: q ? 3 : 5,
      pods: 20,
      frozen: {
        replicas: 3,
        trials: q ? 1 : 3,
        electionTtlSeconds: 3,
        pods: 40,
        frozenMs: q ? 8_000 : 30_000,
      },
    },
    progress,
  );
}

/**
 * Runs the benchmarks and writes the results (and the report, unless `reportDir` is null).
 * @returns the results and the path of the JSON file.
 * @throws MissingBinaryError when redis-server or etcd is missing; BenchTimeoutError when a step hangs.
 */
export async function runBench(opts: RunBenchOptions): Promise<{ results: BenchResults; path: string }> {
  const progress = opts.progress ?? ((m: string) => process.stderr.write(`${m}\n`));
  const only = new Set(opts.only ?? DEFAULT_BENCHMARKS);
  const q = opts.quick;
  const started = performance.now();
  const backends: readonly BenchLeadership[] = opts.leadership?.length ? opts.leadership : ['etcd'];
  const env = await startBenchEnv(opts.now, backends.includes('zookeeper'));
  const results: BenchResults = {
    schema: 1,
    name: opts.name ?? (q ? 'quick' : 'full'),
    quick: q,
    machine: await machineFacts(env, opts.now),
    benchmarks: {},
    durationMs: 0,
  };
  try {
    for (const [i, backend] of backends.entries()) {
      const on = onLeadership(env, backend);
      const first = i === 0;
      if (backends.length > 1) progress(`leadership on ${backend}`);
      const byBackend: NonNullable<BenchResults['benchmarks']['byLeadership']>[BenchLeadership] = {};
      if (only.has('deletes')) {
        byBackend.deletesPerPod = await benchDeletesPerPod(
          on,
          {
            replicaCounts: q ? [3] : [1, 3, 5, 10],
            pods: q ? 40 : 200,
            // The other re-check modes once, on the first backend: they do not depend on it.
            otherRecheckModes: first ? ['live', 'cache'] : [],
          },
          progress,
        );
        if (first) results.benchmarks.deletesPerPod = byBackend.deletesPerPod;
      }
      if (only.has('failover')) {
        byBackend.failover = await failover(on, q, progress);
        if (first) results.benchmarks.failover = byBackend.failover;
      }
      if (backends.length > 1) {
        results.benchmarks.byLeadership ??= {};
        results.benchmarks.byLeadership[backend] = byBackend;
      }
    }
    if (only.has('lateness')) {
      results.benchmarks.lateness = await benchLateness(
        env,
        {
          replicas: 3,
          pods: q ? 100 : 1000,
          windowMs: q ? 10_000 : 60_000,
          rechecks: q ? ['resource-version'] : ['resource-version', 'live'],
        },
        progress,
      );
    }
    if (only.has('burst')) {
      results.benchmarks.burst = await benchBurst(
        env,
        {
          pods: q ? 1000 : 10_000,
          runs: q
            ? [{ recheck: 'resource-version', concurrency: 100 }]
            : [
                { recheck: 'resource-version', concurrency: 100 },
                { recheck: 'live', concurrency: 100 },
                { recheck: 'cache', concurrency: 100 },
                { recheck: 'resource-version', concurrency: 10 },
                { recheck: 'resource-version', concurrency: 100, asDeployed: true },
              ],
        },
        progress,
      );
      results.benchmarks.apiRate = await benchApiRate(
        env,
        { qps: 20, burst: 30, windowMs: q ? 5000 : 20_000, warmupMs: q ? 2000 : 3000 },
        progress,
      );
    }
    if (only.has('cost')) {
      results.benchmarks.cost = await benchCost(
        env,
        { pods: q ? 1000 : 10_000, replicas: 2, compiled: !q, steadyWindowMs: q ? 0 : 240_000 },
        progress,
      );
    }
    if (only.has('scale')) {
      results.benchmarks.scale = await benchScale(
        env,
        {
          sizes: [
            ...(opts.scaleSizes ??
              (q
                ? [{ targets: 4, replicas: 2 }]
                : [
                    { targets: 100, replicas: 3 },
                    { targets: 300, replicas: 3 },
                  ])),
          ],
          electionTtlSeconds: q ? 3 : 5,
          ...(opts.scaleScope ? { informerScope: opts.scaleScope } : {}),
          ...(opts.scaleAsDeployed ? { asDeployed: true } : {}),
          // A full idle cycle of a leader's worker (60 s: src/queue/queue-consumer.ts IDLE_CHECKS).
          idleWindowMs: q ? 5000 : 65_000,
          steadyAfterMs: q ? 1000 : 35_000,
          podsPerTarget: 2,
          dueWindowMs: q ? 5000 : 20_000,
        },
        progress,
      );
    }
    if (only.has('redis-failover')) {
      results.benchmarks.redisFailover = await benchRedisFailover(
        env,
        {
          modes: ['sentinel', 'cluster'],
          failovers: q ? 2 : 10,
          replicas: 3,
          retentionMs: 3000,
          podEveryMs: 150,
        },
        progress,
      );
    }
  } finally {
    results.machine.loadAverageAtEnd = loadavg().map((x) => round(x, 2));
    results.durationMs = Math.round(performance.now() - started);
    await env.stop();
  }
  const dir = opts.resultsDir ?? join(BENCH_DIR, 'results');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${results.name}.json`);
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`);
  if (opts.reportDir !== null) {
    const full =
      !opts.quick && (opts.only === undefined || DEFAULT_BENCHMARKS.every((b) => opts.only?.includes(b)));
    const reportDir = opts.reportDir ?? (full ? BENCH_DIR : join(dir, results.name));
    renderReport(results, reportDir, path);
    progress(`report: ${join(reportDir, 'REPORT.md')}`);
  }
  progress(`results: ${path} (${Math.round(results.durationMs / 1000)} s)`);
  return { results, path };
}
