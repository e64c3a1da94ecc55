/**
 * The demo's summary: one object computed from what the sandbox API servers saw (their pods and their
 * request logs, the ground truth for DELETE counts) and what the replicas logged (outcomes, lateness,
 * elections), printed as JSON (`--json`) or as a table; and the verdict that decides the exit code.
 */

/** The summary of one demo run. Field names are the documented JSON output. */
export interface DemoSummary {
  replicas: number;
  /** `context:namespace` of every target. */
  targets: string[];
  pods_created: number;
  pods_terminated: number;
  /** Terminated drivers no longer present in their API server. */
  pods_deleted: number;
  /** Terminated drivers past `deadline + leak grace` and still present. */
  pods_leaked: number;
  /**
   * Overdue driver pods as the cleaner's own self-check reported them at the end (`sdc_overdue_pods`
   * summed over the targets), to compare with `pods_leaked`; `null` in the baseline or when no replica answered.
   */
  overdue_pods_reported: number | null;
  /** DELETE requests received by the API servers (answered or not). */
  delete_requests: number;
  /** DELETE requests per terminated driver: `max` over all, `mean` over those that got at least one. */
  delete_requests_per_pod: { max: number; mean: number };
  noop_outcomes: number;
  failed_outcomes: number;
  /** Accepted DELETE time after the deadline (`finishedAt + retention`), ms. */
  lateness_ms: { p50: number; p99: number };
  /** target → replica leading it at the end (`null` when none; empty in the baseline). */
  leaders: Record<string, string | null>;
  /** Elections after a target's first that followed a failed leader (lease lost, replica killed). */
  failovers: number;
  /** Elections after a target's first that followed a term ended on purpose (resigned, balancing handover). */
  handovers: number;
}

/** A driver that reached a terminal phase, and where it stands now. */
export interface TerminatedDriverState {
  uid: string;
  /** `finishedAt`, epoch ms. */
  finishedAtMs: number;
  /** Still present (same UID) in its API server. */
  present: boolean;
  /** DELETE requests its API server logged for its UID. */
  deleteRequests: number;
}

/** Everything {@link computeSummary} needs; all times epoch ms or ms. */
export interface SummaryInput {
  replicas: number;
  targets: string[];
  podsCreated: number;
  terminated: readonly TerminatedDriverState[];
  /** All DELETE requests, including any not attributable to a terminated driver. */
  deleteRequests: number;
  outcomes: { noop: number; failed: number; latenessMs: readonly number[] };
  leaders: Record<string, string | null>;
  /** The self-check's overdue count at the end (null: unknown). */
  overduePodsReported: number | null;
  failovers: number;
  handovers: number;
  retentionMs: number;
  /** Margin past the deadline before a present pod counts as leaked, ms. */
  leakGraceMs: number;
  nowMs: number;
}

/** Nearest-rank percentile of `values` (`p` in 0..100); 0 for an empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/** Computes the summary. Pure. */
export function computeSummary(input: SummaryInput): DemoSummary {
  const t = input.terminated;
  const deleted = t.filter((d) => !d.present).length;
  const leaked = t.filter(
    (d) => d.present && input.nowMs > d.finishedAtMs + input.retentionMs + input.leakGraceMs,
  ).length;
  const touched = t.filter((d) => d.deleteRequests > 0);
  const mean = touched.length ? touched.reduce((s, d) => s + d.deleteRequests, 0) / touched.length : 0;
  return {
    replicas: input.replicas,
    targets: [...input.targets],
    pods_created: input.podsCreated,
    pods_terminated: t.length,
    pods_deleted: deleted,
    pods_leaked: leaked,
    overdue_pods_reported: input.overduePodsReported,
    delete_requests: input.deleteRequests,
    delete_requests_per_pod: {
      max: t.reduce((m, d) => Math.max(m, d.deleteRequests), 0),
      mean: Math.round(mean * 100) / 100,
    },
    noop_outcomes: input.outcomes.noop,
    failed_outcomes: input.outcomes.failed,
    lateness_ms: {
      p50: Math.round(percentile(input.outcomes.latenessMs, 50)),
      p99: Math.round(percentile(input.outcomes.latenessMs, 99)),
    },
    leaders: { ...input.leaders },
    failovers: input.failovers,
    handovers: input.handovers,
  };
}

/** How a run was made: coordinated (the product) or the uncoordinated baseline. */
export type DemoMode = 'coordinated' | 'baseline';

/**
 * The verdict: passed only when no pod leaked and, outside the baseline, every deleted pod got exactly
 * one DELETE (`delete_requests_per_pod.max` = 1). `problems` says what failed, one line each.
 */
export function verdict(s: DemoSummary, mode: DemoMode): { passed: boolean; problems: string[] } {
  const problems: string[] = [];
  if (s.pods_leaked > 0)
    problems.push(`${s.pods_leaked} terminated driver pod(s) still present well past their deadline`);
  if (mode === 'coordinated' && s.delete_requests_per_pod.max > 1)
    problems.push(`a pod received ${s.delete_requests_per_pod.max} DELETE requests (expected 1)`);
  if (mode === 'coordinated' && s.delete_requests_per_pod.max === 0)
    problems.push('no driver pod was deleted before the demo ended (try a longer --duration)');
  return { passed: problems.length === 0, problems };
}

/** Extra facts for the table that are not in the JSON. */
export interface TableNotes {
  mode: DemoMode;
  /** `replica-2 (cluster-a:spark-etl) at 8.0 s` when `--kill-leader-at` killed a leader. */
  killed?: string;
  elapsedMs: number;
}

function row(label: string, ...values: (string | number)[]): string {
  return `  ${label.padEnd(26)}${values.map((v) => String(v).padStart(14)).join('')}`;
}

function rows(s: DemoSummary): [string, string | number][] {
  return [
    ['pods created', s.pods_created],
    ['pods terminated', s.pods_terminated],
    ['pods deleted', s.pods_deleted],
    ['pods leaked', s.pods_leaked],
    ['overdue (self-check)', s.overdue_pods_reported ?? '–'],
    ['DELETE requests', s.delete_requests],
    ['DELETEs per pod (max)', s.delete_requests_per_pod.max],
    ['DELETEs per pod (mean)', s.delete_requests_per_pod.mean.toFixed(2)],
    ['no-op outcomes', s.noop_outcomes],
    ['failed outcomes', s.failed_outcomes],
    ['lateness p50 (ms)', s.lateness_ms.p50],
    ['lateness p99 (ms)', s.lateness_ms.p99],
    ['failovers', s.failovers],
    ['handovers', s.handovers],
  ];
}

/** The summary as a human-readable table (several lines, ending with a newline). */
export function formatSummaryTable(s: DemoSummary, notes: TableNotes): string {
  const v = verdict(s, notes.mode);
  const lines = [
    '',
    `spark-driver-cleaner demo: ${notes.mode === 'baseline' ? 'uncoordinated baseline (as Kyuubi today)' : 'coordinated'}, ` +
      `${s.replicas} replicas, ${s.targets.length} targets, ${(notes.elapsedMs / 1000).toFixed(1)} s`,
    '',
    ...rows(s).map(([label, value]) => row(label, value)),
  ];
  if (notes.killed) lines.push(row('leader killed', ''), `    ${notes.killed}`);
  const leaders = Object.entries(s.leaders);
  if (leaders.length > 0) {
    lines.push('  leaders');
    for (const [target, replica] of leaders) lines.push(`    ${target.padEnd(30)}${replica ?? '(none)'}`);
  }
  lines.push('');
  if (v.passed)
    lines.push(
      notes.mode === 'baseline'
        ? `  every replica sent its own DELETE: up to ${s.delete_requests_per_pod.max} per pod, ${s.failed_outcomes} logged as failures`
        : '  OK: every terminated driver pod was deleted, with exactly one DELETE each',
    );
  else for (const p of v.problems) lines.push(`  FAILED: ${p}`);
  return `${lines.join('\n')}\n`;
}

/** DELETE requests of the baseline per DELETE request of the coordinated run (0 when none). */
export function deleteRatio(coordinated: DemoSummary, baseline: DemoSummary): number {
  if (coordinated.delete_requests === 0) return 0;
  return Math.round((baseline.delete_requests / coordinated.delete_requests) * 100) / 100;
}

/** Both runs side by side, with the ratio of DELETE requests. */
export function formatComparison(coordinated: DemoSummary, baseline: DemoSummary): string {
  const lines = [
    '',
    `spark-driver-cleaner demo --compare: ${coordinated.replicas} replicas, ${coordinated.targets.length} targets, same workload`,
    '',
    row('', 'coordinated', 'baseline'),
    ...rows(coordinated).map(([label, value], i) => row(label, value, rows(baseline)[i]?.[1] ?? '')),
    '',
    `  DELETE requests: the baseline sent ${deleteRatio(coordinated, baseline)}× as many ` +
      `(${baseline.delete_requests} vs ${coordinated.delete_requests}); ` +
      `${baseline.failed_outcomes} of its outcomes were logged as failures.`,
  ];
  return `${lines.join('\n')}\n`;
}
