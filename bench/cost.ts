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
import type { ReplicaProcess } from '../harness/sandbox/replica-process.ts';
import { queueName } from '../src/queue/job-identity.ts';
import {
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
import { createMemoryCgroup, deploymentMemoryLimitBytes } from './memory-cgroup.ts';

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
  /**
   * After the enqueue, how long to watch the replicas' memory for V8's memory reducer, ms (0: not at all).
   * V8 keeps the heap pages a burst grew resident until its memory reducer runs a memory-reducing GC, which
   * it does ~100 s after the last full GC in a quiet process; the watch ends early once every coordinated
   * replica's RSS has dropped.
   */
  steadyWindowMs: number;
}

/** Memory of one replica process, MiB. */
export interface ReplicaMemory {
  replica: string;
  mode: 'coordinated' | 'baseline';
  /** `source` = `node src/cli.ts` (type stripping); `compiled` = `node dist/src/cli.js`. */
  build: 'source' | 'compiled';
  /**
   * The memory limit of the cgroup the replica ran in, bytes: the Deployment's `limits.memory`, from which
   * Node sizes its heap as in the container. Absent: no limit (V8's defaults for this machine's memory).
   */
  memoryLimitBytes?: number;
  /** VmRSS before the pods were created (informer synced on an empty namespace). */
  idleRssMiB: number;
  /** VmRSS once every pod is cached and enqueued (V8 still holds the heap the enqueue burst grew). */
  rssMiB: number;
  /**
   * At the end of the steady window (CostOptions.steadyWindowMs): VmRSS and its split, and when the RSS first
   * fell ≥ 10 % below {@link ReplicaMemory.rssMiB} (ms after the enqueue settled; absent when it did not).
   */
  steady?: { rssMiB: number; anonRssMiB: number; fileRssMiB: number; droppedAfterMs?: number };
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
  /** Largest coordinated VmRSS right after the enqueue, MiB (source and compiled). */
  maxCoordinatedRssMiB: number;
  /** VmRSS of the compiled coordinated replica without a memory limit, MiB (absent when not measured). */
  compiledRssMiB?: number;
  /**
   * VmRSS of the compiled coordinated replica run as the image runs in the Deployment: in a cgroup limited
   * to the Deployment's `limits.memory` (absent when this machine does not allow creating one).
   */
  deployedRssMiB?: number;
  /** Steady VmRSS of the compiled replica without a limit / as deployed, MiB (with a steady window). */
  compiledSteadyRssMiB?: number;
  deployedSteadyRssMiB?: number;
  /** Why there is no {@link CostResult.deployedRssMiB} when the compiled replica was measured. */
  deployedNote?: string;
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
  let deployed: { limitBytes: number; remove: () => void } | undefined;
  let deployedNote: string | undefined;
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
      const compiled = { ...common, mode: 'coordinated', count: 1, joinExisting: true, cliPath } as const;
      replicas.push(...(await spawnFleet(env, { ...compiled, idPrefix: 'cost-compiled' })));
      const limitBytes = deploymentMemoryLimitBytes();
      const cgroup = createMemoryCgroup(`sdc-bench-${process.pid}`, limitBytes);
      if (cgroup) {
        deployed = { limitBytes, remove: cgroup.remove };
        replicas.push(
          ...(await spawnFleet(env, { ...compiled, idPrefix: 'cost-deployed', cgroupFor: () => cgroup.dir })),
        );
      } else {
        deployedNote = 'no memory cgroup could be created here (needs root and a writable cgroup fs)';
        progress(`  ${deployedNote}: the replica as deployed is not measured`);
      }
    }
    const idle = new Map(replicas.map((r) => [r.id, processMemoryMiB(r.pid ?? 0).rssMiB]));
    const usedBefore = Number((await redisInfo(env.redisClient, 'memory')).used_memory);
    const cmdBefore = await redisCommandCalls(env.redisClient);
    const start = env.now();
    createDrivers(env.server, namespace, opts.pods, () => start, 3_600_000);
    const delayedKey = `${namespace}:${queueName({ cluster: env.server.clusterName, namespace })}:delayed`;
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
    const afterEnqueue = new Map(replicas.map((r) => [r.id, processMemoryMiB(r.pid ?? 0)]));
    const steady = await watchSteadyMemory(replicas, afterEnqueue, opts.steadyWindowMs, env.now, progress);
    const memory: ReplicaMemory[] = replicas.map((r) => ({
      replica: r.id,
      mode: r.id.startsWith('cost-baseline') ? 'baseline' : 'coordinated',
      build: r.id.startsWith('cost-compiled') || r.id.startsWith('cost-deployed') ? 'compiled' : 'source',
      ...(r.id.startsWith('cost-deployed') && deployed ? { memoryLimitBytes: deployed.limitBytes } : {}),
      idleRssMiB: idle.get(r.id) ?? Number.NaN,
      ...(afterEnqueue.get(r.id) ?? processMemoryMiB(r.pid ?? 0)),
      ...(steady.has(r.id) ? { steady: steady.get(r.id) } : {}),
    }));
    const steadyOf = (prefix: string) => memory.find((m) => m.replica.startsWith(prefix))?.steady?.rssMiB;
    // The bench's own INFO calls are a handful; the rest are the replicas'.
    const redisCommands = cmdAfter.total - cmdBefore.total;
    const coordinated = replicas.filter((r) => !r.id.startsWith('cost-baseline')).length;
    const result: CostResult = {
      config: { ...opts, retention: '3600s' },
      memory,
      maxCoordinatedRssMiB: Math.max(...memory.filter((m) => m.mode === 'coordinated').map((m) => m.rssMiB)),
      ...(opts.compiled
        ? {
            compiledRssMiB: memory.find((m) => m.replica.startsWith('cost-compiled'))?.rssMiB ?? Number.NaN,
          }
        : {}),
      ...(deployed
        ? { deployedRssMiB: memory.find((m) => m.replica.startsWith('cost-deployed'))?.rssMiB ?? Number.NaN }
        : {}),
      ...(deployedNote ? { deployedNote } : {}),
      ...(steadyOf('cost-compiled') !== undefined ? { compiledSteadyRssMiB: steadyOf('cost-compiled') } : {}),
      ...(steadyOf('cost-deployed') !== undefined ? { deployedSteadyRssMiB: steadyOf('cost-deployed') } : {}),
      redisUsedMemoryBefore: usedBefore,
      redisUsedMemoryAfter: usedAfter,
      redisBytesPerPendingJob: Math.round((usedAfter - usedBefore) / opts.pods),
      redisCommands,
      redisCommandsPerPodPerReplica: round(redisCommands / opts.pods / coordinated, 2),
      redisCommandsByName: commandDelta(cmdBefore.byCommand, cmdAfter.byCommand),
      enqueueMs,
    };
    const figures = [
      result.compiledRssMiB === undefined ? '' : `compiled ${result.compiledRssMiB} MiB`,
      result.deployedRssMiB === undefined ? '' : `as deployed ${result.deployedRssMiB} MiB`,
      result.compiledSteadyRssMiB === undefined ? '' : `compiled steady ${result.compiledSteadyRssMiB} MiB`,
      result.deployedSteadyRssMiB === undefined
        ? ''
        : `as deployed steady ${result.deployedSteadyRssMiB} MiB`,
    ].filter(Boolean);
    progress(
      `  → RSS ${result.maxCoordinatedRssMiB} MiB${figures.length ? ` (${figures.join(', ')})` : ''}, ` +
        `Redis ${result.redisBytesPerPendingJob} B/job, ${result.redisCommandsPerPodPerReplica} commands/pod/replica`,
    );
    return result;
  } finally {
    await stopFleet(replicas);
    deployed?.remove();
  }
}

/**
 * Samples every replica's memory each second for up to `windowMs` (ms), ending 5 s after every coordinated
 * replica's RSS has fallen ≥ 10 % below its value in `afterEnqueue` (V8's memory reducer ran). Returns each
 * replica's last sample and when it dropped; empty when `windowMs` is 0.
 */
async function watchSteadyMemory(
  replicas: readonly ReplicaProcess[],
  afterEnqueue: ReadonlyMap<string, { rssMiB: number }>,
  windowMs: number,
  now: () => number,
  progress: (msg: string) => void,
): Promise<Map<string, NonNullable<ReplicaMemory['steady']>>> {
  const out = new Map<string, NonNullable<ReplicaMemory['steady']>>();
  if (windowMs <= 0) return out;
  progress(
    `  watching memory for up to ${windowMs / 1000} s (until V8's memory reducer has run in each replica)`,
  );
  const start = now();
  const dropped = new Map<string, number>();
  const coordinated = replicas.filter((r) => !r.id.startsWith('cost-baseline'));
  for (;;) {
    for (const r of replicas) {
      const m = processMemoryMiB(r.pid ?? 0);
      const before = afterEnqueue.get(r.id)?.rssMiB ?? Number.NaN;
      if (!dropped.has(r.id) && m.rssMiB <= before * 0.9) dropped.set(r.id, now() - start);
      const at = dropped.get(r.id);
      out.set(r.id, {
        rssMiB: m.rssMiB,
        anonRssMiB: m.anonRssMiB,
        fileRssMiB: m.fileRssMiB,
        ...(at === undefined ? {} : { droppedAfterMs: at }),
      });
    }
    const lastDrop = Math.max(...coordinated.map((r) => dropped.get(r.id) ?? Number.POSITIVE_INFINITY));
    if (now() - start >= windowMs || now() - start >= lastDrop + 5000) return out;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
