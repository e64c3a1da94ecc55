/**
 * What every benchmark needs: a bench environment (real Redis, real etcd — or a real ZooKeeper — and one
 * sandbox API server in this process), fleets of replica processes (coordinated `run` or the uncoordinated baseline), driver
 * pods with chosen deadlines, and small measuring helpers (polling, quiet periods, percentiles, RSS,
 * Redis INFO). Times are epoch ms from the injected clock unless a name says otherwise.
 */

import { readFileSync } from 'node:fs';
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { spawnBaselineReplica } from '../harness/baseline/baseline-replica.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../harness/sandbox/apiserver/server.ts';
import {
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../harness/sandbox/local-services.ts';
import { type LocalZooKeeper, startZooKeeper } from '../harness/sandbox/local-zookeeper.ts';
import { type ReplicaProcess, spawnReplica } from '../harness/sandbox/replica-process.ts';
import { sparkDriverPod } from '../harness/sandbox/workload.ts';
import type { RecheckMode } from '../src/config/schema.ts';

/** A benchmark step did not reach its condition in time. */
export class BenchTimeoutError extends Error {
  override name = 'BenchTimeoutError';
}

/** The kubeconfig context and namespace every benchmark cleans. */
export const BENCH_CONTEXT = 'bench';

/** Where a bench fleet elects its leaders. */
export type BenchLeadership = 'etcd' | 'zookeeper';

/** Real Redis and etcd processes plus one sandbox API server, shared by the benchmarks of one run. */
export interface BenchEnv {
  readonly redis: LocalService;
  readonly etcd: LocalEtcd;
  /** A standalone ZooKeeper server, when the run measures on ZooKeeper too. */
  readonly zookeeper: LocalZooKeeper | undefined;
  /** Where the fleets spawned through this environment elect their leaders (see {@link onLeadership}). */
  readonly leadership: BenchLeadership;
  readonly server: SandboxApiServer;
  /** A plain Redis client for INFO and counts (not used by the replicas). */
  readonly redisClient: Redis;
  /** Clock, epoch ms (the sandbox server's clock is the same wall time). */
  readonly now: () => number;
  /** Replicas spawned through {@link spawnFleet}, killed by {@link BenchEnv.stop} if still running. */
  readonly spawned: ReplicaProcess[];
  stop(): Promise<void>;
}

/**
 * Starts Redis, etcd (and, with `withZooKeeper`, a ZooKeeper server) and the sandbox API server
 * (`watchWindow` sized for 10,000-pod runs). Its fleets elect on etcd; {@link onLeadership} for ZooKeeper.
 * @throws MissingBinaryError when redis-server, etcd or ZooKeeper is not installed.
 */
export async function startBenchEnv(now: () => number, withZooKeeper = false): Promise<BenchEnv> {
  const [redis, etcd, zookeeper] = await Promise.all([
    startRedis(),
    startEtcd(),
    withZooKeeper ? startZooKeeper() : undefined,
  ]);
  const server = await startSandboxApiServer({ contextName: BENCH_CONTEXT, watchWindow: 100_000 });
  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 3 });
  const spawned: ReplicaProcess[] = [];
  return {
    redis,
    etcd,
    zookeeper,
    leadership: 'etcd',
    server,
    redisClient,
    now,
    spawned,
    async stop() {
      for (const r of spawned)
        if (r.child.exitCode === null && r.child.signalCode === null) r.kill('SIGKILL');
      await Promise.all(spawned.map((r) => r.exited));
      redisClient.disconnect();
      await server.close();
      await Promise.all([redis.stop(), etcd.stop(), zookeeper?.stop()]);
    },
  };
}

/**
 * The same environment with its fleets electing on `leadership` (the services, the API server and the
 * spawned list are shared). @throws Error when ZooKeeper is asked for and the environment has none.
 */
export function onLeadership(env: BenchEnv, leadership: BenchLeadership): BenchEnv {
  if (leadership === 'zookeeper' && !env.zookeeper)
    throw new Error('this bench environment has no ZooKeeper (startBenchEnv(now, true))');
  return { ...env, leadership };
}

/** `coordinated` = `spark-driver-cleaner run`; `baseline` = every replica deletes on its own timer. */
export type FleetMode = 'coordinated' | 'baseline';

/** Options of {@link spawnFleet}. */
export interface FleetSpec {
  mode: FleetMode;
  /** Number of replica processes. */
  count: number;
  /** Namespace (in {@link BENCH_CONTEXT}) the replicas clean. */
  namespace: string;
  /** Redis key prefix of this fleet's queues, so runs do not share jobs or tombstones. */
  queuePrefix: string;
  /** Extra `SDC_*` variables (retention, QPS, recheck …). */
  env?: Record<string, string>;
  /** Replica id prefix (default the mode). */
  idPrefix?: string;
  /** Called with every log line of every replica. */
  onLine?: (replicaId: string, line: Record<string, unknown>) => void;
  /** Run this CLI entry point (e.g. a compiled `cli.js`) instead of `src/cli.ts`. */
  cliPath?: string;
  /**
   * The cgroup directory a replica joins before Node starts, by its id (bench/memory-cgroup.ts): one for all, or
   * a container each, as in the Deployment. Absent, or undefined for an id: none.
   */
  cgroupFor?: (replicaId: string) => string | undefined;
  /** The target already has a leader: do not wait for one of these replicas to be elected. */
  joinExisting?: boolean;
}

/** The `SDC_*` environment of a bench replica: info logs, a free HTTP port, short retention. */
export function replicaEnv(env: BenchEnv, spec: Omit<FleetSpec, 'mode' | 'count'>): Record<string, string> {
  return {
    KUBECONFIG: env.server.kubeconfigPath,
    SDC_TARGETS: `${BENCH_CONTEXT}:${spec.namespace}`,
    SDC_REDIS_URL: env.redis.url,
    ...(env.leadership === 'zookeeper' && env.zookeeper
      ? { SDC_ETCD_ENDPOINTS: '', SDC_ZOOKEEPER: env.zookeeper.connect }
      : { SDC_ETCD_ENDPOINTS: env.etcd.endpoints.join(',') }),
    SDC_QUEUE_PREFIX: spec.queuePrefix,
    SDC_HTTP_PORT: '0',
    SDC_LOG_LEVEL: 'info',
    SDC_RETENTION: '1s',
    SDC_ELECTION_TTL_SECONDS: '5',
    SDC_RETRY_BASE_DELAY: '200ms',
    ...spec.env,
  };
}

/** Spawns one replica process of `spec.mode`; it is registered for cleanup in `env.spawned`. */
export function spawnOne(env: BenchEnv, spec: FleetSpec, id: string): ReplicaProcess {
  const cgroupDir = spec.cgroupFor?.(id);
  const opts = {
    id,
    env: replicaEnv(env, spec),
    keepLines: 500,
    ...(spec.cliPath ? { cliPath: spec.cliPath } : {}),
    ...(cgroupDir ? { cgroupDir } : {}),
    onLine: (line: Record<string, unknown>) => spec.onLine?.(id, line),
  };
  const r = spec.mode === 'baseline' ? spawnBaselineReplica(opts) : spawnReplica(opts);
  env.spawned.push(r);
  return r;
}

/**
 * Spawns `spec.count` replicas and waits until each has logged 'replica started' (informers synced)
 * and, when coordinated, one of them 'elected leader'.
 * @throws Error from `waitForLine` when a replica exits or is not ready within `timeoutMs` (ms).
 */
export async function spawnFleet(
  env: BenchEnv,
  spec: FleetSpec,
  timeoutMs = 120_000,
): Promise<ReplicaProcess[]> {
  const prefix = spec.idPrefix ?? spec.mode;
  const replicas = Array.from({ length: spec.count }, (_, i) => spawnOne(env, spec, `${prefix}-${i + 1}`));
  await Promise.all(replicas.map((r) => r.waitForLine((l) => l.msg === 'replica started', timeoutMs)));
  if (spec.mode === 'coordinated' && !spec.joinExisting) {
    await Promise.any(replicas.map((r) => r.waitForLine((l) => l.msg === 'elected leader', timeoutMs)));
  }
  return replicas;
}

/** SIGTERM to every replica, SIGKILL after `graceMs` (default 10,000 ms); resolves when all exited. */
export async function stopFleet(replicas: readonly ReplicaProcess[], graceMs = 10_000): Promise<void> {
  const running = replicas.filter((r) => r.child.exitCode === null && r.child.signalCode === null);
  for (const r of running) r.kill('SIGTERM');
  const timer = setTimeout(() => {
    for (const r of running) if (r.child.exitCode === null) r.kill('SIGKILL');
  }, graceMs);
  await Promise.all(running.map((r) => r.exited));
  clearTimeout(timer);
}

/** One created driver pod and its deadline. */
export interface BenchPod {
  name: string;
  uid: string;
  /** finishedAt + retention, epoch ms. */
  deadlineMs: number;
}

/**
 * Creates `n` terminated driver pods in `namespace` through the in-process API (not logged as API
 * requests). Pod `i` finished at `finishedAtMs(i)` (epoch ms, whole seconds are kept by RFC 3339 so
 * the value is floored to the second); its deadline is that plus `retentionMs`.
 */
/** A short tag of a re-check mode for namespaces and queue prefixes (which allow 32 characters). */
export const recheckTag = (r: RecheckMode): string => (r === 'resource-version' ? 'rv' : r);

export function createDrivers(
  server: SandboxApiServer,
  namespace: string,
  n: number,
  finishedAtMs: (i: number) => number,
  retentionMs: number,
): BenchPod[] {
  const out: BenchPod[] = [];
  for (let i = 0; i < n; i++) {
    // RFC 3339 in the pod keeps whole seconds: floor here so our deadline equals the replica's.
    const finished = Math.floor(finishedAtMs(i) / 1000) * 1000;
    const pod: V1Pod = server.pods.create(
      sparkDriverPod({ namespace, phase: i % 4 === 3 ? 'Failed' : 'Succeeded', nowMs: finished }),
    );
    out.push({
      name: pod.metadata?.name ?? '',
      uid: pod.metadata?.uid ?? '',
      deadlineMs: finished + retentionMs,
    });
  }
  return out;
}

/** Number of driver pods left in a namespace. */
export function driversLeft(server: SandboxApiServer, namespace: string): number {
  return server.pods.list(namespace).filter((p) => p.metadata?.labels?.['spark-role'] === 'driver').length;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Polls `check` every `everyMs` (default 50 ms) until it returns a truthy value, which it returns.
 * @throws BenchTimeoutError naming `what` after `timeoutMs` (ms).
 */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs: number,
  everyMs = 50,
): Promise<NonNullable<T>> {
  const start = performance.now();
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (performance.now() - start > timeoutMs)
      throw new BenchTimeoutError(`benchmark: ${what} not reached within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/**
 * Waits until `value()` has not changed for `quietMs` (ms), e.g. the DELETE counter once the last
 * straggler (a second replica's DELETE) would have arrived. Gives up after `timeoutMs`.
 */
export async function settle(value: () => number, quietMs: number, timeoutMs = 60_000): Promise<number> {
  let last = value();
  let since = performance.now();
  const start = since;
  while (performance.now() - since < quietMs && performance.now() - start < timeoutMs) {
    await sleep(100);
    const v = value();
    if (v !== last) {
      last = v;
      since = performance.now();
    }
  }
  return last;
}

/** The p-th percentile (0–100) of `values` by nearest rank; NaN for an empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/**
 * Resident memory of a process from /proc/<pid>/status, MiB: current (VmRSS), peak (VmHWM), and VmRSS
 * split into anonymous memory (RssAnon: heaps, stacks) and file-backed pages (RssFile: mostly the node
 * binary's code, shared by every Node process on the machine).
 */
export function processMemoryMiB(pid: number): {
  rssMiB: number;
  peakRssMiB: number;
  anonRssMiB: number;
  fileRssMiB: number;
} {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    rssMiB: round(kib('VmRSS') / 1024, 1),
    peakRssMiB: round(kib('VmHWM') / 1024, 1),
    anonRssMiB: round(kib('RssAnon') / 1024, 1),
    fileRssMiB: round(kib('RssFile') / 1024, 1),
  };
}

/** CPU time (user + system) a process has used so far, ms, from /proc/<pid>/stat (100 ticks/s). */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces): state is field 3, utime 14, stime 15.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** CPU time Redis has used so far (INFO cpu used_cpu_user + used_cpu_sys), ms. */
export async function redisCpuMs(redis: Redis): Promise<number> {
  const cpu = await redisInfo(redis, 'cpu');
  return Math.round((Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys)) * 1000);
}

/** CPU time of this process (the bench and its in-process sandbox API server), ms. */
export function ownCpuMs(): number {
  const u = process.cpuUsage();
  return Math.round((u.user + u.system) / 1000);
}

/** Rounds to `digits` decimals. */
export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Parses `INFO <section>` into a field map. */
export async function redisInfo(redis: Redis, section: string): Promise<Record<string, string>> {
  const text = await redis.info(section);
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/**
 * Commands Redis has executed (sum of `calls` in INFO commandstats) and the calls per command, leaving
 * out INFO itself: that is the bench asking, not the replicas.
 */
export async function redisCommandCalls(
  redis: Redis,
): Promise<{ total: number; byCommand: Record<string, number> }> {
  const info = await redisInfo(redis, 'commandstats');
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const [k, v] of Object.entries(info)) {
    const calls = Number(/calls=(\d+)/.exec(v)?.[1] ?? 0);
    const name = k.replace(/^cmdstat_/, '');
    if (name === 'info') continue;
    byCommand[name] = calls;
    total += calls;
  }
  return { total, byCommand };
}

/** `after − before` per command (commands whose count did not change are left out). */
export function commandDelta(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

/**
 * Samples `read()` every `everyMs` (default 100 ms) until stopped: a time series of a counter (e.g.
 * DELETE requests received), as `[ms since start, value]` pairs.
 */
export function sampleSeries(read: () => number, now: () => number, everyMs = 100) {
  const start = now();
  const points: [number, number][] = [[0, read()]];
  const timer = setInterval(() => points.push([now() - start, read()]), everyMs);
  return {
    startMs: start,
    points,
    stop(): [number, number][] {
      clearInterval(timer);
      points.push([now() - start, read()]);
      return points;
    },
  };
}
