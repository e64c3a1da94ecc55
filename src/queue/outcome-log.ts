/**
 * The log line of each cleanup outcome: one JSON line with `context`, `namespace`, `pod`, `uid` and `outcome`;
 * an accepted DELETE at info, no-ops at debug, real failures at warn with the API Status step, code, reason
 * and message (docs/operations.md, "Logs and outcomes").
 */

import type { Logger } from '../log.ts';
import type { CleanupJobData } from '../rules/job-data.ts';
import type { Outcome } from '../rules/outcome.ts';

/** Epoch ms as RFC 3339, or the number itself when no date has it (a stored deadline edited by hand). */
const iso = (ms: number): string | number => {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? ms : d.toISOString();
};

/** The leadership term a DELETE was sent in: its number and the time since the election, ms. */
export interface TermFields {
  readonly term: number;
  readonly sinceElectionMs: number;
}

/**
 * Logs `o`, the outcome of one run of the job `d`.
 * @param attemptsMade BullMQ's attempts before this run (the line says `attempt: attemptsMade + 1`)
 * @param term the term the worker consumes for, written on the accepted and would-delete lines
 */
export function logOutcome(
  log: Logger,
  d: CleanupJobData,
  attemptsMade: number,
  o: Outcome,
  term?: TermFields,
): void {
  // The target's logger is a child that already carries context and namespace: a key written twice makes a
  // JSON line that some log pipelines reject or read by its last value.
  const bound = log.bindings();
  const fields = {
    ...(bound.context === undefined ? { context: d.context } : {}),
    ...(bound.namespace === undefined ? { namespace: d.namespace } : {}),
    pod: d.pod,
    uid: d.uid,
    outcome: o.outcome,
  };
  switch (o.outcome) {
    case 'accepted':
      log.info(
        { ...fields, deadline: iso(d.deadlineMs), latenessMs: o.latenessMs, ...term },
        'driver pod deleted',
      );
      return;
    case 'would-delete':
      log.info(
        { ...fields, deadline: iso(d.deadlineMs), latenessMs: o.latenessMs, ...term },
        'dry run: would delete',
      );
      return;
    case 'failed':
      log.warn(
        {
          ...fields,
          step: o.step,
          code: o.code,
          reason: o.reason,
          message: o.message,
          retryAfterMs: o.retryAfterMs,
          attempt: attemptsMade + 1,
        },
        `cleanup failed: ${o.step.toUpperCase()} ${o.code ?? ''} ${o.reason}`.replace('  ', ' '),
      );
      return;
    case 'not-yet':
      if (o.deadlineMs !== undefined) {
        log.debug(
          {
            ...fields,
            dueInMs: o.dueInMs,
            deadline: iso(o.deadlineMs),
            storedDeadline: iso(d.deadlineMs),
          },
          "not due yet by this replica's retention: back to delayed until its own deadline",
        );
        return;
      }
      log.debug({ ...fields, dueInMs: o.dueInMs }, 'not due yet: back to delayed');
      return;
    case 'fenced':
    case 'aborted':
      if (o.outcome === 'aborted' && o.deleteSent) {
        log.info(
          { ...fields, why: 'leadership lost or shutdown' },
          'DELETE sent, its answer given up: the job is put back, its next run re-checks the pod live',
        );
        return;
      }
      log.debug(
        { ...fields, why: o.outcome === 'fenced' ? o.reason : 'leadership lost or shutdown' },
        'job put back before its DELETE',
      );
      return;
    default:
      log.debug({ ...fields, ...(o.outcome === 'skipped' ? { why: o.reason } : {}) }, 'no-op');
  }
}
