/**
 * What a failed nemesis run prints and leaves behind: the seed and the replay command, each violation
 * beside the faults active at that moment, the schedule and the faults as they really happened; and, in
 * `test-artifacts/nemesis/seed-<seed>/`, every replica process's log, the DELETE log and the samples.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DeleteRecord } from '../../harness/sandbox/apiserver/request-log.ts';
import type { OverdueSample, Violation } from '../helpers/invariants.ts';
import type { FaultRecord } from './injectors.ts';
import {
  describeEvent,
  type FaultKind,
  formatSchedule,
  type Leadership,
  type NemesisEvent,
  type RedisMode,
} from './schedule.ts';
import type { ReplicaSlot } from './world.ts';

/** Everything a report is made of. Times are epoch ms by the sandbox clock. */
export interface RunRecord {
  seed: number;
  durationMs: number;
  /** Fault kinds left out (NEMESIS_EXCLUDE). */
  exclude: readonly FaultKind[];
  /** The Redis the replicas used (NEMESIS_REDIS). */
  redisMode: RedisMode;
  /** The leadership backend (NEMESIS_LEADERSHIP). */
  leadership: Leadership;
  /** Clusters sharing the stores (NEMESIS_CLUSTERS). */
  clusters: 1 | 2;
  schedule: readonly NemesisEvent[];
  timeline: readonly FaultRecord[];
  /** Sandbox clock when the schedule started: report times are relative to it. */
  startedAtMs: number;
  violations: readonly Violation[];
  /** The state after settling worth reading beside a violation (each target's election candidates). */
  endState: readonly string[];
}

/** The command that replays a run. */
export function replayCommand(
  seed: number,
  durationMs: number,
  exclude: readonly FaultKind[] = [],
  redisMode: RedisMode = 'single',
  leadership: Leadership = 'etcd',
  clusters: 1 | 2 = 1,
): string {
  const minutes = durationMs === CI_DURATION_MS ? '' : ` NEMESIS_MINUTES=${durationMs / 60_000}`;
  const without = exclude.length > 0 ? ` NEMESIS_EXCLUDE=${exclude.join(',')}` : '';
  const redis = redisMode === 'single' ? '' : ` NEMESIS_REDIS=${redisMode}`;
  const backend = leadership === 'etcd' ? '' : ` NEMESIS_LEADERSHIP=${leadership}`;
  const two = clusters === 1 ? '' : ` NEMESIS_CLUSTERS=${clusters}`;
  return `SEED=${seed}${minutes}${without}${redis}${backend}${two} npx vitest run test/nemesis`;
}

/** The schedule length of the CI variant, ms. */
export const CI_DURATION_MS = 75_000;

const rel = (ms: number, t0: number) => `+${((ms - t0) / 1000).toFixed(1)} s`;

/** The faults active at `atMs` (started, not yet ended, with a second of slack on either side). */
function activeAt(timeline: readonly FaultRecord[], atMs: number): FaultRecord[] {
  return timeline.filter((f) => f.startedAtMs - 1000 <= atMs && atMs <= f.endedAtMs + 1000);
}

/** The failure message: seed, replay command, violations in context, schedule, timeline. */
export function failureMessage(run: RunRecord, artifactsDir: string, maxViolations = 40): string {
  const t0 = run.startedAtMs;
  const lines = [
    `nemesis: ${run.violations.length} violation(s) — seed ${run.seed}`,
    `replay: ${replayCommand(run.seed, run.durationMs, run.exclude, run.redisMode, run.leadership, run.clusters)}`,
    '',
  ];
  for (const v of run.violations.slice(0, maxViolations)) {
    const at = v.atMs === undefined ? '' : ` at ${rel(v.atMs, t0)}`;
    lines.push(`[${v.invariant}] ${v.pod ?? ''}${v.uid ? ` (uid ${v.uid})` : ''}${at}: ${v.detail}`);
    if (v.atMs !== undefined) {
      const active = activeAt(run.timeline, v.atMs).map((f) => `#${f.event.id} ${f.event.kind}`);
      lines.push(`    faults active then: ${active.length ? active.join(', ') : 'none'}`);
    }
  }
  if (run.violations.length > maxViolations)
    lines.push(`… and ${run.violations.length - maxViolations} more`);
  lines.push('', 'after settling:', ...run.endState.map((l) => `  ${l}`));
  lines.push('', formatSchedule(run.seed, run.schedule, run.durationMs, run.exclude), '', 'as it happened:');
  for (const f of run.timeline)
    lines.push(
      `  #${f.event.id} ${rel(f.startedAtMs, t0)} → ${rel(f.endedAtMs, t0)}${f.note ? `  (${f.note})` : ''}${f.notApplied ? `  NOT APPLIED: ${f.notApplied}` : ''}`,
    );
  lines.push('', `logs and records: ${artifactsDir}`);
  return lines.join('\n');
}

/** Writes the run's records and every replica process's log under `dir`. */
export function writeArtifacts(
  dir: string,
  run: RunRecord,
  extra: {
    slots: readonly ReplicaSlot[];
    deletes: readonly DeleteRecord[];
    samples: readonly OverdueSample[];
  },
): void {
  rmSync(dir, { recursive: true, force: true }); // a replay must not leave an earlier run's logs beside its own
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'report.txt'), `${failureMessage(run, dir, Number.POSITIVE_INFINITY)}\n`);
  writeFileSync(join(dir, 'schedule.txt'), `${run.schedule.map(describeEvent).join('\n')}\n`);
  writeFileSync(join(dir, 'timeline.json'), JSON.stringify(run.timeline, null, 1));
  // The DELETE log without the pod objects: their name, UID and finish time are enough to read it.
  const deletes = extra.deletes.map(({ found, applied, ...r }) => ({
    ...r,
    t: rel(r.atMs, run.startedAtMs),
    found: found?.metadata?.uid,
    foundPhase: found?.status?.phase,
    applied: applied?.metadata?.uid,
  }));
  writeFileSync(join(dir, 'deletes.json'), deletes.map((d) => JSON.stringify(d)).join('\n'));
  writeFileSync(join(dir, 'samples.json'), extra.samples.map((s) => JSON.stringify(s)).join('\n'));
  for (const slot of extra.slots) {
    slot.generations.forEach((proc, i) => {
      const name = `${slot.id}.${i + 1}`;
      writeFileSync(join(dir, `${name}.log`), proc.lines.map((l) => JSON.stringify(l)).join('\n'));
      writeFileSync(join(dir, `${name}.stderr`), proc.stderr());
    });
  }
}
