/**
 * Benchmark: lateness of each DELETE after its pod's deadline (finishedAt + retention), with pods due
 * spread over a window (1,000 pods over one minute in the full run), cleaned by a coordinated fleet at
 * the default API limits (20 QPS, burst 30). Measured twice: at the API server (arrival of the DELETE,
 * from its request log) and as the leader logs it (`latenessMs` of 'driver pod deleted'). Target: p99 ≤ 1 s.
 *
 * Deadlines fall on whole seconds (Kubernetes timestamps carry seconds), so the pods come due in
 * groups of about pods/window-seconds at each second, as they would in a real cluster.
 */
import type { RecheckMode } from '../src/config/schema.ts';
import {
  type BenchEnv,
  createDrivers,
  driversLeft,
  percentile,
  recheckTag,
  round,
  spawnFleet,
  stopFleet,
  until,
} from './harness.ts';

/** Options of {@link benchLateness}. */
export interface LatenessOptions {
  replicas: number;
  pods: number;
  /** Deadlines spread evenly over this window, ms. */
  windowMs: number;
  /** Re-check modes to measure, one fleet each. */
  rechecks: RecheckMode[];
}

/** Summary statistics of a list of lateness values, ms. */
export interface LatenessStats {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
}

/** One fleet's run. */
export interface LatenessRun {
  recheck: RecheckMode;
  apiQps: number;
  apiBurst: number;
  /** API server arrival of each pod's first DELETE minus its deadline, ms (raw, per pod). */
  serverLatenessMs: number[];
  /** `latenessMs` of each 'driver pod deleted' line (raw). */
  loggedLatenessMs: number[];
  server: LatenessStats;
  logged: LatenessStats;
  deleteRequests: number;
  leaked: number;
  /** First deadline to the last pod gone, ms. */
  drainMs: number;
}

/** Result of {@link benchLateness}. */
export interface LatenessResult {
  config: LatenessOptions & { retention: string };
  runs: LatenessRun[];
}

/** p50/p90/p99/max/min/mean of `xs`, rounded to ms. */
export function latenessStats(xs: readonly number[]): LatenessStats {
  const mean = xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN;
  return {
    count: xs.length,
    p50: percentile(xs, 50),
    p90: percentile(xs, 90),
    p99: percentile(xs, 99),
    max: xs.length ? Math.max(...xs) : Number.NaN,
    min: xs.length ? Math.min(...xs) : Number.NaN,
    mean: round(mean, 1),
  };
}

const RETENTION_MS = 600_000;

async function oneRun(
  env: BenchEnv,
  opts: LatenessOptions,
  recheck: RecheckMode,
  progress: (msg: string) => void,
): Promise<LatenessRun> {
  const { server } = env;
  const namespace = `lateness-${recheckTag(recheck)}`;
  const logged = new Map<string, number>();
  const fleet = await spawnFleet(env, {
    mode: 'coordinated',
    count: opts.replicas,
    namespace,
    queuePrefix: namespace,
    idPrefix: namespace,
    env: { SDC_RETENTION: `${RETENTION_MS / 1000}s`, SDC_RECHECK: recheck },
    onLine: (_id, l) => {
      if (l.msg === 'driver pod deleted' && typeof l.latenessMs === 'number')
        logged.set(String(l.uid), l.latenessMs);
    },
  });
  try {
    // Lead time for every replica to see and enqueue the pods before the first one is due.
    const firstDue = Math.ceil((env.now() + Math.max(5000, opts.pods * 5)) / 1000) * 1000;
    const step = opts.windowMs / opts.pods;
    const pods = createDrivers(
      server,
      namespace,
      opts.pods,
      (i) => firstDue + i * step - RETENTION_MS,
      RETENTION_MS,
    );
    const deadline = new Map(pods.map((p) => [p.uid, p.deadlineMs]));
    const firstDelete = new Map<string, number>();
    const collect = () => {
      for (const r of server.requests.recent()) {
        if (r.verb === 'delete' && r.uid && deadline.has(r.uid) && !firstDelete.has(r.uid))
          firstDelete.set(r.uid, r.atMs);
      }
    };
    // The request log keeps the latest 1,000 requests: read it often enough not to miss any.
    // Poll the request log, not the pod list: listing the pods clones them all on the API server's thread.
    const timer = setInterval(collect, 200);
    try {
      await until(
        `lateness (${recheck}): a DELETE for every pod`,
        () => {
          collect();
          return firstDelete.size >= pods.length;
        },
        opts.windowMs + 300_000,
        100,
      );
    } finally {
      clearInterval(timer);
    }
    await until('every lateness pod gone', () => driversLeft(server, namespace) === 0, 30_000, 500);
    const drainMs = env.now() - firstDue;
    await until('every deletion logged', () => logged.size >= pods.length, 15_000).catch(() => undefined);
    const serverLatenessMs = pods.flatMap((p) => {
      const at = firstDelete.get(p.uid);
      return at === undefined ? [] : [at - p.deadlineMs];
    });
    const loggedLatenessMs = pods.flatMap((p) => {
      const l = logged.get(p.uid);
      return l === undefined ? [] : [l];
    });
    let deleteRequests = 0;
    for (const [uid, codes] of server.requests.deletesByUid())
      if (deadline.has(uid)) deleteRequests += codes.length;
    const run: LatenessRun = {
      recheck,
      apiQps: 20,
      apiBurst: 30,
      serverLatenessMs,
      loggedLatenessMs,
      server: latenessStats(serverLatenessMs),
      logged: latenessStats(loggedLatenessMs),
      deleteRequests,
      leaked: driversLeft(server, namespace),
      drainMs,
    };
    progress(
      `  → p50 ${run.server.p50} ms, p99 ${run.server.p99} ms, max ${run.server.max} ms (at the API server)`,
    );
    return run;
  } finally {
    await stopFleet(fleet);
  }
}

/**
 * One coordinated fleet per re-check mode, default API limits.
 * @throws BenchTimeoutError when the pods are not all deleted within the window plus 5 minutes.
 */
export async function benchLateness(
  env: BenchEnv,
  opts: LatenessOptions,
  progress: (msg: string) => void,
): Promise<LatenessResult> {
  const runs: LatenessRun[] = [];
  for (const recheck of opts.rechecks) {
    progress(
      `lateness: ${opts.pods} pods due over ${opts.windowMs / 1000} s, ${opts.replicas} replicas, recheck=${recheck}`,
    );
    runs.push(await oneRun(env, opts, recheck, progress));
  }
  return { config: { ...opts, retention: `${RETENTION_MS / 1000}s` }, runs };
}
