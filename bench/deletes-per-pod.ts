/**
 * Benchmark: DELETE requests per terminated driver pod, and API requests (GET + DELETE) per cleaned pod,
 * for fleets of 1, 3, 5 and 10 replicas, coordinated (`run`) against the uncoordinated baseline (every
 * replica deletes on its own timer, as Kyuubi does today), plus the coordinated fleet in `cache` re-check
 * mode. Every count comes from the sandbox API server's request log; Redis commands from INFO
 * commandstats. Target: 1.00 DELETE per pod coordinated, N for the baseline.
 */
import { DEFAULT_RECHECK, type RecheckMode } from '../src/config/schema.ts';
import {
  type BenchEnv,
  commandDelta,
  createDrivers,
  driversLeft,
  type FleetMode,
  recheckTag,
  redisCommandCalls,
  round,
  settle,
  spawnFleet,
  stopFleet,
  until,
} from './harness.ts';

/** Options of {@link benchDeletesPerPod}. */
export interface DeletesPerPodOptions {
  /** Replica counts to measure (e.g. [1, 3, 5, 10]). */
  replicaCounts: number[];
  /** Terminated driver pods per run. */
  pods: number;
  /** Extra coordinated runs with 3 replicas in these re-check modes (the main runs use the default). */
  otherRecheckModes: RecheckMode[];
}

/** One fleet's run. */
export interface DeletesPerPodRun {
  mode: FleetMode;
  recheck: RecheckMode | 'none';
  replicas: number;
  pods: number;
  /** Pods still present after the run (should be 0). */
  leaked: number;
  deleteRequests: number;
  deletesPerPod: number;
  /** How many pods got k DELETEs: `{ "1": 200 }`. */
  deletesPerPodHistogram: Record<string, number>;
  /** HTTP codes of those DELETEs: `{ "200": 200, "404": 400 }`. */
  deleteCodes: Record<string, number>;
  getRequests: number;
  /** (GETs + DELETEs) per cleaned pod. */
  apiRequestsPerPod: number;
  /** Requests per verb during the run (list/watch of the informers included). */
  requestsByVerb: Record<string, number>;
  /** Redis commands during the run (0 for the baseline, which has no Redis). */
  redisCommands: number;
  redisCommandsPerPodPerReplica: number;
  redisCommandsByName: Record<string, number>;
  /** Pod creation to the last DELETE answered, ms. */
  durationMs: number;
  /** Replica log lines at warn or above (the baseline logs each 404 as 'Failed to delete pod'). */
  warnLines: number;
}

/** Result of {@link benchDeletesPerPod}. */
export interface DeletesPerPodResult {
  config: DeletesPerPodOptions & { apiQps: number; retention: string };
  runs: DeletesPerPodRun[];
}

const QPS = 200;

async function oneRun(
  env: BenchEnv,
  mode: FleetMode,
  replicas: number,
  pods: number,
  recheck: RecheckMode,
): Promise<DeletesPerPodRun> {
  const { server } = env;
  const namespace = `dpp-${mode}-${replicas}-${recheckTag(recheck)}`;
  let warnLines = 0;
  const fleet = await spawnFleet(env, {
    mode,
    count: replicas,
    namespace,
    queuePrefix: namespace,
    env: { SDC_API_QPS: String(QPS), SDC_API_BURST: String(QPS), SDC_RECHECK: recheck },
    idPrefix: `${namespace}`,
    onLine: (_id, l) => {
      if (l.level === 'warn' || l.level === 'error') warnLines++;
    },
  });
  try {
    const verbsBefore = server.requests.countsByVerb();
    const redisBefore = await redisCommandCalls(env.redisClient);
    const start = env.now();
    const created = createDrivers(server, namespace, pods, () => start, 1000);
    await until('every driver pod deleted', () => driversLeft(server, namespace) === 0, 180_000, 100);
    const uids = new Set(created.map((p) => p.uid));
    const ours = () => {
      let n = 0;
      for (const [uid, codes] of server.requests.deletesByUid()) if (uids.has(uid)) n += codes.length;
      return n;
    };
    // The baseline's other replicas fire at the same deadline; a coordinated straggler would show here.
    await settle(ours, mode === 'baseline' ? 3000 : 2000);
    const durationMs = env.now() - start;
    const redisAfter = await redisCommandCalls(env.redisClient);
    const verbsAfter = server.requests.countsByVerb();
    const requestsByVerb: Record<string, number> = {};
    for (const [k, v] of Object.entries(verbsAfter)) {
      const d = v - (verbsBefore[k] ?? 0);
      if (d > 0) requestsByVerb[k] = d;
    }
    const histogram: Record<string, number> = {};
    const codes: Record<string, number> = {};
    let deleteRequests = 0;
    const byUid = server.requests.deletesByUid();
    for (const uid of uids) {
      const c = byUid.get(uid) ?? [];
      deleteRequests += c.length;
      histogram[c.length] = (histogram[c.length] ?? 0) + 1;
      for (const code of c) codes[code] = (codes[code] ?? 0) + 1;
    }
    const getRequests = requestsByVerb.get ?? 0;
    const redisCommands = mode === 'baseline' ? 0 : redisAfter.total - redisBefore.total;
    return {
      mode,
      recheck: mode === 'baseline' ? 'none' : recheck,
      replicas,
      pods,
      leaked: driversLeft(server, namespace),
      deleteRequests,
      deletesPerPod: round(deleteRequests / pods, 3),
      deletesPerPodHistogram: histogram,
      deleteCodes: codes,
      getRequests,
      apiRequestsPerPod: round((getRequests + deleteRequests) / pods, 3),
      requestsByVerb,
      redisCommands,
      redisCommandsPerPodPerReplica: round(redisCommands / pods / replicas, 2),
      redisCommandsByName:
        mode === 'baseline' ? {} : commandDelta(redisBefore.byCommand, redisAfter.byCommand),
      durationMs,
      warnLines,
    };
  } finally {
    await stopFleet(fleet);
  }
}

/**
 * Runs every fleet in turn (one fleet alive at a time) on its own namespace and queue prefix.
 * @throws BenchTimeoutError when a fleet does not start or leaves pods behind within its timeout.
 */
export async function benchDeletesPerPod(
  env: BenchEnv,
  opts: DeletesPerPodOptions,
  progress: (msg: string) => void,
): Promise<DeletesPerPodResult> {
  const runs: DeletesPerPodRun[] = [];
  for (const n of opts.replicaCounts) {
    for (const mode of ['coordinated', 'baseline'] as const) {
      progress(`deletes-per-pod: ${mode}, ${n} replica(s), ${opts.pods} pods`);
      const run = await oneRun(env, mode, n, opts.pods, DEFAULT_RECHECK);
      progress(`  → ${run.deletesPerPod} DELETE/pod, ${run.apiRequestsPerPod} API requests/pod`);
      runs.push(run);
    }
  }
  for (const recheck of opts.otherRecheckModes) {
    progress(`deletes-per-pod: coordinated, 3 replicas, recheck=${recheck}`);
    const run = await oneRun(env, 'coordinated', 3, opts.pods, recheck);
    progress(`  → ${run.deletesPerPod} DELETE/pod, ${run.apiRequestsPerPod} API requests/pod`);
    runs.push(run);
  }
  return { config: { ...opts, apiQps: QPS, retention: '1s' }, runs };
}
