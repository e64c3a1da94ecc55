/**
 * The demo, start to finish: Redis and etcd or ZooKeeper (launched, or REDIS_URL / ETCD_ENDPOINTS / ZOOKEEPER), two sandbox API
 * servers (contexts `cluster-a`, `cluster-b`, two namespaces each), `--replicas` replica processes, and
 * the synthetic Spark workload; a progress display while it runs; a summary when every driver has been
 * cleaned or `--duration` has passed. `--kill-leader-at` SIGKILLs the leader of one target mid-run;
 * `--baseline` runs the uncoordinated replicas instead; `--compare` runs both on the same workload.
 *
 * Everything started is registered on a {@link Teardown} and stopped on every way out, Ctrl-C included.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SparkWorkload, startSparkWorkload } from '../sandbox/workload.ts';
import {
  type DemoCluster,
  type DemoLeadership,
  type DemoServices,
  startClusters,
  startServices,
} from './environment.ts';
import { type Fleet, startFleet } from './fleet.ts';
import { createProgress, type Progress } from './progress.ts';
import { ReplicaTally } from './replica-tally.ts';
import {
  computeSummary,
  type DemoMode,
  type DemoSummary,
  deleteRatio,
  formatComparison,
  formatSummaryTable,
  type TerminatedDriverState,
  verdict,
} from './summary.ts';
import { Teardown } from './teardown.ts';

/** Options of {@link runDemo}; all validated by the command. */
export interface DemoOptions {
  /** Replica processes (≥ 1). */
  replicas: number;
  /** Driver pods to create in total, or undefined for "until --duration". */
  pods: number | undefined;
  /** Driver creations per second, over both clusters. */
  ratePerSecond: number;
  /** Retention period after a driver finished, ms. */
  retentionMs: number;
  /** Stop after this long (from the workload's start), ms; undefined = when every driver is cleaned. */
  durationMs: number | undefined;
  /** Print one JSON object instead of the table. */
  json: boolean;
  /** SIGKILL the leader of the first target this long after the workload started, ms. */
  killLeaderAtMs: number | undefined;
  /** Coordinated (the product), the uncoordinated baseline, or both back to back. */
  mode: DemoMode | 'compare';
  /** Leader lease TTL (etcd) or session timeout (ZooKeeper), s (short, so a failover shows within seconds). */
  electionTtlSeconds: number;
  /** Where the replicas elect their leaders (default etcd). */
  leadership?: DemoLeadership;
  /** Seed of the workload's outcome mix (the same in both runs of --compare). */
  seed: number;
  /** Write each replica's log lines under `<logDir>/<mode>/<replica>.log` (kept after the demo). */
  logDir?: string;
}

/** Where the demo writes and what it reads. */
export interface DemoIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Whether stderr is a terminal (progress redrawn in place). */
  tty: boolean;
  env: Readonly<Record<string, string | undefined>>;
  /** Clock, epoch ms. */
  now: () => number;
}

/** What a driver does in the demo's workload: pending 0.5 s, running 2 s, one executor. */
const DRIVER_PENDING_MS = 500;
const DRIVER_RUN_MS = 2000;
/**
 * A terminated driver still present this long after its deadline counts as leaked. It covers a failover
 * (lease TTL, then the new leader's reconcile) and BullMQ's stalled-job recovery of a job that was
 * active on a SIGKILLed leader (lock duration 30 s).
 */
const LEAK_GRACE_MS = 45_000;
/** How long after the end condition we wait for the replicas' last outcome lines, ms. */
const SETTLE_MS = 10_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A deterministic PRNG in [0, 1) (mulberry32), so both runs of --compare get the same outcome mix. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** One run's result. */
interface RunResult {
  summary: DemoSummary;
  elapsedMs: number;
  killed?: string;
}

interface RunContext {
  opts: DemoOptions;
  io: DemoIo;
  teardown: Teardown;
  progress: Progress;
  services: DemoServices | undefined;
  runIndex: number;
}

function replicaEnv(mode: DemoMode, ctx: RunContext, kubeconfig: string, targets: string[]) {
  const common = {
    KUBECONFIG: kubeconfig,
    SDC_TARGETS: targets.join(','),
    SDC_RETENTION: String(ctx.opts.retentionMs),
  };
  if (mode === 'baseline') return { ...common, SDC_LOG_LEVEL: 'info' };
  return {
    ...common,
    SDC_REDIS_URL: ctx.services?.redisUrl ?? '',
    SDC_ETCD_ENDPOINTS: ctx.services?.etcdEndpoints.join(',') ?? '',
    ...(ctx.services?.zookeeper ? { SDC_ZOOKEEPER: ctx.services.zookeeper } : {}),
    SDC_ELECTION_TTL_SECONDS: String(ctx.opts.electionTtlSeconds),
    // Queues of this run only: a shared REDIS_URL or the other run of --compare must not interfere.
    SDC_QUEUE_PREFIX: `sdc-demo-${process.pid}-${ctx.runIndex}`,
    SDC_HTTP_PORT: '0',
    // No-op outcomes are logged at debug: the summary counts them.
    SDC_LOG_LEVEL: 'debug',
    SDC_RETRY_BASE_DELAY: '500ms',
    SDC_RETRY_MAX_DELAY: '10s',
  };
}

function startWorkloads(clusters: DemoCluster[], opts: DemoOptions): SparkWorkload[] {
  const random = seededRandom(opts.seed);
  return clusters.map((c, i) => {
    // Split the pods and the rate between the clusters; the first gets the odd pod.
    const pods =
      opts.pods === undefined
        ? undefined
        : Math.floor(opts.pods / clusters.length) + (i < opts.pods % clusters.length ? 1 : 0);
    return startSparkWorkload(c.server, {
      namespaces: [...c.namespaces],
      pods,
      ratePerSecond: opts.ratePerSecond / clusters.length,
      pendingMs: DRIVER_PENDING_MS,
      runMs: DRIVER_RUN_MS,
      executorsPerDriver: 1,
      random,
    });
  });
}

/** Every terminated driver of the run, and whether it is still in its API server. */
function terminatedStates(
  clusters: DemoCluster[],
  workloads: SparkWorkload[],
  withDeletes: boolean,
): TerminatedDriverState[] {
  return clusters.flatMap((c, i) => {
    const deletes = withDeletes ? c.server.requests.deletesByUid() : undefined;
    return (workloads[i]?.stats.terminated ?? []).map((d) => ({
      uid: d.uid,
      finishedAtMs: d.finishedAtMs,
      present: c.server.pods.get(d.namespace, d.name)?.metadata?.uid === d.uid,
      deleteRequests: deletes?.get(d.uid)?.length ?? 0,
    }));
  });
}

async function runOnce(mode: DemoMode, ctx: RunContext): Promise<RunResult> {
  const { opts, io, teardown, progress } = ctx;
  const dir = mkdtempSync(join(tmpdir(), 'sdc-demo-'));
  const removeDir = teardown.add('temporary directory', () => rmSync(dir, { recursive: true, force: true }));
  const env = await startClusters(dir);
  const closeClusters = teardown.add('sandbox API servers', () => env.close());
  const { clusters } = env;
  const targets = clusters.flatMap((c) => c.namespaces.map((ns) => `${c.context}:${ns}`));
  progress.note(
    `demo (${mode}): sandbox API servers ${clusters.map((c) => `${c.context} ${c.server.url}`).join(', ')}; ` +
      `targets ${targets.join(', ')}`,
  );

  const tally = new ReplicaTally(io.now);
  const logDir = opts.logDir ? join(opts.logDir, mode) : undefined;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const fleet: Fleet = startFleet({
    logDir,
    mode,
    count: opts.replicas,
    env: replicaEnv(mode, ctx, env.kubeconfig, targets),
    tally,
    now: io.now,
  });
  const stopFleet = teardown.add('replicas', () => fleet.stop());
  progress.note(`demo (${mode}): starting ${opts.replicas} replica processes…`);
  await fleet.waitReady(targets);
  for (const r of fleet.replicas) {
    const url = tally.urls.get(r.id);
    progress.note(
      url
        ? `  ${r.id} (pid ${r.pid})  ${url}  leaders ${url}/api/v1/leaders · metrics ${url}/metrics · dashboard ${url}/ui`
        : `  ${r.id} (pid ${r.pid})  uncoordinated: its own informers and timers, no HTTP server`,
    );
  }

  const workloads = startWorkloads(clusters, opts);
  const stopWorkloads = () => {
    for (const w of workloads) w.stop();
  };
  teardown.add('workload', stopWorkloads);
  let workloadsDone = false;
  void Promise.all(workloads.map((w) => w.done)).then(() => {
    workloadsDone = true;
  });
  const startMs = io.now();
  const estimateMs =
    opts.pods === undefined
      ? 0
      : (opts.pods / opts.ratePerSecond) * 1000 + DRIVER_PENDING_MS + DRIVER_RUN_MS + opts.retentionMs;
  // Without --duration, a safety net: whatever happens, the demo ends and reports what leaked.
  const endAt = startMs + (opts.durationMs ?? estimateMs + 120_000);
  const firstTarget = targets[0] as string;
  let killed: { replica: string; target: string; atMs: number } | undefined;

  for (;;) {
    const now = io.now();
    const states = terminatedStates(clusters, workloads, false);
    const cleaned = states.filter((s) => !s.present).length;
    const created = workloads.reduce((n, w) => n + w.stats.created, 0);
    progress.update({
      mode,
      elapsedMs: now - startMs,
      created,
      total: opts.pods,
      terminated: states.length,
      cleaned,
      pending: states.length - cleaned,
      deleteRequests: clusters.reduce((n, c) => n + c.server.requests.deleteRequestTotal(), 0),
      leaders: mode === 'baseline' ? {} : Object.fromEntries(targets.map((t) => [t, tally.leaderOf(t)])),
    });
    if (mode === 'coordinated' && opts.killLeaderAtMs !== undefined && !killed) {
      const leader = now - startMs >= opts.killLeaderAtMs ? tally.leaderOf(firstTarget) : undefined;
      if (leader) {
        fleet.kill(leader, 'SIGKILL');
        tally.markDead(leader);
        killed = { replica: leader, target: firstTarget, atMs: now };
        progress.note(
          `demo: SIGKILL ${leader}, the leader of ${firstTarget}, at ${((now - startMs) / 1000).toFixed(1)} s`,
        );
      }
    }
    const failedOver =
      !killed || tally.elections.some((e) => e.target === killed?.target && e.atMs >= killed.atMs);
    const killDue = mode === 'coordinated' && opts.killLeaderAtMs !== undefined;
    if (now >= endAt) break;
    // Everything cleaned: done, unless a killed leader's target has not failed over yet. A kill time not reached
    // by then is not waited for (the pods it would show failing over are all gone).
    if (workloadsDone && states.length - cleaned === 0 && (!killDue || !killed || failedOver)) {
      if (killDue && !killed)
        progress.note(
          `demo: every pod was cleaned at ${((now - startMs) / 1000).toFixed(1)} s, before --kill-leader-at ${
            (opts.killLeaderAtMs ?? 0) / 1000
          } s: no leader killed (use a smaller --kill-leader-at or more --pods)`,
        );
      break;
    }
    await sleep(io.tty ? 250 : 500);
  }
  stopWorkloads();

  // Let the replicas' last outcome lines arrive: a pod can be gone before its leader has logged it.
  const settleUntil = io.now() + SETTLE_MS;
  for (;;) {
    const states = terminatedStates(clusters, workloads, false);
    const deleted = states.filter((s) => !s.present).length;
    const due = states.filter((s) => s.finishedAtMs + opts.retentionMs <= io.now()).length;
    const settled =
      mode === 'baseline'
        ? fleet.alive().every((r) => (tally.outcomesByReplica.get(r.id) ?? 0) >= due)
        : tally.accepted >= deleted;
    if (settled || io.now() > settleUntil) break;
    await sleep(100);
  }

  const elapsedMs = io.now() - startMs;
  if (killed) {
    const next = tally.elections.find((e) => e.target === killed?.target && e.atMs >= killed.atMs);
    progress.note(
      next
        ? `demo: ${killed.target} failed over to ${next.replica} in ${((next.atMs - killed.atMs) / 1000).toFixed(1)} s`
        : `demo: ${killed.target} did not fail over before the end`,
    );
  }
  const summary = computeSummary({
    replicas: opts.replicas,
    targets,
    podsCreated: workloads.reduce((n, w) => n + w.stats.created, 0),
    terminated: terminatedStates(clusters, workloads, true),
    deleteRequests: clusters.reduce((n, c) => n + c.server.requests.deleteRequestTotal(), 0),
    outcomes: { noop: tally.noop, failed: tally.failed, latenessMs: tally.latenessMs },
    leaders: await fleet.leaders(targets),
    overduePodsReported: await fleet.overduePods(targets),
    failovers: mode === 'baseline' ? 0 : tally.failovers(),
    handovers: mode === 'baseline' ? 0 : tally.handovers(),
    retentionMs: opts.retentionMs,
    leakGraceMs: LEAK_GRACE_MS,
    nowMs: io.now(),
  });
  progress.note(`demo (${mode}): done after ${(elapsedMs / 1000).toFixed(1)} s; stopping replicas…`);
  await stopFleet();
  await closeClusters();
  await removeDir();
  return {
    summary,
    elapsedMs,
    killed: killed
      ? `${killed.replica} (${killed.target}) at ${((killed.atMs - startMs) / 1000).toFixed(1)} s`
      : undefined,
  };
}

/**
 * Runs the demo and prints its summary on `io.stdout` (progress on `io.stderr`).
 * @returns the exit code: 0 when no pod leaked and (outside the baseline) no pod got a second DELETE.
 * @throws MissingBinaryError (redis-server, etcd or ZooKeeper absent), ReplicaStartError; everything started is
 * stopped before it throws.
 */
export async function runDemo(opts: DemoOptions, io: DemoIo, teardown = new Teardown()): Promise<number> {
  const progress = createProgress({ out: io.stderr, tty: io.tty, now: io.now });
  try {
    const needServices = opts.mode !== 'baseline';
    const services = needServices
      ? await startServices(teardown, io.env, opts.leadership ?? 'etcd')
      : undefined;
    if (services?.launched.length) progress.note(`demo: started ${services.launched.join(', ')}`);
    const ctx = (runIndex: number): RunContext => ({
      opts,
      io,
      teardown,
      progress,
      services,
      runIndex,
    });
    if (opts.mode === 'compare') {
      const coordinated = await runOnce('coordinated', ctx(1));
      const baseline = await runOnce('baseline', ctx(2));
      progress.stop();
      const passed =
        verdict(coordinated.summary, 'coordinated').passed && verdict(baseline.summary, 'baseline').passed;
      io.stdout.write(
        opts.json
          ? `${JSON.stringify({
              coordinated: coordinated.summary,
              baseline: baseline.summary,
              delete_requests_ratio: deleteRatio(coordinated.summary, baseline.summary),
            })}\n`
          : formatComparison(coordinated.summary, baseline.summary),
      );
      return passed ? 0 : 1;
    }
    const result = await runOnce(opts.mode, ctx(1));
    progress.stop();
    io.stdout.write(
      opts.json
        ? `${JSON.stringify(result.summary)}\n`
        : formatSummaryTable(result.summary, {
            mode: opts.mode,
            killed: result.killed,
            elapsedMs: result.elapsedMs,
          }),
    );
    const v = verdict(result.summary, opts.mode);
    if (opts.json) for (const p of v.problems) io.stderr.write(`demo: FAILED: ${p}\n`);
    return v.passed ? 0 : 1;
  } finally {
    progress.stop();
    await teardown.run();
  }
}
