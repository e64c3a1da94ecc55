/**
 * The verdict on one canary pod (src/check/canary.ts): did the fleet delete it once, after its retention and not
 * before? Pure: what the watch saw of the pod and what the fleet's record says come in, one result goes out.
 *
 * - The deadline is the driver container's `finishedAt` + retention (src/rules/decision.ts), both cluster
 *   timestamps. Out of dry run, the time of the DELETE is the `deletionTimestamp` the API server stamped (1 s
 *   resolution: early only when even its whole second ends before the deadline). In dry run the fleet sends no
 *   DELETE: its job's completion time (`finishedOn`, the leader's clock, ±1 s of tolerance) stands for it.
 * - Once, by the fleet: the pod's cleanup job (one per UID) completed with `accepted` (`would-delete` in dry
 *   run). Another outcome, or a tombstone without one, means something else deleted it.
 * - In time: at most `overdueGrace` (the fleet's own notion of overdue) after the deadline.
 */

import { type CheckResult, resultsOf } from '../check-result.ts';
import type { JobFacts } from '../status/explain.ts';

/** What the watch saw of one canary. Times are epoch ms of cluster timestamps. */
export interface CanaryObservation {
  readonly name: string;
  readonly uid: string;
  /** The driver container's `finishedAt`. */
  readonly finishedAtMs?: number;
  /** The API server's `deletionTimestamp`, once someone deleted it. */
  readonly deletionMs?: number;
  /** The watch saw it go. */
  readonly gone: boolean;
}

/** What the fleet's state says of it (src/status/explain-facts.ts). */
export interface CanaryRecord {
  readonly job: JobFacts | undefined;
  readonly tombstoned: boolean;
  /** The target's leader now; undefined: none. */
  readonly leader: string | undefined;
}

/** The rules it is judged by: the fleet's configuration. */
export interface CanaryRules {
  readonly retentionMs: number;
  readonly overdueGraceMs: number;
  readonly dryRun: boolean;
  /** `context:namespace`, for the messages. */
  readonly target: string;
}

const seconds = (ms: number) => `${(Math.abs(ms) / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;

/** Judges one canary (see the module comment). Pure. */
export function judgeCanary(
  group: string,
  obs: CanaryObservation,
  rec: CanaryRecord,
  rules: CanaryRules,
): CheckResult {
  const r = resultsOf(group);
  const deadline = obs.finishedAtMs === undefined ? undefined : obs.finishedAtMs + rules.retentionMs;
  const outcome = rec.job?.outcome?.outcome;
  const by = rec.job?.processedBy;
  const expected = rules.dryRun ? 'would-delete' : 'accepted';
  // When the fleet acted: the DELETE's timestamp, or in dry run when its job completed.
  const actedMs = rules.dryRun ? (outcome === expected ? rec.job?.finishedOnMs : undefined) : obs.deletionMs;
  const late = actedMs !== undefined && deadline !== undefined ? actedMs - deadline : undefined;
  const details = {
    pod: obs.name,
    uid: obs.uid,
    finishedAtMs: obs.finishedAtMs ?? null,
    deadlineMs: deadline ?? null,
    deletionTimestampMs: obs.deletionMs ?? null,
    latenessMs: late ?? null,
    outcome: outcome ?? null,
    processedBy: by ?? null,
    attempts: rec.job?.attemptsMade ?? null,
    dryRun: rules.dryRun,
  };
  const early = rules.dryRun ? late !== undefined && late < -1000 : late !== undefined && late <= -1000;
  if (early)
    return r.fail(
      'canary.deleted',
      `${obs.name}: ${rules.dryRun ? 'would be deleted' : 'deleted'} ${seconds(late ?? 0)} BEFORE its deadline (finishedAt + ${seconds(rules.retentionMs)})${by && outcome === expected ? ` by ${by}` : ''}`,
      {
        fix: 'a DELETE came before the retention: another cleaner (Kyuubi with cleanupTerminatedDriverPod.kind ALL, a TTL controller) or a skewed clock; see the clock checks and Kyuubi’s settings',
        details,
      },
    );
  const acted = rules.dryRun ? outcome === expected : obs.gone;
  if (!acted || deadline === undefined) {
    if (rules.dryRun && obs.gone)
      return r.fail('canary.deleted', `${obs.name}: deleted by someone else while the fleet is in dry run`, {
        fix: 'something else deletes driver pods: switch Kyuubi’s cleanup off only at the cut-over, and no other cleaner beside it',
        details,
      });
    const why = rec.leader
      ? rec.job
        ? `its job is ${rec.job.state}${rec.job.failedReason ? ` (${rec.job.failedReason})` : ''}`
        : 'no job was queued for it (the fleet did not see it: its informer, or labelSelector)'
      : `no replica leads ${rules.target} (is the fleet running?)`;
    return r.fail(
      'canary.deleted',
      `${obs.name}: not ${rules.dryRun ? 'judged due' : 'deleted'} ${seconds(rules.overdueGraceMs)} after its deadline: ${why}`,
      {
        fix: 'run check without --canary and status: a target without leader, a failing DELETE (RBAC) or replicas down',
        details,
      },
    );
  }
  if (outcome !== expected)
    return r.fail(
      'canary.deleted',
      `${obs.name}: deleted, but not by the fleet (its job's outcome: ${outcome ?? (rec.tombstoned ? 'cancelled, tombstoned' : 'none')})`,
      {
        fix: 'something else deletes driver pods: switch Kyuubi’s cleanup off on every server (kyuubi.kubernetes.spark.cleanupTerminatedDriverPod.kind=NONE)',
        details,
      },
    );
  const when = late === undefined ? 'at an unknown time' : `${seconds(late)} after its deadline`;
  if (late !== undefined && late > rules.overdueGraceMs)
    return r.fail(
      'canary.deleted',
      `${obs.name}: ${rules.dryRun ? 'would be deleted' : 'deleted'} once by ${by}, but ${when} (overdue after ${seconds(rules.overdueGraceMs)})`,
      {
        fix: 'the fleet is slow: see status (overdue jobs), the API rate (apiQps) and the leaders’ logs',
        details,
      },
    );
  return rules.dryRun
    ? r.pass(
        'canary.deleted',
        `${obs.name}: would be deleted once by ${by ?? 'the fleet'} (dry run: outcome would-delete), ${when}`,
        { details },
      )
    : r.pass(
        'canary.deleted',
        `${obs.name}: deleted once by ${by ?? 'the fleet'} (outcome accepted), ${when}`,
        { details },
      );
}
