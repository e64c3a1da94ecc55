/**
 * Benchmark: what watching many terminated driver pods costs. Coordinated replicas (and one baseline
 * replica beside them) watch a namespace that fills with terminated drivers whose cleanup is an hour
 * away, so every pod is cached by each informer and pending as a delayed job in Redis. Measured:
 * RSS per replica (/proc/<pid>/status VmRSS; target ≤ 150 MB at 10,000 pods), Redis memory per pending
 * job (INFO memory used_memory delta; target ≤ 1 KiB) and Redis commands per pod per replica while
 * enqueueing (INFO commandstats delta).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { queueName } from '../src/queue/job-identity.ts';
import type { ReplicaProcess } from '../src/sandbox/replica-process.ts';
import {
  BENCH_CONTEXT,
  type BenchEnv,
  commandDelta,
  createDrivers,
  processMemoryMiB,
  redisCommandCalls,
  redisInfo,
  round,
  settle,
  spawnFleet,
  stopFleet,
  until,
} from './harness.ts';

/** Options of {@link benchCost}. */
export interface CostOptions {
  pods: number;
  /** Coordinated replicas run from source (one baseline replica runs beside them). */
  replicas: number;
  /**
   * Also run one coordinated replica from the compiled build (`tsc -p tsconfig.build.json`, as the
   * container image runs it), whose memory is not inflated by Node's TypeScript stripping.
   */
  compiled: boolean;
}

/** Memory of one replica process, MiB. */
export interface ReplicaMemory {
  replica: string;
  mode: 'coordinated' | 'baseline';
  /** `source` = `node src/cli.ts` (type stripping); `compiled` = `node dist/src/cli.js`. */
  build: 'source' | 'compiled';
  /** VmRSS before the pods were created (informer synced on an empty namespace). */
  idleRssMiB: number;
  /** VmRSS once every pod is cached and enqueued. */
  rssMiB: number;
  /** VmHWM: the peak so far. */
  peakRssMiB: number;
  /** RssAnon: heaps and stacks of this process. */
  anonRssMiB: number;
  /** RssFile: file-backed pages, mostly the node binary's code (shared between processes). */
  fileRssMiB: number;
}

/** Result of {@link benchCost}. */
export interface CostResult {
  config: CostOptions & { retention: string };
  memory: ReplicaMemory[];
  /** Largest coordinated VmRSS, MiB (source and compiled). */
  maxCoordinatedRssMiB: number;
  /** VmRSS of the compiled coordinated replica, MiB (absent when not measured). */
  compiledRssMiB?: number;
  redisUsedMemoryBefore: number;
  redisUsedMemoryAfter: number;
  /** (used_memory after − before) / pods, bytes. */
  redisBytesPerPendingJob: number;
  /** Redis commands while the replicas enqueued the pods. */
  redisCommands: number;
  redisCommandsPerPodPerReplica: number;
  redisCommandsByName: Record<string, number>;
  /** Pod creation to every job delayed, ms. */
  enqueueMs: number;
}

/** Where {@link buildCompiled} puts the compiled tree (ignored by git; node_modules resolve from the repo). */
const BUILD_DIR = fileURLToPath(new URL('../.tmp/bench-dist/', import.meta.url));

/**
 * Compiles src/ and workers/ with the build configuration into `.tmp/bench-dist` and returns the path
 * of its `cli.js`.
 * @throws Error with the compiler's output when the build fails.
 */
export function buildCompiled(): string {
  const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
  const project = fileURLToPath(new URL('../tsconfig.build.json', import.meta.url));
  const r = spawnSync(process.execPath, [tsc, '-p', project, '--outDir', BUILD_DIR, '--sourceMap', 'false'], {
    encoding: 'utf8',
  });
  const cli = join(BUILD_DIR, 'src', 'cli.js');
  if (r.status !== 0 || !existsSync(cli))
    throw new Error(`bench: compiling for the cost benchmark failed\n${r.stdout}${r.stderr}`);
  return cli;
}

/**
 * Runs the cost measurement on its own namespace; leaves no process behind.
 * @throws BenchTimeoutError when the jobs are not all enqueued within 5 minutes.
 */
export async function benchCost(
  env: BenchEnv,
  opts: CostOptions,
  progress: (msg: string) => void,
): Promise<CostResult> {
  const namespace = 'cost';
  progress(`cost: ${opts.replicas} coordinated + 1 baseline replica watching ${opts.pods} terminated pods`);
  const common = { namespace, queuePrefix: namespace, env: { SDC_RETENTION: '3600s' } };
  const replicas: ReplicaProcess[] = [];
  try {
    replicas.push(
      ...(await spawnFleet(env, { ...common, mode: 'coordinated', count: opts.replicas, idPrefix: 'cost' })),
    );
    replicas.push(
      ...(await spawnFleet(env, { ...common, mode: 'baseline', count: 1, idPrefix: 'cost-baseline' })),
    );
    if (opts.compiled) {
      progress('  compiling (tsc -p tsconfig.build.json) for a replica run as the image runs it');
      const cliPath = buildCompiled();
      replicas.push(
        ...(await spawnFleet(env, {
          ...common,
          mode: 'coordinated',
          count: 1,
          idPrefix: 'cost-compiled',
          joinExisting: true,
          cliPath,
        })),
      );
    }
    const idle = new Map(replicas.map((r) => [r.id, processMemoryMiB(r.pid ?? 0).rssMiB]));
    const usedBefore = Number((await redisInfo(env.redisClient, 'memory')).used_memory);
    const cmdBefore = await redisCommandCalls(env.redisClient);
    const start = env.now();
    createDrivers(env.server, namespace, opts.pods, () => start, 3_600_000);
    const delayedKey = `${namespace}:${queueName({ context: BENCH_CONTEXT, namespace })}:delayed`;
    await until(
      'every job delayed',
      async () => (await env.redisClient.zcard(delayedKey)) >= opts.pods,
      300_000,
      100,
    );
    const enqueueMs = env.now() - start;
    // The followers enqueue the same pods (finding the job there): wait until Redis goes quiet.
    let commands = 0;
    const settleCount = async () => {
      commands = (await redisCommandCalls(env.redisClient)).total;
    };
    const poll = setInterval(() => void settleCount(), 200);
    try {
      await settleCount();
      await settle(() => commands, 2000, 120_000);
    } finally {
      clearInterval(poll);
    }
    const cmdAfter = await redisCommandCalls(env.redisClient);
    const usedAfter = Number((await redisInfo(env.redisClient, 'memory')).used_memory);
    const memory: ReplicaMemory[] = replicas.map((r) => ({
      replica: r.id,
      mode: r.id.startsWith('cost-baseline') ? 'baseline' : 'coordinated',
      build: r.id.startsWith('cost-compiled') ? 'compiled' : 'source',
      idleRssMiB: idle.get(r.id) ?? Number.NaN,
      ...processMemoryMiB(r.pid ?? 0),
    }));
    // The bench's own INFO calls are a handful; the rest are the replicas'.
    const redisCommands = cmdAfter.total - cmdBefore.total;
    const coordinated = replicas.filter((r) => !r.id.startsWith('cost-baseline')).length;
    const result: CostResult = {
      config: { ...opts, retention: '3600s' },
      memory,
      maxCoordinatedRssMiB: Math.max(...memory.filter((m) => m.mode === 'coordinated').map((m) => m.rssMiB)),
      ...(opts.compiled
        ? { compiledRssMiB: memory.find((m) => m.build === 'compiled')?.rssMiB ?? Number.NaN }
        : {}),
      redisUsedMemoryBefore: usedBefore,
      redisUsedMemoryAfter: usedAfter,
      redisBytesPerPendingJob: Math.round((usedAfter - usedBefore) / opts.pods),
      redisCommands,
      redisCommandsPerPodPerReplica: round(redisCommands / opts.pods / coordinated, 2),
      redisCommandsByName: commandDelta(cmdBefore.byCommand, cmdAfter.byCommand),
      enqueueMs,
    };
    progress(
      `  → RSS ${result.maxCoordinatedRssMiB} MiB (compiled ${result.compiledRssMiB ?? '—'} MiB), Redis ${result.redisBytesPerPendingJob} B/job, ` +
        `${result.redisCommandsPerPodPerReplica} commands/pod/replica`,
    );
    return result;
  } finally {
    await stopFleet(replicas);
  }
}
