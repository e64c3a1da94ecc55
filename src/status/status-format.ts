/**
 * How `status` prints: a table for people, JSON for scripts, and the exit code that makes it a check.
 * Pure: "now" is an argument.
 */
import { statusProblems, type TargetStatus } from './target-status.ts';

/** Exit codes of `status` and `explain` besides 0 (healthy) and 2 (bad configuration). */
export const EXIT_UNHEALTHY = 1;
/** Redis or etcd could not be reached: nothing is known, which is not the same as unhealthy. */
export const EXIT_UNREACHABLE = 3;

/** `at` as ISO-8601 with how far from now it is ("in 4 s", "12 s ago"); `-` when null. */
export function when(atMs: number | null | undefined, nowMs: number): string {
  if (atMs === null || atMs === undefined) return '-';
  const s = Math.round((atMs - nowMs) / 1000);
  const rel = s === 0 ? 'now' : s > 0 ? `in ${human(s)}` : `${human(-s)} ago`;
  return `${new Date(atMs).toISOString()} (${rel})`;
}

/** Seconds as `45 s`, `12 min`, `3 h`, `2 d`. */
function human(s: number): string {
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}

/** The status as text: one block per target, then the problems (if any). */
export function formatStatus(rows: readonly TargetStatus[], nowMs: number): string {
  const out: string[] = [];
  for (const s of rows) {
    const j = s.jobs;
    const last = s.lastAccepted;
    out.push(
      `${s.target}`,
      `  leader:        ${s.leader ?? 'NONE'}${s.leader ? ` (consuming since ${when(s.consumingSinceMs, nowMs)})` : ''}`,
      `  candidates:    ${s.candidates.length > 0 ? s.candidates.join(', ') : '-'}`,
      `  jobs:          delayed ${j.delayed}, waiting ${j.waiting}, active ${j.active}, failed ${j.failed}, completed ${j.completed}`,
      `  next deadline: ${when(s.nextDeadlineMs, nowMs)}`,
      `  overdue:       ${s.overdue} (jobs still pending ${s.overdueGraceMs / 1000} s after their deadline)`,
      `  last DELETE:   ${last ? `${last.pod} by ${last.replica} at ${when(last.atMs, nowMs)}` : 'none recorded'}`,
    );
    for (const p of statusProblems(s)) out.push(`  PROBLEM:       ${p}`);
  }
  return `${out.join('\n')}\n`;
}

/** The status as JSON: times as ISO-8601 strings (null when unknown), plus each target's problems. */
export function statusJson(rows: readonly TargetStatus[], nowMs: number): unknown {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    at: new Date(nowMs).toISOString(),
    healthy: rows.every((s) => statusProblems(s).length === 0),
    targets: rows.map((s) => ({
      target: s.target,
      leader: s.leader,
      leaderFrom: s.leaderFrom,
      consumingSince: iso(s.consumingSinceMs),
      consumers: s.consumers,
      candidates: s.candidates,
      jobs: s.jobs,
      nextDeadline: iso(s.nextDeadlineMs),
      overdue: s.overdue,
      overdueGraceMs: s.overdueGraceMs,
      lastAccepted: s.lastAccepted
        ? {
            pod: s.lastAccepted.pod,
            uid: s.lastAccepted.uid,
            replica: s.lastAccepted.replica,
            at: iso(s.lastAccepted.atMs),
          }
        : null,
      problems: statusProblems(s),
    })),
  };
}

/** 0 when every target has a leader and no overdue job, else {@link EXIT_UNHEALTHY}. */
export function statusExitCode(rows: readonly TargetStatus[]): number {
  return rows.every((s) => statusProblems(s).length === 0) ? 0 : EXIT_UNHEALTHY;
}
