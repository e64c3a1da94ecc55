/**
 * How `status` prints: a table for people, JSON for scripts, and the exit code that makes it a check.
 * Pure: "now" is an argument.
 */

import type { KeptPods } from '../queue/kept-pods.ts';
import type { BalanceStatus } from './balance-read.ts';
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

/**
 * The status as text: one block per target, its problems (if any) on `PROBLEM` lines, then the leadership
 * balance when there is one (with etcd; see {@link formatBalance}).
 */
export function formatStatus(rows: readonly TargetStatus[], nowMs: number, balance?: BalanceStatus): string {
  const out: string[] = [];
  for (const s of rows) {
    const j = s.jobs;
    const last = s.lastAccepted;
    const prev = s.previousRelease;
    out.push(
      `${s.target} (cluster ${s.cluster})`,
      `  leader:        ${s.leader ?? 'NONE'}${s.leader ? ` (consuming since ${when(s.consumingSinceMs, nowMs)})` : ''}`,
      ...(balance
        ? [`  assigned to:   ${balance.owners[s.key] ?? '- (no member serves these targets)'}`]
        : []),
      ...(balance?.notReady[s.key]
        ? [
            `  not ready on:  ${balance.notReady[s.key]?.join(', ')} (cannot list or watch its pods, or stepped down for want of progress; its /readyz says which: not campaigning)`,
          ]
        : []),
      ...(prev
        ? [
            `  release 0.1.0: replicas alive (${prev.members.join(', ')}); its election of this target led by ${prev.leader ?? 'nobody'}` +
              (prev.leader !== undefined && prev.leader !== s.leader
                ? `: this version's leader waits for it`
                : ''),
          ]
        : []),
      `  candidates:    ${s.candidates.length > 0 ? s.candidates.join(', ') : '-'}`,
      `  jobs:          delayed ${j.delayed}, waiting ${j.waiting}, active ${j.active}, failed ${j.failed}, completed ${j.completed}`,
      `  next deadline: ${when(s.nextDeadlineMs, nowMs)}`,
      `  overdue:       ${s.overdue} (jobs still pending ${s.overdueGraceMs / 1000} s after their deadline)`,
      `  last DELETE:   ${last ? `${last.pod} by ${last.replica} at ${when(last.atMs, nowMs)}` : 'none recorded'}`,
      ...keptLines(s.keptByPodPhase, nowMs),
    );
    for (const p of statusProblems(s)) out.push(`  PROBLEM:       ${p}`);
  }
  if (balance) out.push('', ...formatBalance(balance, rows));
  return `${out.join('\n')}\n`;
}

/**
 * The line of the pods kept by the `POD` state source although their driver container has ended, when the
 * leader counted any: how many, a few names, and the setting that would clean them.
 */
function keptLines(k: KeptPods | null, nowMs: number): string[] {
  if (!k || k.count === 0) return [];
  return [
    `  kept running:  ${k.count} driver pod(s) whose container ${k.container} has ended while the pod runs on ` +
      `(${k.pods.join(', ')}${k.count > k.pods.length ? ', …' : ''}; counted by ${k.replica} ${when(k.atMs, nowMs)}): ` +
      'applicationStateSource POD keeps them, as Kyuubi does; CONTAINER (here and in Kyuubi) cleans them',
  ];
}

/**
 * The "Leadership balance" block: members, targets and cap, then one line per replica, `<id>  leads N
 * assigned M`. A member leading more than the cap is flagged `OVER CAP` — the balancer allows that only for
 * a moment, while the replica still leads a target whose assigned replica is on its way in (the line says
 * how many of its targets are assigned elsewhere); a leader that is not a member serving these targets is
 * named as such.
 */
export function formatBalance(balance: BalanceStatus, rows: readonly TargetStatus[]): string[] {
  /** Targets each replica leads that are assigned to another one (handovers under way). */
  const elsewhere = new Map<string, number>();
  for (const s of rows) {
    const owner = balance.owners[s.key];
    if (s.leader !== null && owner !== undefined && owner !== s.leader)
      elsewhere.set(s.leader, (elsewhere.get(s.leader) ?? 0) + 1);
  }
  const ids = Object.keys(balance.share).sort();
  const width = Math.max(0, ...ids.map((id) => id.length));
  const out = [
    'Leadership balance (the live members serving these targets)',
    `  members ${balance.members.length}, targets ${balance.targets}, cap ${balance.cap}`,
  ];
  for (const id of ids) {
    const { leading, assigned } = balance.share[id] ?? { leading: 0, assigned: 0 };
    const moving = elsewhere.get(id) ?? 0;
    let note = '';
    if (!balance.members.includes(id))
      note = balance.otherMembers.includes(id)
        ? '  (not balanced here: a member serving other targets)'
        : '  (not balanced here: no membership key)';
    else if (leading > balance.cap)
      note =
        `  OVER CAP: leads more than ${balance.cap}` +
        (moving > 0
          ? ` (${moving} of its targets assigned elsewhere: normal only while it hands them over)`
          : ' (none of its targets is assigned elsewhere)');
    out.push(`  ${id.padEnd(width)}  leads ${leading}  assigned ${assigned}${note}`);
  }
  if (balance.otherMembers.length > 0)
    out.push(`  other members (serving other targets): ${balance.otherMembers.join(', ')}`);
  return out;
}

/**
 * The status as JSON: times as ISO-8601 strings (null when unknown), plus each target's problems. With a
 * balance (etcd), each target has `assigned` (its assigned replica, null without members) and `notReadyOn`
 * (the members that report it not ready: they cannot list or watch its pods), and the result a
 * `balance: { rule, members, targets, cap, share: { "replica": { assigned, leading } }, notReady, otherMembers }`,
 * as `/api/v1/leaders` shows it (plus `otherMembers`).
 */
export function statusJson(rows: readonly TargetStatus[], nowMs: number, balance?: BalanceStatus): unknown {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  const { owners, ...shown } = balance ?? { owners: undefined };
  return {
    at: new Date(nowMs).toISOString(),
    healthy: rows.every((s) => statusProblems(s).length === 0),
    targets: rows.map((s) => ({
      target: s.target,
      cluster: s.cluster,
      leader: s.leader,
      leaderFrom: s.leaderFrom,
      ...(owners ? { assigned: owners[s.key] ?? null, notReadyOn: balance?.notReady[s.key] ?? [] } : {}),
      refused: s.refused,
      ...(s.previousRelease ? { previousRelease: s.previousRelease } : {}),
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
      keptByPodPhase: s.keptByPodPhase
        ? {
            count: s.keptByPodPhase.count,
            pods: s.keptByPodPhase.pods,
            container: s.keptByPodPhase.container,
            replica: s.keptByPodPhase.replica,
            at: iso(s.keptByPodPhase.atMs),
          }
        : null,
      problems: statusProblems(s),
    })),
    ...(owners ? { balance: shown } : {}),
  };
}

/** 0 when every target has a leader and no overdue job, else {@link EXIT_UNHEALTHY}. */
export function statusExitCode(rows: readonly TargetStatus[]): number {
  return rows.every((s) => statusProblems(s).length === 0) ? 0 : EXIT_UNHEALTHY;
}
