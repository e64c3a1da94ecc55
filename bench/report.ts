/**
 * Renders a results file as `REPORT.md` plus its SVG charts (deletes-per-pod.svg, lateness.svg,
 * burst.svg) in one directory. Every performance target is listed with the measured figure and whether
 * it was met; a missed target stays in the report as measured. Benchmarks absent from the results are
 * left out. `node bench/report.ts [results.json]` re-renders from a file.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchResults } from './results.ts';
import { scaleSection, scaleTargetRows } from './scale.ts';
import { barChart, lineChart } from './svg-chart.ts';

/** One row of the targets table. */
export interface TargetRow {
  what: string;
  target: string;
  measured: string;
  /** true met, false missed, undefined no target (informative). */
  met: boolean | undefined;
}

const COORD = '#1f77b4';
const BASE = '#d62728';
const OTHER = '#2ca02c';

/** 150 MB (10^6 bytes) in MiB. */
const RSS_TARGET_MIB = 150e6 / 2 ** 20;

/** ", as deployed (memory limit N MiB)" for a run in the Deployment's memory cgroup, else "". */
const deployedTag = (limitBytes: number | undefined) =>
  limitBytes === undefined ? '' : `, as deployed (memory limit ${limitBytes / 2 ** 20} MiB)`;

function mark(met: boolean | undefined): string {
  return met === undefined ? '—' : met ? 'met' : '**missed**';
}

/** The targets table of `r`: one row per measured figure that has a target. */
export function targetRows(r: BenchResults): TargetRow[] {
  const rows: TargetRow[] = [];
  const b = r.benchmarks;
  for (const run of b.deletesPerPod?.runs ?? []) {
    const label = `${run.mode}${run.mode === 'coordinated' ? `, ${run.recheck}` : ''}, ${run.replicas} replica(s)`;
    const want = run.mode === 'coordinated' ? 1 : run.replicas;
    rows.push({
      what: `DELETE requests per pod — ${label}`,
      target: run.mode === 'coordinated' ? '1.00' : `${want} (baseline: N)`,
      measured: `${run.deletesPerPod.toFixed(2)}`,
      met: run.mode === 'coordinated' ? run.deletesPerPod === 1 && run.leaked === 0 : undefined,
    });
  }
  for (const run of (b.deletesPerPod?.runs ?? []).filter(
    (x) => x.mode === 'coordinated' && x.replicas === 3,
  )) {
    rows.push({
      what: `API requests (GET + DELETE) per cleaned pod — recheck ${run.recheck}, 3 replicas`,
      target: run.recheck === 'live' ? '(2 by design)' : '(1 by design)',
      measured: run.apiRequestsPerPod.toFixed(2),
      met: undefined,
    });
  }
  if (b.failover) {
    for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
      const ts = b.failover.trials.filter((t) => t.signal === signal);
      if (!ts.length) continue;
      const worst = Math.max(...ts.map((t) => t.firstDeleteAfterMs ?? Number.POSITIVE_INFINITY));
      const target = ts[0]?.targetMs ?? 0;
      rows.push({
        what: `Failover, leader ${signal} → first DELETE by the new leader (worst of ${ts.length})`,
        target: `≤ ${target} ms${signal === 'SIGKILL' ? ` (TTL ${b.failover.config.electionTtlSeconds} s + 1 s)` : ''}`,
        measured: `${worst} ms`,
        met: worst <= target,
      });
    }
  }
  const frozen = b.failover?.frozen;
  if (frozen?.trials.length) {
    const worst = Math.max(
      ...frozen.trials.map((t) => t.lastDeleteAfterElectionMs ?? Number.POSITIVE_INFINITY),
    );
    const target = frozen.trials[0]?.targetMs ?? 0;
    const c = frozen.config;
    rows.push({
      what:
        `Leader frozen ${c.frozenMs / 1000} s holding ${c.pods} due jobs → last DELETE after the new leader's ` +
        `election (worst of ${frozen.trials.length}; pods' lateness max ` +
        `${Math.max(...frozen.trials.map((t) => t.latenessMaxMs))} ms)`,
      target: `≤ ${target} ms (TTL ${c.electionTtlSeconds} s + 1 s)`,
      measured: `${worst} ms`,
      met: worst <= target,
    });
  }
  for (const run of b.lateness?.runs ?? []) {
    const pods = b.lateness?.config.pods ?? 0;
    const windowS = (b.lateness?.config.windowMs ?? 0) / 1000;
    // The target holds for the default mode. `live` spends two requests per pod: at the default 20 QPS it
    // cleans 10 pods/s, so this load (pods / window) needs twice its rate in QPS — a reference row.
    const byDesign = run.recheck === 'live';
    rows.push({
      what: `Lateness after the deadline, ${pods} pods over ${windowS} s — recheck ${run.recheck}`,
      target: byDesign
        ? `(2 requests per pod: needs ≥ ${Math.ceil((2 * pods) / windowS)} QPS, default 20)`
        : 'p99 ≤ 1000 ms',
      measured: `p50 ${run.server.p50} ms, p99 ${run.server.p99} ms`,
      met: byDesign ? undefined : run.server.p99 <= 1000 && run.leaked === 0,
    });
  }
  for (const run of b.burst?.runs ?? []) {
    rows.push({
      what: `Burst of ${b.burst?.config.pods} due pods, one leader, no limit — recheck ${run.recheck}, concurrency ${run.concurrency}${deployedTag(run.memoryLimitBytes)}`,
      target: '≥ 0.5 × raw DELETE rate',
      measured: `${run.podsPerSecond} pods/s = ${run.ratioToRaw} × ${b.burst?.raw.deletesPerSecond}/s${b.burst?.rawTrials ? ` (median of raw ${b.burst.rawTrials.join(', ')})` : ''}`,
      met: run.ratioToRaw >= 0.5 && run.leaked === 0,
    });
  }
  if (b.apiRate) {
    rows.push({
      what: `Achieved API rate at the default limit (${b.apiRate.config.qps} QPS)`,
      target: `within 5 % of ${b.apiRate.config.qps}/s`,
      measured: `${b.apiRate.achievedQps}/s (${(b.apiRate.relativeError * 100).toFixed(1)} %)`,
      met: b.apiRate.relativeError <= 0.05,
    });
  }
  if (b.cost) {
    const c = b.cost;
    const limit = c.memory.find((m) => m.memoryLimitBytes !== undefined)?.memoryLimitBytes;
    const rss = (steady: number | undefined, burst: number | undefined) =>
      `${steady ?? '—'} MiB (${burst ?? '—'} MiB right after the enqueue)`;
    if (c.deployedRssMiB !== undefined && limit !== undefined) {
      rows.push({
        what:
          `RSS of a replica as deployed (compiled, in a cgroup limited to the Deployment's ${limit / 2 ** 20} MiB) ` +
          `watching ${c.config.pods} pods, steady`,
        target: '≤ 150 MB (143 MiB)',
        measured: rss(c.deployedSteadyRssMiB, c.deployedRssMiB),
        met: c.deployedSteadyRssMiB === undefined ? undefined : c.deployedSteadyRssMiB <= RSS_TARGET_MIB,
      });
    } else if (c.deployedNote) {
      rows.push({
        what: 'RSS as deployed',
        target: '≤ 150 MB (143 MiB)',
        measured: c.deployedNote,
        met: undefined,
      });
    }
    if (c.compiledRssMiB !== undefined) {
      rows.push({
        what: `RSS of a compiled replica without a memory limit watching ${c.config.pods} pods, steady (reference)`,
        target: '—',
        measured: rss(c.compiledSteadyRssMiB, c.compiledRssMiB),
        met: undefined,
      });
    }
    rows.push({
      what: `RSS of a coordinated replica from source (type stripping) watching ${c.config.pods} pods, worst (reference)`,
      target: '—',
      measured: `${c.maxCoordinatedRssMiB} MiB right after the enqueue`,
      met: undefined,
    });
    rows.push({
      what: 'Redis memory per pending job',
      target: '≤ 1024 B',
      measured: `${b.cost.redisBytesPerPendingJob} B`,
      met: b.cost.redisBytesPerPendingJob <= 1024,
    });
    rows.push({
      what: 'Redis commands per terminated pod per replica (enqueue only)',
      target: '—',
      measured: String(b.cost.redisCommandsPerPodPerReplica),
      met: undefined,
    });
  }
  for (const run of (b.deletesPerPod?.runs ?? []).filter((x) => x.mode === 'coordinated')) {
    rows.push({
      what: `Redis commands per pod per replica, whole lifecycle — ${run.recheck}, ${run.replicas} replica(s)`,
      target: '—',
      measured: String(run.redisCommandsPerPodPerReplica),
      met: undefined,
    });
  }
  if (b.scale) rows.push(...scaleTargetRows(b.scale));
  return rows;
}

function machineSection(r: BenchResults): string[] {
  const m = r.machine;
  return [
    '## Machine',
    '',
    `| | |`,
    `|---|---|`,
    `| Date | ${m.date} |`,
    `| CPU | ${m.cores} × ${m.cpuModel} |`,
    `| Memory | ${m.memoryMiB} MiB (${m.freeMemoryMiB} MiB free at start) |`,
    `| Node | ${m.node} (${m.platform}) |`,
    `| Redis / etcd | ${m.redis} / ${m.etcd} |`,
    ...(m.zookeeper ? [`| ZooKeeper | ${m.zookeeper} |`] : []),
    `| Load average (1/5/15 min) | start ${m.loadAverageAtStart.join(' / ')}, end ${m.loadAverageAtEnd.join(' / ')} |`,
    `| Run | \`${r.quick ? 'bench --quick' : 'bench'}\`, ${Math.round(r.durationMs / 1000)} s |`,
    ...(r.reruns ?? []).map(
      (x) =>
        `| Re-run of ${x.benchmarks.join(', ')} | ${x.machine.date}, load ${x.machine.loadAverageAtStart.join(' / ')} → ` +
        `${x.machine.loadAverageAtEnd.join(' / ')}, ${Math.round(x.durationMs / 1000)} s: ${x.reason} |`,
    ),
    '',
  ];
}

/** The worst (largest) of some figures; null when there is none. */
const worst = (xs: readonly (number | null | undefined)[]): number | null => {
  const known = xs.filter((x): x is number => typeof x === 'number');
  return known.length > 0 ? Math.max(...known) : null;
};

/** `deletes` and `failover` on each leadership backend, one row each (`--leadership etcd,zookeeper`). */
function leadershipSection(b: BenchResults['benchmarks']): string[] {
  const rows = Object.entries(b.byLeadership ?? {});
  if (rows.length === 0) return [];
  const ms = (x: number | null) => (x === null ? '—' : `${x}`);
  return [
    '## Leadership backends side by side',
    '',
    'The same fleets, workload and API server, electing on etcd or on ZooKeeper (election TTL and ZooKeeper ' +
      'session timeout alike). DELETE/pod: the coordinated fleet of the `deletes` benchmark (default re-check). ' +
      'Failover: ms from the signal to the first DELETE of the new leader (worst of the trials).',
    '',
    '| Backend | DELETE/pod | leaked | SIGKILL → first DELETE | SIGTERM → first DELETE | frozen leader: last DELETE after the election | frozen: DELETEs (accepted) / pods |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...rows.map(([backend, x]) => {
      const coordinated = x?.deletesPerPod?.runs.find((r) => r.mode === 'coordinated');
      const trials = x?.failover?.trials ?? [];
      const first = (signal: string) =>
        ms(worst(trials.filter((t) => t.signal === signal).map((t) => t.firstDeleteAfterMs)));
      const frozen = x?.failover?.frozen;
      const frozenDeletes = frozen?.trials
        .map((t) => `${t.deleteRequests} (${t.acceptedDeletes})`)
        .join(', ');
      return (
        `| ${backend} | ${coordinated ? coordinated.deletesPerPod.toFixed(2) : '—'} | ${coordinated?.leaked ?? '—'} | ` +
        `${first('SIGKILL')} | ${first('SIGTERM')} | ${ms(worst(frozen?.trials.map((t) => t.lastDeleteAfterElectionMs) ?? []))} | ` +
        `${frozenDeletes ?? '—'} / ${frozen?.config.pods ?? '—'} |`
      );
    }),
    '',
  ];
}

function detailSections(r: BenchResults): string[] {
  const b = r.benchmarks;
  const out: string[] = [...leadershipSection(b)];
  if (b.deletesPerPod) {
    out.push(
      '## DELETEs and API requests per pod',
      '',
      `${b.deletesPerPod.config.pods} terminated driver pods per fleet, retention ${b.deletesPerPod.config.retention}, ` +
        `API limit ${b.deletesPerPod.config.apiQps} QPS (raised so the runs are short; counts do not depend on it).`,
      '',
      '![DELETE requests per pod](deletes-per-pod.svg)',
      '',
      '| Fleet | Replicas | DELETE/pod | DELETE codes | GET+DELETE/pod | Redis cmds/pod/replica | warn lines | leaked | time |',
      '|---|---:|---:|---|---:|---:|---:|---:|---:|',
      ...b.deletesPerPod.runs.map(
        (x) =>
          `| ${x.mode}${x.mode === 'coordinated' ? ` (${x.recheck})` : ''} | ${x.replicas} | ${x.deletesPerPod.toFixed(2)} | ` +
          `${Object.entries(x.deleteCodes)
            .map(([c, n]) => `${c}×${n}`)
            .join(
              ', ',
            )} | ${x.apiRequestsPerPod.toFixed(2)} | ${x.redisCommandsPerPodPerReplica} | ${x.warnLines} | ${x.leaked} | ${(x.durationMs / 1000).toFixed(1)} s |`,
      ),
      '',
    );
  }
  if (b.failover) {
    out.push(
      '## Failover',
      '',
      `${b.failover.config.replicas} replicas, election TTL ${b.failover.config.electionTtlSeconds} s, ` +
        `${b.failover.config.pods} already-due pods created right after each signal. Times in ms after the signal.`,
      '',
      '| Signal | Trial | New leader elected | First DELETE (API server) | First DELETE logged by new leader | All deleted | DELETEs |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...b.failover.trials.map(
        (t) =>
          `| ${t.signal} | ${t.trial} | ${t.electedAfterMs ?? '—'} | ${t.firstDeleteAfterMs ?? '—'} | ${t.newLeaderFirstDeleteAfterMs ?? '—'} | ${t.allDeletedAfterMs} | ${t.deleteRequests} |`,
      ),
      '',
    );
    const f = b.failover.frozen;
    if (f) {
      out.push(
        '### Frozen leader',
        '',
        `${f.config.replicas} replicas, election TTL ${f.config.electionTtlSeconds} s, re-check \`live\`: the leader ` +
          `is frozen (SIGSTOP) holding ${f.config.pods} due jobs in flight (their GETs held at the API server) and ` +
          `woken ${f.config.frozenMs / 1000} s later. Times in ms after the freeze; lateness = DELETE arrival − deadline.`,
        '',
        '| Trial | New leader elected | Jobs taken over | First DELETE | Last DELETE | Last DELETE after the election | Lateness p50 / max | DELETEs (accepted) |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|',
        ...f.trials.map(
          (t) =>
            `| ${t.trial} | ${t.electedAfterMs ?? '—'} | ${t.tookOver} | ${t.firstDeleteAfterMs ?? '—'} | ${t.lastDeleteAfterMs ?? '—'} | ${t.lastDeleteAfterElectionMs ?? '—'} | ${t.latenessP50Ms} / ${t.latenessMaxMs} | ${t.deleteRequests} (${t.acceptedDeletes}) |`,
        ),
        '',
      );
    }
  }
  if (b.lateness) {
    const c = b.lateness.config;
    out.push(
      '## Lateness',
      '',
      `${c.pods} pods due over ${c.windowMs / 1000} s (deadlines on whole seconds), ${c.replicas} replicas, default API ` +
        'limit 20 QPS / burst 30. Lateness = arrival of the DELETE at the API server − the deadline.',
      '',
      '![Lateness CDF](lateness.svg)',
      '',
      '| Recheck | p50 | p90 | p99 | max | min | logged p99 | DELETEs | leaked | drain |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...b.lateness.runs.map(
        (x) =>
          `| ${x.recheck} | ${x.server.p50} | ${x.server.p90} | ${x.server.p99} | ${x.server.max} | ${x.server.min} | ${x.logged.p99} | ${x.deleteRequests} | ${x.leaked} | ${(x.drainMs / 1000).toFixed(1)} s |`,
      ),
      '',
    );
  }
  if (b.burst) {
    out.push(
      '## Burst and API rate',
      '',
      `Raw loop (plain client, 16 in flight, 1 watch): ${b.burst.raw.deletesPerSecond} DELETE/s over ${b.burst.raw.pods} pods${b.burst.rawTrials ? ` (the median of ${b.burst.rawTrials.length} trials: ${b.burst.rawTrials.join(', ')})` : ''}. ` +
        'One leader, SDC_API_QPS=10⁵ (no effective limit):',
      '',
      '![Burst](burst.svg)',
      '',
      '| Recheck | Concurrency | Memory limit | pods/s | ratio to raw | peak 1 s | enqueue | due before enqueued? | DELETEs | GETs | leaked | CPU leader / Redis / etcd / API server | leader CPU ms/pod |',
      '|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---|---:|',
      ...b.burst.runs.map(
        (x) =>
          `| ${x.recheck} | ${x.concurrency} | ${x.memoryLimitBytes === undefined ? 'none' : `${x.memoryLimitBytes / 2 ** 20} MiB (as deployed)`} | ${x.podsPerSecond} | ${x.ratioToRaw} | ${x.peakPodsPerSecond} | ${(x.enqueueMs / 1000).toFixed(1)} s | ${x.enqueuedBeforeDeadline ? 'no' : '**yes**'} | ${x.deleteRequests} | ${x.getRequests} | ${x.leaked} | ${x.cpuShare.leader} / ${x.cpuShare.redis} / ${x.cpuShare.etcd} / ${x.cpuShare.apiServerAndBench} | ${x.leaderCpuMsPerPod} |`,
      ),
      '',
      'CPU columns: cores busy on average while cleaning (1.00 = one core all the time).',
      '',
    );
  }
  if (b.apiRate) {
    out.push(
      `Default limit: ${b.apiRate.config.pods} due pods, one leader at ${b.apiRate.config.qps} QPS (burst ${b.apiRate.config.burst}), ` +
        `live re-check: ${b.apiRate.achievedQps} requests/s (${b.apiRate.deletesPerSecond} DELETE/s) over ${b.apiRate.config.windowMs / 1000} s after a ${b.apiRate.config.warmupMs / 1000} s warm-up.`,
      '',
    );
  }
  if (b.cost) {
    const c = b.cost;
    out.push(
      '## Cost',
      '',
      `${c.config.pods} terminated pods pending (retention ${c.config.retention}), enqueued in ${(c.enqueueMs / 1000).toFixed(1)} s. ` +
        `Redis used_memory ${c.redisUsedMemoryBefore} → ${c.redisUsedMemoryAfter} B = ${c.redisBytesPerPendingJob} B per pending job; ` +
        `${c.redisCommands} commands while enqueueing = ${c.redisCommandsPerPodPerReplica} per pod per replica.`,
      '',
      'RSS "after enqueue" is taken as soon as Redis is quiet; "steady" once V8\'s memory reducer has returned the ' +
        'heap the enqueue burst grew (it runs ~100 s after the last full GC in a quiet process).',
      '',
      '| Replica | Mode | Build | Memory limit | RSS idle | RSS after enqueue (anon / file-backed) | Peak RSS | RSS steady (anon / file-backed) | Steady after |',
      '|---|---|---|---|---:|---:|---:|---:|---:|',
      ...c.memory.map((m) => {
        const limit = m.memoryLimitBytes === undefined ? 'none' : `${m.memoryLimitBytes / 2 ** 20} MiB`;
        const steady = m.steady
          ? `${m.steady.rssMiB} MiB (${m.steady.anonRssMiB} / ${m.steady.fileRssMiB})`
          : '—';
        const after =
          m.steady?.droppedAfterMs === undefined ? '—' : `${Math.round(m.steady.droppedAfterMs / 1000)} s`;
        return `| ${m.replica} | ${m.mode} | ${m.build} | ${limit} | ${m.idleRssMiB} MiB | ${m.rssMiB} MiB (${m.anonRssMiB} / ${m.fileRssMiB}) | ${m.peakRssMiB} MiB | ${steady} | ${after} |`;
      }),
      '',
    );
  }
  if (b.scale) out.push(...scaleSection(b.scale));
  return out;
}

function charts(r: BenchResults): Record<string, string> {
  const out: Record<string, string> = {};
  const b = r.benchmarks;
  // The main runs: every replica count in the default re-check mode (older result files: `cache` was the extra run).
  const others: string[] = b.deletesPerPod?.config.otherRecheckModes ?? ['cache'];
  const live = (b.deletesPerPod?.runs ?? []).filter(
    (x) => x.mode === 'baseline' || !others.includes(x.recheck),
  );
  if (live.length) {
    const ns = [...new Set(live.map((x) => x.replicas))].sort((a, c) => a - c);
    const val = (mode: string) =>
      ns.map((n) => live.find((x) => x.mode === mode && x.replicas === n)?.deletesPerPod ?? Number.NaN);
    out['deletes-per-pod.svg'] = barChart({
      title: 'DELETE requests per terminated driver pod',
      xLabel: 'replicas',
      yLabel: 'DELETE requests per pod',
      categories: ns.map(String),
      series: [
        { name: 'coordinated', color: COORD, values: val('coordinated') },
        { name: 'baseline (uncoordinated)', color: BASE, values: val('baseline') },
      ],
    });
  }
  if (b.lateness?.runs.length) {
    out['lateness.svg'] = lineChart({
      title: 'Lateness of DELETEs after the deadline (CDF)',
      xLabel: 'lateness, s',
      yLabel: 'share of pods, %',
      series: b.lateness.runs.map((x, i) => {
        const sorted = [...x.serverLatenessMs].sort((a, c) => a - c);
        return {
          name: `recheck ${x.recheck}`,
          color: [COORD, OTHER][i] ?? BASE,
          values: sorted.map((v, k) => [v / 1000, ((k + 1) / sorted.length) * 100] as [number, number]),
        };
      }),
    });
  }
  if (b.burst?.runs.length) {
    const raw = b.burst.raw;
    const maxT = Math.max(...b.burst.runs.map((x) => x.cleanMs));
    out['burst.svg'] = lineChart({
      title: `${b.burst.config.pods} pods due at once: DELETEs sent`,
      xLabel: 's after the deadline',
      yLabel: 'DELETE requests',
      series: [
        ...b.burst.runs.map((x, i) => ({
          name: `${x.recheck}, concurrency ${x.concurrency}${x.memoryLimitBytes === undefined ? '' : ', as deployed'}`,
          color: [COORD, OTHER, '#9467bd', '#8c564b'][i] ?? '#e377c2',
          values: x.series.map(([t, v]) => [t / 1000, v] as [number, number]),
        })),
        {
          name: 'raw client loop',
          color: BASE,
          values: [
            [0, 0],
            [
              Math.min(maxT, raw.elapsedMs) / 1000,
              Math.min(raw.pods, (raw.deletesPerSecond * Math.min(maxT, raw.elapsedMs)) / 1000),
            ],
          ] as [number, number][],
        },
      ],
    });
  }
  return out;
}

/**
 * Writes `REPORT.md` and its charts into `dir`, created when missing (a quick run's `bench/results/quick/`
 * does not exist on a fresh clone); `resultsPath` is linked from the report.
 */
export function renderReport(r: BenchResults, dir: string, resultsPath: string): void {
  const svgs = charts(r);
  mkdirSync(dir, { recursive: true });
  for (const [name, svg] of Object.entries(svgs)) writeFileSync(join(dir, name), svg);
  const rows = targetRows(r);
  const missed = rows.filter((x) => x.met === false);
  const md = [
    `# Benchmark report (${r.quick ? 'quick' : 'full'} run)`,
    '',
    `Generated by \`npm run bench${r.quick ? ' -- --quick' : ''}\` from [${basename(resultsPath)}](${relative(dir, resultsPath)}), ` +
      'which keeps every raw figure. The product (coordinated replicas: `spark-driver-cleaner run`) and the ' +
      'uncoordinated baseline (every replica deletes on its own timer, as Kyuubi does) run against the same ' +
      'sandbox API server, real Redis and real etcd, one fleet at a time, on this machine:',
    '',
    ...machineSection(r),
    '## Targets',
    '',
    missed.length
      ? `${missed.length} target(s) missed: ${missed.map((x) => x.what).join('; ')}. See bench/README.md for what limits them.`
      : 'Every target with a figure in this run was met.',
    '',
    '| Measure | Target | Measured | |',
    '|---|---|---|---|',
    ...rows.map((x) => `| ${x.what} | ${x.target} | ${x.measured} | ${mark(x.met)} |`),
    '',
    ...detailSections(r),
  ].join('\n');
  writeFileSync(join(dir, 'REPORT.md'), md);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = process.argv[2] ?? fileURLToPath(new URL('./results/full.json', import.meta.url));
  const results = JSON.parse(readFileSync(path, 'utf8')) as BenchResults;
  renderReport(results, fileURLToPath(new URL('.', import.meta.url)), path);
}
