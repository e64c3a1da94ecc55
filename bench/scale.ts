/**
 * Benchmark: fleet scale. R coordinated replica processes clean T targets — T namespaces of one
 * kubeconfig context — against one sandbox API server, one Redis and one etcd. Per size it measures what
 * grows with R × T:
 *
 * - Redis clients (CLIENT LIST, the bench's own connection left out) once every target is led and after the
 *   idle window; Redis commands/s while idle (INFO commandstats delta over the idle window, INFO excluded);
 * - etcd leases (`/v3/lease/leases`, the gRPC gateway of LeaseLeases) and keepalives/s (the
 *   `etcd_debugging_lease_renewed_total` counter of etcd's `/metrics`, etcd 3.4, over the idle window), and
 *   etcd's watcher and watch-stream gauges;
 * - API LISTs and WATCHes the sandbox received while the fleet started, and the watches open while idle;
 * - each replica's VmRSS (/proc/<pid>/status) after the idle window;
 * - leadership spread, max leaderships of a replica ÷ the fair share ⌈T / live replicas⌉, read from a live
 *   replica's `GET /api/v1/leaders`: once every target is led after the start, after restarting one replica
 *   (SIGTERM, a new process) and after adding one, each read 2 × TTL after the change;
 * - spawn → every target led, and every replica ready → every target led (ms);
 * - DELETE lateness with pods due across every target: DELETE arrival at the API server − the pod's deadline
 *   (p50/p99/max), and DELETE requests per pod.
 *
 * Counts are exact; times are figures for the report, never asserted.
 */
import { readFileSync } from 'node:fs';
import type { ReplicaProcess } from '../harness/sandbox/replica-process.ts';
import { buildCompiled } from './cost.ts';
import {
  BENCH_CONTEXT,
  type BenchEnv,
  type BenchPod,
  commandDelta,
  createDrivers,
  driversLeft,
  type FleetSpec,
  percentile,
  processMemoryMiB,
  redisCommandCalls,
  round,
  spawnFleet,
  spawnOne,
  stopFleet,
  until,
} from './harness.ts';
import { createMemoryCgroup, deploymentMemoryLimitBytes, type MemoryCgroup } from './memory-cgroup.ts';

/** One size: `targets` namespaces of the bench context cleaned by `replicas` replica processes. */
export interface ScaleSize {
  targets: number;
  replicas: number;
}

/** Options of {@link benchScale}. */
export interface ScaleOptions {
  sizes: ScaleSize[];
  /** SDC_ELECTION_TTL_SECONDS of the fleets, s; spreads are read 2 × TTL after a restart or an addition. */
  electionTtlSeconds: number;
  /**
   * SDC_INFORMER_SCOPE of the fleets: `namespace` (the default: one list and watch per target) or `cluster`
   * (one per context, fanned out by namespace). Absent: the product's default.
   */
  informerScope?: 'namespace' | 'cluster';
  /**
   * Run each replica as the Deployment runs it: the compiled build (`tsc -p tsconfig.build.json`), each in
   * its own memory cgroup with the Deployment's limit (Node sizes V8's heap from it). Where no cgroup can be
   * made, the compiled build without a limit (the run says so). Absent: from source, no limit.
   */
  asDeployed?: boolean;
  /** Idle window over which Redis commands and etcd keepalives are counted, ms. */
  idleWindowMs: number;
  /**
   * Wait after the start settles before the idle window, ms: a new term checks for stalled jobs every 5 s
   * for its first 30 s, which is not the steady idle cost.
   */
  steadyAfterMs: number;
  /** Pods due per target in the lateness phase. */
  podsPerTarget: number;
  /** The lateness phase's deadlines are spread evenly over this window, ms (round-robin over the targets). */
  dueWindowMs: number;
}

/** Leaderships per live replica at one moment, from `GET /api/v1/leaders`. */
export interface LeadershipSpread {
  /** Leaderships per live replica id (0 for a live replica that leads nothing). */
  perReplica: Record<string, number>;
  /** Targets with no leader. */
  unled: number;
  /** Leaderships of replicas that are not live (an old process's key not yet gone). */
  other: number;
  /** ⌈T / live replicas⌉. */
  fairShare: number;
  /** max(perReplica) ÷ fairShare. */
  spread: number;
}

/** Figures of one size. Per-target figures are the totals ÷ T. */
export interface ScaleRun extends ScaleSize {
  /** Spawn of the fleet → every target has a leader, ms (null: not within the timeout). */
  allLedAfterMs: number | null;
  /**
   * Every replica ready (logged 'replica started': informers synced, campaigns begun) → every target has a
   * leader, ms; 0 when they were all led by then (null: not within the timeout).
   */
  allLedAfterReadyMs: number | null;
  redis: {
    /** CLIENT LIST entries (the bench's own connection left out) once every target was led. */
    clientsAfterStart: number;
    /** The same after the idle window. */
    clientsIdle: number;
    clientsIdlePerTarget: number;
    /** Idle clients by kind: `sdc:<replica>` (the replica's connection), `worker` (BullMQ workers), `(unnamed)`. */
    clientsByName: Record<string, number>;
    /** Commands/s over the idle window (INFO excluded). */
    commandsPerSecondIdle: number;
    commandsPerSecondIdlePerTarget: number;
    /** Idle-window commands by name. */
    idleCommandsByName: Record<string, number>;
  };
  etcd: {
    /** Leases granted and alive after the idle window. */
    leases: number;
    leasesPerTarget: number;
    /** Lease renewals/s over the idle window (`etcd_debugging_lease_renewed_total`). */
    keepalivesPerSecond: number;
    /** `etcd_debugging_mvcc_watcher_total` and `etcd_debugging_mvcc_watch_stream_total` after the idle window. */
    watchers: number;
    watchStreams: number;
  };
  api: {
    /** LIST and WATCH requests the sandbox API server received from spawn until every informer watched. */
    listsAtStart: number;
    watchesAtStart: number;
    /** Watch streams open after the idle window. */
    openWatchesIdle: number;
  };
  /** VmRSS per replica after the idle window, MiB, and its range. */
  rssMiB: Record<string, number>;
  rssMinMiB: number;
  rssMaxMiB: number;
  /** How the replicas ran: from source, or compiled (`asDeployed`). */
  build: 'source' | 'compiled';
  /** Each replica's memory cgroup limit, MiB; null: none (from source, or no cgroup could be made). */
  memoryLimitMiB: number | null;
  /** Replicas of the fleet (as started) that the kernel shows in a memory cgroup of their own (`/proc/<pid>/cgroup`). */
  replicasInCgroup: number;
  spread: {
    /** When every target was first led (the first replicas to register lead more until the others take over). */
    firstLed: LeadershipSpread;
    /** 2 × TTL after every target was first led. */
    start: LeadershipSpread & { reads: number };
    /** 2 × TTL after one replica was stopped (SIGTERM) and a new process started in its place. */
    afterRestart: LeadershipSpread & { restarted: string; restartedLeads: number; reads: number };
    /** 2 × TTL after one more replica was started. */
    afterAdd: LeadershipSpread & { added: string; addedLeads: number; reads: number };
  };
  lateness: {
    pods: number;
    dueWindowMs: number;
    /**
     * Pods that got no DELETE within the due window + 5 minutes (the lateness figures leave them out; their
     * lateness is at least that long).
     */
    undeleted: number;
    /** DELETE arrival − deadline, ms, of each pod's first DELETE. */
    p50Ms: number;
    p99Ms: number;
    maxMs: number;
    /** DELETE requests for these pods ÷ pods (1 = one DELETE per pod). */
    deletesPerPod: number;
    /** Pods left behind. */
    leaked: number;
  };
  /** Wall time of this size, ms. */
  durationMs: number;
}

/** Result of {@link benchScale}. */
export interface ScaleResult {
  config: ScaleOptions & { retention: string };
  runs: ScaleRun[];
}

const RETENTION_MS = 600_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Redis clients other than the bench's own, and their count by name. */
async function redisClients(env: BenchEnv): Promise<{ count: number; byName: Record<string, number> }> {
  const own = Number(await env.redisClient.client('ID'));
  const text = String(await env.redisClient.client('LIST'));
  const byName: Record<string, number> = {};
  let count = 0;
  for (const line of text.split('\n')) {
    const id = Number(/(?:^| )id=(\d+)/.exec(line)?.[1] ?? Number.NaN);
    if (Number.isNaN(id) || id === own) continue;
    count++;
    const name = /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '';
    // The replica's own connection is `sdc:<replica>`; BullMQ names a worker's `<prefix>:<base64 queue>:w:<name>`.
    const key = name.startsWith('sdc:') ? 'sdc:<replica>' : /:w:/.test(name) ? 'worker' : name || '(unnamed)';
    byName[key] = (byName[key] ?? 0) + 1;
  }
  return { count, byName };
}

/** One gauge or counter of etcd's Prometheus `/metrics` text (no labels), NaN when absent. */
async function etcdMetric(env: BenchEnv, name: string): Promise<number> {
  const text = await (await fetch(`${env.etcd.endpoints[0]}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

/** Leases alive in etcd (LeaseLeases through etcd's gRPC gateway). */
async function etcdLeaseCount(env: BenchEnv): Promise<number> {
  const res = await fetch(`${env.etcd.endpoints[0]}/v3/lease/leases`, { method: 'POST', body: '{}' });
  const body = (await res.json()) as { leases?: unknown[] };
  return body.leases?.length ?? 0;
}

/** A live replica and its HTTP base URL. */
interface Live {
  replica: ReplicaProcess;
  url: string;
}

/** `GET /api/v1/leaders` of `via`: target → leader replica id (or null). */
async function leadersOf(via: Live): Promise<Record<string, string | null>> {
  const res = await fetch(`${via.url}/api/v1/leaders`, { signal: AbortSignal.timeout(60_000) });
  if (!res.ok) throw new Error(`GET ${via.url}/api/v1/leaders: ${res.status}`);
  return ((await res.json()) as { leaders: Record<string, string | null> }).leaders;
}

function spreadOf(
  leaders: Record<string, string | null>,
  live: readonly Live[],
  targets: number,
): LeadershipSpread {
  const perReplica: Record<string, number> = Object.fromEntries(live.map((l) => [l.replica.id, 0]));
  let other = 0;
  for (const leader of Object.values(leaders)) {
    if (leader === null) continue;
    if (leader in perReplica) perReplica[leader] = (perReplica[leader] ?? 0) + 1;
    else other++;
  }
  const led = Object.values(perReplica).reduce((a, b) => a + b, 0) + other;
  const fairShare = Math.ceil(targets / live.length);
  return {
    perReplica,
    // A target missing from the answer (no answer at all) counts as unled too.
    unled: targets - led,
    other,
    fairShare,
    spread: round(Math.max(...Object.values(perReplica)) / fairShare, 2),
  };
}

/**
 * The spread read through `via`, again (up to 10 reads, 1 s apart) while some target shows no leader:
 * `/api/v1/leaders` answers null both for a target without a leader and for one whose leader read timed out
 * (a third of the TTL), which a loaded replica's reads do. `reads` says how many it took.
 */
async function settledSpread(
  via: Live,
  live: readonly Live[],
  targets: number,
): Promise<LeadershipSpread & { reads: number }> {
  for (let reads = 1; ; reads++) {
    const leaders = await leadersOf(via).catch(() => ({}));
    const s = spreadOf(leaders, live, targets);
    if (s.unled === 0 || reads >= 10) return { ...s, reads };
    await sleep(1000);
  }
}

/** Polls the leaders through `via` until every one of `targets` has a live leader; the leaders then. */
async function untilAllLed(
  via: Live,
  live: readonly Live[],
  targets: number,
  timeoutMs: number,
): Promise<Record<string, string | null>> {
  const ids = new Set(live.map((l) => l.replica.id));
  let last: Record<string, string | null> = {};
  await until(
    `every one of ${targets} targets led by a live replica`,
    async () => {
      last = await leadersOf(via).catch(() => ({}));
      const values = Object.values(last);
      return values.length === targets && values.every((v) => v !== null && ids.has(v));
    },
    timeoutMs,
    250,
  );
  return last;
}

/** Spawns one replica of `spec` and waits until it has started and serves HTTP. */
async function startOne(
  env: BenchEnv,
  spec: FleetSpec,
  id: string,
  urls: Map<string, string>,
  timeoutMs: number,
) {
  const r = spawnOne(env, spec, id);
  await r.waitForLine((l) => l.msg === 'replica started', timeoutMs);
  await until(`${id} serving HTTP`, () => urls.has(id), timeoutMs);
  return { replica: r, url: urls.get(id) ?? '' };
}

async function oneSize(
  env: BenchEnv,
  opts: ScaleOptions,
  size: ScaleSize,
  progress: (msg: string) => void,
): Promise<ScaleRun> {
  const { server } = env;
  const T = size.targets;
  const R = size.replicas;
  const tag = `s${T}x${R}`;
  const namespaces = Array.from({ length: T }, (_, i) => `${tag}-${i + 1}`);
  const ttlMs = opts.electionTtlSeconds * 1000;
  // Generous: at 1,000 × 5 the start alone has taken ~40 s.
  const timeoutMs = 120_000 + T * 300;
  const urls = new Map<string, string>();
  const deployedName = `sdc-scale-${process.pid}-${tag}`;
  const deployed = opts.asDeployed ? asDeployed(deployedName, progress) : undefined;
  const spec: FleetSpec = {
    ...deployed?.spec,
    mode: 'coordinated',
    count: R,
    namespace: namespaces[0] ?? '',
    queuePrefix: `scale${tag}`,
    idPrefix: tag,
    // Not spawnFleet's wait for an 'elected leader' line: with 1,000 targets it scrolls out of the lines a
    // replica process keeps before the wait starts. Every target led is waited for through /api/v1/leaders.
    joinExisting: true,
    env: {
      SDC_TARGETS: namespaces.map((ns) => `${BENCH_CONTEXT}:${ns}`).join(','),
      SDC_RETENTION: `${RETENTION_MS / 1000}s`,
      SDC_ELECTION_TTL_SECONDS: String(opts.electionTtlSeconds),
      ...(opts.informerScope ? { SDC_INFORMER_SCOPE: opts.informerScope } : {}),
    },
    onLine: (id, l) => {
      if (l.msg === 'http server listening' && typeof l.url === 'string') urls.set(id, l.url);
    },
  };
  const started = performance.now();
  const all: ReplicaProcess[] = [];
  try {
    // --- start ---
    const verbsBefore = server.requests.countsByVerb();
    const spawnedAt = performance.now();
    const fleet = await spawnFleet(env, spec, timeoutMs);
    all.push(...fleet);
    const readyAt = performance.now();
    await until('every replica serving HTTP', () => fleet.every((r) => urls.has(r.id)), timeoutMs);
    let live: Live[] = fleet.map((r) => ({ replica: r, url: urls.get(r.id) ?? '' }));
    let allLedAfterMs: number | null = null;
    let allLedAfterReadyMs: number | null = null;
    const ledAtStart = await untilAllLed(live[0] as Live, live, T, timeoutMs)
      .then((l) => {
        allLedAfterMs = Math.round(performance.now() - spawnedAt);
        allLedAfterReadyMs = Math.round(performance.now() - readyAt);
        return l;
      })
      .catch(async () => leadersOf(live[0] as Live).catch(() => ({})));
    const firstLedSpread = spreadOf(ledAtStart, live, T);
    const clientsAfterStart = await redisClients(env);
    progress(
      `  ${tag}: every target led after ${allLedAfterMs ?? '—'} ms; leaderships ${Object.values(firstLedSpread.perReplica).join('/')}`,
    );
    // Replicas spawned one after another: the first leads every target until the others register and take
    // their share (handovers). Read, like after a restart or an addition, 2 × TTL later.
    await sleep(2 * ttlMs);
    const startSpread = await settledSpread(live[0] as Live, live, T);
    progress(
      `  ${tag}: 2 × TTL after the start: leaderships ${Object.values(startSpread.perReplica).join('/')}`,
    );
    // Every informer's start (LISTs and WATCHes, spread by each context's rate limiter) counted whole.
    // One watch per target per replica in namespace scope; one per context per replica in cluster scope.
    const watches = opts.informerScope === 'cluster' ? R : T * R;
    await until('every informer watching', () => server.openWatches() >= watches, timeoutMs, 500).catch(
      () => undefined,
    );
    const verbsAfter = server.requests.countsByVerb();

    // --- idle window: nothing asks anything of the replicas or etcd ---
    // Past the first 30 s of every term, when a new leader checks for stalled jobs every 5 s
    // (src/queue/queue-consumer.ts IDLE_CHECKS): what is measured is the steady idle cost.
    await sleep(opts.steadyAfterMs);
    const cmdBefore = await redisCommandCalls(env.redisClient);
    const renewedBefore = await etcdMetric(env, 'etcd_debugging_lease_renewed_total');
    const idleStart = performance.now();
    await sleep(opts.idleWindowMs);
    const cmdAfter = await redisCommandCalls(env.redisClient);
    const renewedAfter = await etcdMetric(env, 'etcd_debugging_lease_renewed_total');
    const idleSeconds = (performance.now() - idleStart) / 1000;
    const clientsIdle = await redisClients(env);
    const leases = await etcdLeaseCount(env);
    const watchers = await etcdMetric(env, 'etcd_debugging_mvcc_watcher_total');
    const watchStreams = await etcdMetric(env, 'etcd_debugging_mvcc_watch_stream_total');
    const openWatchesIdle = server.openWatches();
    const rss = Object.fromEntries(fleet.map((r) => [r.id, processMemoryMiB(r.pid ?? 0).rssMiB]));
    // Which of them run in a cgroup of their own (asDeployed), read from the kernel, not from our spec.
    const inCgroup = fleet.filter((r) => {
      try {
        return readFileSync(`/proc/${r.pid}/cgroup`, 'utf8').includes(`/${deployedName}-${r.id}`);
      } catch {
        return false;
      }
    }).length;
    const idleCommands = cmdAfter.total - cmdBefore.total;
    progress(
      `  ${tag}: idle ${clientsIdle.count} Redis clients, ${round(idleCommands / idleSeconds, 1)} commands/s, ` +
        `${leases} etcd leases, ${round((renewedAfter - renewedBefore) / idleSeconds, 1)} keepalives/s, ` +
        `RSS ${Math.min(...Object.values(rss))}–${Math.max(...Object.values(rss))} MiB`,
    );

    // --- lateness: pods due across every target ---
    const lateness = await latenessPhase(env, opts, namespaces, progress, tag);

    // --- restart one replica ---
    const victim = fleet[0] as ReplicaProcess;
    await stopFleet([victim]);
    live = live.filter((l) => l.replica !== victim);
    const restarted = await startOne(env, spec, `${tag}-1r`, urls, timeoutMs);
    all.push(restarted.replica);
    live = [...live, restarted];
    await untilAllLed(live[0] as Live, live, T, timeoutMs).catch(() => undefined);
    await sleep(2 * ttlMs);
    const afterRestart = await settledSpread(live[0] as Live, live, T);
    progress(
      `  ${tag}: after restarting one replica: leaderships ${Object.values(afterRestart.perReplica).join('/')}`,
    );

    // --- add one replica ---
    const added = await startOne(env, spec, `${tag}-${R + 1}`, urls, timeoutMs);
    all.push(added.replica);
    live = [...live, added];
    await sleep(2 * ttlMs);
    const afterAdd = await settledSpread(live[0] as Live, live, T);
    progress(
      `  ${tag}: after adding one replica: leaderships ${Object.values(afterAdd.perReplica).join('/')}`,
    );

    const rssValues = Object.values(rss);
    return {
      targets: T,
      replicas: R,
      allLedAfterMs,
      allLedAfterReadyMs,
      redis: {
        clientsAfterStart: clientsAfterStart.count,
        clientsIdle: clientsIdle.count,
        clientsIdlePerTarget: round(clientsIdle.count / T, 2),
        clientsByName: clientsIdle.byName,
        commandsPerSecondIdle: round(idleCommands / idleSeconds, 1),
        commandsPerSecondIdlePerTarget: round(idleCommands / idleSeconds / T, 3),
        idleCommandsByName: commandDelta(cmdBefore.byCommand, cmdAfter.byCommand),
      },
      etcd: {
        leases,
        leasesPerTarget: round(leases / T, 2),
        keepalivesPerSecond: round((renewedAfter - renewedBefore) / idleSeconds, 1),
        watchers,
        watchStreams,
      },
      api: {
        listsAtStart: (verbsAfter.list ?? 0) - (verbsBefore.list ?? 0),
        watchesAtStart: (verbsAfter.watch ?? 0) - (verbsBefore.watch ?? 0),
        openWatchesIdle,
      },
      rssMiB: rss,
      rssMinMiB: Math.min(...rssValues),
      rssMaxMiB: Math.max(...rssValues),
      build: deployed ? 'compiled' : 'source',
      memoryLimitMiB: deployed?.limitBytes ? Math.round(deployed.limitBytes / 2 ** 20) : null,
      replicasInCgroup: inCgroup,
      spread: {
        firstLed: firstLedSpread,
        start: startSpread,
        afterRestart: {
          ...afterRestart,
          restarted: restarted.replica.id,
          restartedLeads: afterRestart.perReplica[restarted.replica.id] ?? 0,
        },
        afterAdd: {
          ...afterAdd,
          added: added.replica.id,
          addedLeads: afterAdd.perReplica[added.replica.id] ?? 0,
        },
      },
      lateness,
      durationMs: Math.round(performance.now() - started),
    };
  } finally {
    await stopFleet(all);
    deployed?.remove();
  }
}

/**
 * The fleet spec's part that runs replicas as the Deployment does: the compiled build, each replica in a memory
 * cgroup of its own limited as the Deployment's container (bench/memory-cgroup.ts). `limitBytes` is undefined
 * where no cgroup could be made (then the compiled build runs without a limit); `remove` removes the cgroups.
 */
function asDeployed(
  name: string,
  progress: (msg: string) => void,
): { spec: Pick<FleetSpec, 'cliPath' | 'cgroupFor'>; limitBytes: number | undefined; remove: () => void } {
  progress('  compiling (tsc -p tsconfig.build.json): replicas run as the image runs them');
  const cliPath = buildCompiled();
  const limitBytes = deploymentMemoryLimitBytes();
  const cgroups = new Map<string, MemoryCgroup | undefined>();
  const cgroupFor = (id: string) => {
    if (!cgroups.has(id)) cgroups.set(id, createMemoryCgroup(`${name}-${id}`, limitBytes));
    return cgroups.get(id)?.dir;
  };
  const probe = createMemoryCgroup(`${name}-probe`, limitBytes);
  probe?.remove();
  if (!probe)
    progress('  no memory cgroup could be created here: compiled replicas run without a memory limit');
  return {
    spec: probe ? { cliPath, cgroupFor } : { cliPath },
    limitBytes: probe ? limitBytes : undefined,
    remove: () => {
      for (const c of cgroups.values()) c?.remove();
    },
  };
}

/** Creates `podsPerTarget` pods in each namespace, due round-robin over the due window; measures their DELETEs. */
async function latenessPhase(
  env: BenchEnv,
  opts: ScaleOptions,
  namespaces: readonly string[],
  progress: (msg: string) => void,
  tag: string,
): Promise<ScaleRun['lateness']> {
  const { server } = env;
  const T = namespaces.length;
  const total = T * opts.podsPerTarget;
  progress(`  ${tag}: ${total} pods due over ${opts.dueWindowMs / 1000} s across ${T} targets`);
  // Lead time for every replica's informers to see the pods and enqueue them before the first is due.
  const firstDue = Math.ceil((env.now() + Math.max(5000, total * 10)) / 1000) * 1000;
  const step = opts.dueWindowMs / total;
  const pods: BenchPod[] = namespaces.flatMap((ns, t) =>
    createDrivers(
      server,
      ns,
      opts.podsPerTarget,
      (j) => firstDue + (j * T + t) * step - RETENTION_MS,
      RETENTION_MS,
    ),
  );
  const deadline = new Map(pods.map((p) => [p.uid, p.deadlineMs]));
  const firstDelete = new Map<string, number>();
  let seen = 0;
  const collect = () => {
    const all = server.requests.deletes();
    for (; seen < all.length; seen++) {
      const r = all[seen];
      if (r?.uid && deadline.has(r.uid) && !firstDelete.has(r.uid)) firstDelete.set(r.uid, r.atMs);
    }
  };
  await until(
    `${tag}: a DELETE for every pod`,
    () => {
      collect();
      return firstDelete.size >= pods.length;
    },
    opts.dueWindowMs + Math.max(5000, total * 10) + 300_000,
    200,
  ).catch((err: Error) =>
    progress(`  ${tag}: ${err.message}: the pods without one are counted as undeleted`),
  );
  const leftIn = () => namespaces.reduce((n, ns) => n + driversLeft(server, ns), 0);
  await until(`${tag}: every lateness pod gone`, () => leftIn() === 0, 30_000, 500).catch(() => undefined);
  let deleteRequests = 0;
  for (const [uid, codes] of server.requests.deletesByUid())
    if (deadline.has(uid)) deleteRequests += codes.length;
  const late = pods.flatMap((p) => {
    const at = firstDelete.get(p.uid);
    return at === undefined ? [] : [at - p.deadlineMs];
  });
  const result = {
    pods: total,
    undeleted: total - late.length,
    dueWindowMs: opts.dueWindowMs,
    p50Ms: percentile(late, 50),
    p99Ms: percentile(late, 99),
    maxMs: late.length ? Math.max(...late) : Number.NaN,
    deletesPerPod: round(deleteRequests / total, 3),
    leaked: leftIn(),
  };
  progress(
    `  ${tag}: DELETE lateness p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, max ${result.maxMs} ms`,
  );
  return result;
}

/**
 * Runs every size in turn, one fleet alive at a time; leaves no process behind.
 * @throws Error when a replica does not start within its timeout (`replica started`, 2 min + 0.3 s per target).
 */
export async function benchScale(
  env: BenchEnv,
  opts: ScaleOptions,
  progress: (msg: string) => void,
): Promise<ScaleResult> {
  const runs: ScaleRun[] = [];
  for (const size of opts.sizes) {
    progress(`scale: ${size.targets} targets × ${size.replicas} replicas`);
    runs.push(await oneSize(env, opts, size, progress));
  }
  return { config: { ...opts, retention: `${RETENTION_MS / 1000}s` }, runs };
}

const fmt = (x: number) => x.toLocaleString('en-US');
const per = (total: number, t: number) => `${fmt(total)} (${round(total / t, 2)}/target)`;
const spreadCell = (s: LeadershipSpread) =>
  `${Object.values(s.perReplica).join('/')} (${s.spread} × fair share ${s.fairShare}${s.unled ? `, ${s.unled} unled` : ''})`;

/** The scale section of the report: one column per size, rows as README "Sizing". */
export function scaleSection(r: ScaleResult): string[] {
  const head = r.runs.map((x) => `${fmt(x.targets)} targets × ${x.replicas} replicas`);
  const row = (what: string, cell: (x: ScaleRun) => string) =>
    `| ${what} | ${r.runs.map(cell).join(' | ')} |`;
  return [
    '## Scale',
    '',
    `One context, T namespaces, R replica processes, election TTL ${r.config.electionTtlSeconds} s, ` +
      `informer scope ${r.config.informerScope ?? 'namespace'}; ` +
      `idle figures over ${r.config.idleWindowMs / 1000} s, from ${r.config.steadyAfterMs / 1000} s after every informer watched; lateness with ${r.config.podsPerTarget} pod(s) per target due over ` +
      `${r.config.dueWindowMs / 1000} s at the default 20 QPS per replica and context. Spread = max leaderships ÷ ⌈T / live replicas⌉, ` +
      'read 2 × TTL after the start, a restart or an addition (bench/scale.ts).',
    '',
    `| | ${head.join(' | ')} |`,
    `|---|${r.runs.map(() => '---').join('|')}|`,
    row('leaderships per replica when all were first led', (x) => spreadCell(x.spread.firstLed)),
    row('leaderships per replica 2 × TTL after start', (x) => spreadCell(x.spread.start)),
    row(
      '… after restarting one',
      (x) => `${spreadCell(x.spread.afterRestart)}; restarted leads ${x.spread.afterRestart.restartedLeads}`,
    ),
    row(
      '… after adding one',
      (x) => `${spreadCell(x.spread.afterAdd)}; added leads ${x.spread.afterAdd.addedLeads}`,
    ),
    row(
      'Redis clients after start / idle',
      (x) => `${fmt(x.redis.clientsAfterStart)} / ${per(x.redis.clientsIdle, x.targets)}`,
    ),
    row(
      'Redis commands/s while idle',
      (x) => `${x.redis.commandsPerSecondIdle} (${x.redis.commandsPerSecondIdlePerTarget}/target)`,
    ),
    row('etcd leases', (x) => per(x.etcd.leases, x.targets)),
    row('etcd keepalives/s', (x) => `${x.etcd.keepalivesPerSecond}`),
    row('etcd watchers / watch streams', (x) => `${fmt(x.etcd.watchers)} / ${fmt(x.etcd.watchStreams)}`),
    row('API LISTs / WATCHes at start', (x) => `${fmt(x.api.listsAtStart)} / ${fmt(x.api.watchesAtStart)}`),
    row('API watches open while idle', (x) => fmt(x.api.openWatchesIdle)),
    row(
      'replica RSS',
      (x) =>
        `${x.rssMinMiB}–${x.rssMaxMiB} MiB${x.build === 'compiled' ? ` (compiled${x.memoryLimitMiB ? `, ${x.memoryLimitMiB} MiB limit` : ', no limit'})` : ''}`,
    ),
    row('ready → every target led (spawn → led)', (x) =>
      x.allLedAfterMs === null || x.allLedAfterReadyMs === null
        ? 'not within the timeout'
        : `${round(x.allLedAfterReadyMs / 1000, 1)} s (${round(x.allLedAfterMs / 1000, 1)} s)`,
    ),
    row(
      'DELETE lateness p50 / p99 / max',
      (x) =>
        `${round(x.lateness.p50Ms / 1000, 2)} / ${round(x.lateness.p99Ms / 1000, 2)} / ${round(x.lateness.maxMs / 1000, 2)} s (${fmt(x.lateness.pods)} pods)`,
    ),
    row(
      'DELETEs per pod / pods without a DELETE / pods leaked',
      (x) => `${x.lateness.deletesPerPod} / ${x.lateness.undeleted} / ${x.lateness.leaked}`,
    ),
    '',
  ];
}

/**
 * The scale goals against each size's figures (`met` undefined: no goal at this size): spread ≤ fair share
 * + 1 at start, after a restart and after an addition; etcd leases = R; Redis clients ≤ T + 3R; idle Redis
 * commands ≤ 0.5/s per target; every target led within 2 × TTL; DELETE lateness p99 ≤ 1 s; RSS ≤ 250 MiB
 * at 1,000 targets.
 */
export function scaleTargetRows(
  r: ScaleResult,
): { what: string; target: string; measured: string; met: boolean | undefined }[] {
  const rows: { what: string; target: string; measured: string; met: boolean | undefined }[] = [];
  const ttlMs = r.config.electionTtlSeconds * 1000;
  for (const x of r.runs) {
    const size = `${fmt(x.targets)} × ${x.replicas}`;
    const spreads: [string, LeadershipSpread][] = [
      ['2 × TTL after start', x.spread.start],
      ['after restarting one replica', x.spread.afterRestart],
      ['after adding one replica', x.spread.afterAdd],
    ];
    for (const [when, s] of spreads) {
      const max = Math.max(...Object.values(s.perReplica));
      rows.push({
        what: `Scale ${size}: most leaderships of one replica, ${when}`,
        target: `≤ fair share + 1 = ${s.fairShare + 1}`,
        measured: `${max} (${Object.values(s.perReplica).join('/')})`,
        met: max <= s.fairShare + 1 && s.unled === 0,
      });
    }
    rows.push(
      {
        what: `Scale ${size}: etcd leases`,
        target: `= replicas (${x.replicas})`,
        measured: fmt(x.etcd.leases),
        met: x.etcd.leases === x.replicas,
      },
      {
        what: `Scale ${size}: Redis clients while idle`,
        target: `≤ T + 3R = ${fmt(x.targets + 3 * x.replicas)}`,
        measured: fmt(x.redis.clientsIdle),
        met: x.redis.clientsIdle <= x.targets + 3 * x.replicas,
      },
      {
        what: `Scale ${size}: Redis commands/s per target while idle`,
        target: '≤ 0.5',
        measured: String(x.redis.commandsPerSecondIdlePerTarget),
        met: x.redis.commandsPerSecondIdlePerTarget <= 0.5,
      },
      {
        what: `Scale ${size}: every replica ready → every target led (spawn → led in brackets)`,
        target: `≤ 2 × TTL = ${(2 * ttlMs) / 1000} s`,
        measured:
          x.allLedAfterReadyMs === null || x.allLedAfterMs === null
            ? 'not within the timeout'
            : `${round(x.allLedAfterReadyMs / 1000, 1)} s (${round(x.allLedAfterMs / 1000, 1)} s)`,
        met: x.allLedAfterReadyMs !== null && x.allLedAfterReadyMs <= 2 * ttlMs,
      },
      {
        what: `Scale ${size}: DELETE lateness p99, ${fmt(x.lateness.pods)} pods due across every target`,
        target: '≤ 1 s',
        measured: `${round(x.lateness.p99Ms / 1000, 2)} s (max ${round(x.lateness.maxMs / 1000, 2)} s)${x.lateness.undeleted ? `, ${fmt(x.lateness.undeleted)} pods without a DELETE` : ''}`,
        met: x.lateness.p99Ms <= 1000 && x.lateness.undeleted === 0,
      },
      {
        what: `Scale ${size}: replica RSS`,
        target: x.targets >= 1000 ? '≤ 250 MiB' : '— (≤ 250 MiB at 1,000 targets)',
        measured: `${x.rssMinMiB}–${x.rssMaxMiB} MiB`,
        met: x.targets >= 1000 ? x.rssMaxMiB <= 250 : undefined,
      },
    );
  }
  return rows;
}
