/**
 * One nemesis run, start to verdict: start the world, wait until every target is led, start the workload
 * and the overdue sampler, play the schedule, let the system settle, then judge every invariant from the
 * sandbox's records (invariants.ts). The test (nemesis.test.ts) only asserts what this returns.
 */
import { SELECTOR } from '../failure/helpers.ts';
import {
  checkDeletes,
  checkSent,
  checkStaleLeaderDeletes,
  checkTerminatingDeletes,
  findLeaks,
  judgePod,
  type OverdueSample,
  type Violation,
} from '../helpers/invariants.ts';
import { waitFor } from '../helpers/wait.ts';
import { type FaultRecord, runSchedule } from './injectors.ts';
import { OVERDUE_METRIC, startOverdueSampler } from './overdue-sampler.ts';
import { createPrng } from './prng.ts';
import { type RunRecord, writeArtifacts } from './report.ts';
import {
  describeEvent,
  type FaultKind,
  generateSchedule,
  type Leadership,
  type NemesisEvent,
  type RedisMode,
} from './schedule.ts';
import { type NemesisWorkload, startNemesisWorkload } from './workload.ts';
import { type NemesisWorld, startNemesisWorld } from './world.ts';

/** The run's shape and the product settings it runs with. Times in ms unless named otherwise. */
export interface NemesisConfig {
  seed: number;
  /** Length of the fault schedule. */
  durationMs: number;
  /** Fault kinds left out of the schedule (NEMESIS_EXCLUDE); normally none. */
  exclude: readonly FaultKind[];
  /** The Redis the replicas use (NEMESIS_REDIS): one server, Sentinel or Cluster. */
  redisMode: RedisMode;
  /** The leadership backend (NEMESIS_LEADERSHIP): etcd, or ZooKeeper. */
  leadership: Leadership;
  /**
   * Clusters (NEMESIS_CLUSTERS): 2 runs two sandbox API servers whose kubeconfigs name their context the same,
   * with the same namespaces, on the one Redis and the one etcd or ZooKeeper; the invariants are judged per
   * cluster, and a DELETE of one cluster's pod at the other's server is a wrong DELETE.
   */
  clusters: 1 | 2;
  context: string;
  namespaces: readonly string[];
  replicas: number;
  retentionMs: number;
  electionTtlSeconds: number;
  /** The replicas' API client timeout: a slower DELETE is abandoned and retried. */
  apiTimeoutMs: number;
  /**
   * A pod still present this long after its deadline once the faults are over is leaked. Longer than the
   * slowest recovery by design (a leader SIGKILLed with jobs in flight: TTL + BullMQ's stall detection,
   * ≈ 18 s), shorter than the self-check's step-down of a stuck leader (`overdueGraceMs` + its 5 s
   * period): a target the primary mechanisms fail to clean must show as a leak, not be rescued in time.
   */
  settleMs: number;
  /**
   * The replicas' `overdueGrace` (their default, 2 × TTL + 30 s, set explicitly), and the harness's: a pod
   * present this long past its deadline is in fact overdue, and `sdc_overdue_pods` must say so.
   */
  overdueGraceMs: number;
  /** Driver pods created per second, over all targets of all clusters. */
  podsPerSecond: number;
  /**
   * The replicas' API rate limit (per context, requests/s) and burst: low, so that DELETEs queue in the
   * limiter when many pods are due — the window a frozen or killed leader must not act on after waking —
   * yet about twice the average load (steady pods, bursts, retries), so the backlog of an outage drains
   * well within the settle time (at 5/s, seed 1's backlog of ~170 pods did not).
   */
  apiQps: number;
  apiBurst: number;
  /** Due pods dropped in every target 1 s before each fault on a replica process. */
  burstPerTarget: number;
  /** Where the run's logs and records go. */
  artifactsDir: string;
}

/** The defaults of the CI size for a seed and a schedule length. */
export function nemesisConfig(
  seed: number,
  durationMs: number,
  exclude: readonly FaultKind[] = [],
  redisMode: RedisMode = 'single',
  leadership: Leadership = 'etcd',
  clusters: 1 | 2 = 1,
): NemesisConfig {
  const electionTtlSeconds = 3;
  return {
    seed,
    durationMs,
    exclude,
    redisMode,
    leadership,
    clusters,
    context: 'nem',
    namespaces: ['nem-a', 'nem-b', 'nem-c'],
    // Two per cluster in a two-cluster world.
    replicas: clusters === 2 ? 4 : 3,
    retentionMs: 3000,
    electionTtlSeconds,
    apiTimeoutMs: 2000,
    settleMs: 35_000,
    overdueGraceMs: 2 * electionTtlSeconds * 1000 + 30_000,
    podsPerSecond: 2,
    apiQps: 10,
    apiBurst: 2,
    burstPerTarget: 4,
    artifactsDir: `test-artifacts/nemesis/seed-${seed}${redisMode === 'single' ? '' : `-${redisMode}`}${leadership === 'etcd' ? '' : `-${leadership}`}${clusters === 2 ? '-2clusters' : ''}`,
  };
}

/** The slot under libfaketime and the schedule: pure functions of the seed and the run's shape. */
export function planOf(cfg: NemesisConfig): { fakedReplica: number; schedule: NemesisEvent[] } {
  const fakedReplica = createPrng(cfg.seed)
    .fork('faked replica')
    .int(0, cfg.replicas - 1);
  const schedule = generateSchedule({
    seed: cfg.seed,
    durationMs: cfg.durationMs,
    replicas: cfg.replicas,
    fakedReplica,
    namespaces: cfg.namespaces,
    exclude: cfg.exclude,
    redisMode: cfg.redisMode,
    leadership: cfg.leadership,
  });
  return { fakedReplica, schedule };
}

/** What a run found. */
export interface NemesisRun extends RunRecord {
  /** The overdue samples (sandbox facts and replica gauges, about one a second per target). */
  samples: OverdueSample[];
  /** True once a replica's /metrics carried `sdc_overdue_pods`. */
  metricSeen: boolean;
  leaked: boolean;
  /** The last scrape after settling: replica → namespace → gauge (absent: no answer). */
  finalGauges: Record<string, Record<string, number>>;
  /** One line of figures for the log. */
  summary: string;
}

/**
 * Runs the nemesis. `onWorld` gets the world as soon as it exists, so the caller can stop it whatever
 * happens. Rejects only on harness failures (a service that cannot start, a fault that cannot be applied);
 * product failures are {@link Violation}s in the result.
 */
export async function runNemesis(
  cfg: NemesisConfig,
  onWorld: (w: NemesisWorld) => void,
): Promise<NemesisRun> {
  const { fakedReplica, schedule } = planOf(cfg);
  const w = await startNemesisWorld({
    context: cfg.context,
    namespaces: cfg.namespaces,
    replicas: cfg.replicas,
    fakedReplica,
    redisMode: cfg.redisMode,
    leadership: cfg.leadership,
    clusters: cfg.clusters,
    replicaEnv: {
      SDC_TARGETS: cfg.namespaces.map((ns) => `${cfg.context}:${ns}`).join(','),
      SDC_QUEUE_PREFIX: 'nem',
      SDC_LABEL_SELECTOR: SELECTOR,
      SDC_RETENTION: `${cfg.retentionMs}ms`,
      SDC_ELECTION_TTL_SECONDS: String(cfg.electionTtlSeconds),
      SDC_RETRY_BASE_DELAY: '200ms',
      SDC_RETRY_MAX_DELAY: '2s',
      // Redis restarted empty loses jobs and tombstones by design: the leader's reconcile restores them.
      SDC_RECONCILE_INTERVAL: '3s',
      SDC_API_TIMEOUT: `${cfg.apiTimeoutMs}ms`,
      SDC_OVERDUE_GRACE: `${cfg.overdueGraceMs}ms`,
      SDC_API_QPS: String(cfg.apiQps),
      SDC_API_BURST: String(cfg.apiBurst),
    },
  });
  onWorld(w);
  const { server } = w;
  // Every target of every cluster led before the faults start.
  for (const c of w.servers.keys())
    for (const ns of cfg.namespaces)
      await Promise.any(
        w.slots
          .filter((s) => s.cluster === c)
          .map((s) =>
            s.current?.waitForLine((l) => l.msg === 'elected leader' && l.namespace === ns, 60_000),
          ),
      );
  // One workload per cluster, the rate split between them; the person of a watch stall works on the first.
  const workloads = w.servers.map((x, c) =>
    startNemesisWorkload(x, {
      namespaces: cfg.namespaces,
      ratePerSecond: cfg.podsPerSecond / w.servers.length,
      retentionMs: cfg.retentionMs,
      actionEveryMs: 3000,
      prng: createPrng(cfg.seed).fork(c === 0 ? 'workload' : `workload ${c}`),
    }),
  );
  const workload = workloads[0] as NemesisWorkload;
  const sampler = startOverdueSampler(w, {
    context: cfg.context,
    namespaces: cfg.namespaces,
    retentionMs: cfg.retentionMs,
    graceMs: cfg.overdueGraceMs,
    everyMs: 1000,
  });
  const startedAtMs = server.clock.now();
  const runStarted = performance.now();
  const timeline = await runSchedule(w, schedule, {
    onEvent: (phase, e, rec) => {
      if (phase === 'start' && process.env.NEMESIS_VERBOSE) console.info(`[nemesis] ${describeEvent(e)}`);
      // A fault that ends far past its plan (a service that would not restart) is told at once: a run that
      // then runs out of time still says why.
      const overranMs = rec ? rec.endedAtMs - rec.startedAtMs - e.durationMs : 0;
      if (phase === 'end' && (overranMs > 30_000 || rec?.notApplied))
        console.info(
          `[nemesis] #${e.id} ${e.kind} ended ${Math.round(overranMs / 1000)} s past its plan${rec?.notApplied ? `, not applied: ${rec.notApplied}` : ''}${rec?.note ? ` (${rec.note})` : ''}`,
        );
    },
    beforeProcessFault: {
      leadMs: 1000,
      run: () => {
        for (const x of workloads) x.burst(cfg.burstPerTarget);
      },
    },
    person: workload,
  });
  for (const x of workloads) x.stop();
  console.info(
    `[nemesis] schedule over after ${Math.round((performance.now() - runStarted) / 1000)} s (planned ${Math.round(cfg.durationMs / 1000)} s); settling`,
  );

  const settledAtMs = await settle(w, cfg);
  console.info(`[nemesis] settled after ${Math.round((performance.now() - runStarted) / 1000)} s; judging`);
  // Judged per cluster, from its own server's records; a cluster other than the first names its pods `B/…`.
  const deletes = w.servers.flatMap((x) => x.requests.deletes());
  const perCluster = w.servers.map((x, c) => {
    const tag = (v: Violation): Violation => (c === 0 ? v : { ...v, pod: `${'AB'[c]}/${v.pod ?? ''}` });
    const leaks = findLeaks(
      cfg.namespaces.flatMap((ns) => x.pods.list(ns)),
      { retentionMs: cfg.retentionMs, graceMs: cfg.settleMs, nowMs: settledAtMs },
    );
    // Who sent each DELETE: the recording proxy of the cluster's replica whose DELETE of that UID came closest.
    const sent = w.slots
      .filter((s) => s.cluster === c)
      .flatMap((s) => s.proxy.deletes().map((r) => ({ ...r, replica: s.id })));
    const sender = (rec: { preconditionUid?: string; atMs: number }) =>
      sent
        .filter((r) => r.uid !== undefined && r.uid === rec.preconditionUid)
        .sort((a, b) => Math.abs(a.atMs - rec.atMs) - Math.abs(b.atMs - rec.atMs))[0]?.replica;
    const records = x.requests.deletes();
    const wl = workloads[c] as NemesisWorkload;
    // Each DELETE judged by the retention of the process that sent it (the handler's own deadline).
    const retentionOf = senderRetention(w, sender, cfg.retentionMs);
    return {
      leaks: leaks.map(tag),
      violations: [
        ...checkDeletes(records, {
          retentionMs: cfg.retentionMs,
          retentionOf,
          apiFaultWindows: c === 0 ? apiFaultWindows(timeline) : [],
          knownUids: wl.uids,
          sender,
          abandonedUids: new Set(sent.flatMap((r) => (r.abandoned && r.uid ? [r.uid] : []))),
        }),
        ...checkSent(sent),
        // The leaders sampled from ZooKeeper are the first cluster's.
        ...(c === 0
          ? checkStaleLeaderDeletes(
              // One window per fault that sampled (a follower cut): spans never bridge two of them.
              timeline.flatMap((f, window) => (f.leaders ?? []).map((l) => ({ ...l, window }))),
              sent,
            )
          : []),
        ...checkTerminatingDeletes(records, wl.personDeletedAt, cfg.retentionMs, retentionOf),
      ].map(tag),
    };
  });
  const leaks = perCluster.flatMap((p) => p.leaks);
  const election = await electionKeys(w, cfg);
  const violations: Violation[] = [
    ...perCluster.flatMap((p) => p.violations),
    ...leaks,
    ...exitViolations(w),
  ].sort((a, b) => (a.atMs ?? 0) - (b.atMs ?? 0));

  // The self-check gauge back to 0 once nothing is overdue (only meaningful when nothing leaked).
  let finalGauges: Record<string, Record<string, number>> = {};
  if (sampler.metricSeen && leaks.length === 0) {
    await waitFor(
      `${OVERDUE_METRIC} back to 0 on every replica`,
      async () => {
        finalGauges = await sampler.scrape();
        return w.slots.every((s) => cfg.namespaces.every((ns) => finalGauges[s.id]?.[ns] === 0));
      },
      60_000,
      1000,
    ).catch(() => undefined);
  }
  await sampler.stop();

  const applied = deletes.filter((d) => d.applied).length;
  const lost = w.zookeeperFront
    ? `create ${w.zookeeperFront.stats.dropped}`
    : [...(w.etcdProxy?.stats.dropped ?? [])].map(([p, n]) => `${p.split('/').pop()} ${n}`).join(', ');
  const c = workloads
    .map((x) => x.counts)
    .reduce(
      (sum, x) =>
        Object.fromEntries(
          Object.entries(sum).map(([k, v]) => [k, v + x[k as keyof typeof x]]),
        ) as typeof sum,
    );
  const notApplied = timeline.filter((f) => f.notApplied);
  const summary =
    `seed ${cfg.seed}${w.servers.length > 1 ? `, ${w.servers.length} clusters` : ''}: ${schedule.length} faults in ${(cfg.durationMs / 1000).toFixed(0)} s; ${c.drivers} + ${c.burst} (bursts) drivers, ` +
    `${c.recreated} re-created, ${c.relabelled} relabelled, ${c.held} held and deleted by a person, ${c.bystanders} bystanders; ${deletes.length} DELETEs ` +
    `(${applied} applied); ${cfg.leadership} answers lost: ${lost || 'none'}; ${violations.length} violation(s); ` +
    `schedule + settle ${((performance.now() - runStarted) / 1000).toFixed(0)} s` +
    (notApplied.length > 0
      ? `; ${notApplied.length} fault(s) not applied: ${notApplied.map((f) => `#${f.event.id} ${f.event.kind} (${f.notApplied})`).join('; ')}`
      : '');
  const run: NemesisRun = {
    seed: cfg.seed,
    durationMs: cfg.durationMs,
    exclude: cfg.exclude,
    redisMode: cfg.redisMode,
    leadership: cfg.leadership,
    clusters: cfg.clusters,
    schedule,
    timeline,
    startedAtMs,
    violations,
    endState: election,
    samples: sampler.samples,
    metricSeen: sampler.metricSeen,
    leaked: leaks.length > 0,
    finalGauges,
    summary,
  };
  writeArtifacts(cfg.artifactsDir, run, { slots: w.slots, deletes, samples: sampler.samples });
  return run;
}

/**
 * Waits until no pod is left to clean, or until the last deadline plus the settle time has passed (then
 * whatever is left is leaked). Returns the sandbox time it ended.
 */
async function settle(w: NemesisWorld, cfg: NemesisConfig): Promise<number> {
  const { server } = w;
  const pending = () =>
    w.servers.flatMap((x) =>
      cfg.namespaces.flatMap((ns) =>
        x.pods
          .list(ns)
          .filter((p) => !p.metadata?.deletionTimestamp)
          .map((p) => judgePod(p, cfg.retentionMs))
          .filter((j) => j.selected && j.deadlineMs !== undefined),
      ),
    );
  const lastDeadline = Math.max(server.clock.now(), ...pending().map((j) => j.deadlineMs ?? 0));
  await waitFor(
    'every pod cleaned, or the settle time over',
    () => pending().length === 0 || server.clock.now() >= lastDeadline + cfg.settleMs,
    lastDeadline + cfg.settleMs - server.clock.now() + 10_000,
    250,
  );
  return server.clock.now();
}

/**
 * The candidates in each target's election after settling, leader first, read from the store itself: for the
 * diagnosis of a target nobody cleans, not for any invariant.
 */
async function electionKeys(w: NemesisWorld, cfg: NemesisConfig): Promise<string[]> {
  try {
    return await Promise.all(
      [...w.servers.keys()].flatMap((c) =>
        cfg.namespaces.map(
          async (namespace) =>
            `election ${c > 0 ? `${'AB'[c]}/` : ''}${namespace}: ${(await w.candidates(namespace, c)).join(' < ') || 'no candidate'}`,
        ),
      ),
    );
  } catch (err) {
    return [`election keys unreadable: ${(err as Error).message}`];
  }
}

/**
 * The retention of the replica process that sent a DELETE (`retention-change` runs one with its own): the
 * sender's slot (its recording proxy), then its process alive when the DELETE arrived, or that exited within
 * {@link EXIT_TAIL_MS} before (its last DELETEs still on their way); the shortest when two qualify.
 */
function senderRetention(
  w: NemesisWorld,
  sender: (rec: { preconditionUid?: string; atMs: number }) => string | undefined,
  fleetMs: number,
): (rec: { preconditionUid?: string; atMs: number }) => number | undefined {
  return (rec) => {
    const slot = w.slots.find((s) => s.id === sender(rec));
    if (!slot) return undefined;
    const retentions = slot.generations
      .map((proc) => slot.lifeOf(proc))
      .filter(
        (l) =>
          l.startedAtMs <= rec.atMs && rec.atMs <= (l.exitedAtMs ?? Number.POSITIVE_INFINITY) + EXIT_TAIL_MS,
      )
      .map((l) => (l.env.SDC_RETENTION ? Number.parseInt(l.env.SDC_RETENTION, 10) : fleetMs));
    return retentions.length > 0 ? Math.min(...retentions) : undefined;
  };
}

/** How long after a process's exit a DELETE it sent may still arrive, ms. */
const EXIT_TAIL_MS = 2000;

/** Windows of API faults that can hit DELETEs (verb delete or all); a slow answer ends its latency later. */
function apiFaultWindows(timeline: readonly FaultRecord[]): { fromMs: number; toMs: number }[] {
  return timeline.flatMap((f) => {
    const e = f.event;
    if (e.kind === 'delete-outage') return [{ fromMs: f.startedAtMs, toMs: f.endedAtMs }];
    if (e.kind !== 'api-status' && e.kind !== 'api-reset' && e.kind !== 'api-slow') return [];
    if (e.verb !== 'delete' && e.verb !== '*') return [];
    return [{ fromMs: f.startedAtMs, toMs: f.endedAtMs + (e.kind === 'api-slow' ? e.latencyMs : 0) }];
  });
}

/** Replica processes that exited without the nemesis ending them (a crash), or are not running at the end. */
function exitViolations(w: NemesisWorld): Violation[] {
  const out: Violation[] = [];
  for (const slot of w.slots) {
    slot.generations.forEach((proc, i) => {
      const code = proc.child.exitCode;
      const signal = proc.child.signalCode;
      const sent = slot.signalsOf(proc);
      const last = i === slot.generations.length - 1;
      // Ours: our SIGKILL; our SIGTERM (exit 0, or the signal itself while still starting); the last one runs.
      const ended =
        (signal === 'SIGKILL' && sent.includes('SIGKILL')) ||
        (sent.includes('SIGTERM') && (code === 0 || signal === 'SIGTERM'));
      if (last ? code === null && signal === null : ended) return;
      out.push({
        invariant: 'replica-exit',
        pod: `${slot.id} process ${i + 1}`,
        detail: `exited on its own (code ${code}, signal ${signal}): ${proc.stderr().slice(-300)}`,
      });
    });
  }
  return out;
}
