import { describe, expect, it } from 'vitest';
import { logOutcome } from '../../src/queue/outcome-log.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import type { Outcome } from '../../src/rules/outcome.ts';
import { memoryLogger } from '../helpers/log.ts';

const job: CleanupJobData = {
  context: 'prod-eu',
  namespace: 'spark-jobs',
  pod: 'spark-pi-3f2a9c8e1b7d4a60-driver',
  uid: '4720771f-8ca8-4811-a6d2-287672fdf202',
  deadlineMs: 1_796_021_070_999,
};
const outcomes: Outcome[] = [
  { outcome: 'accepted', latenessMs: 12 },
  { outcome: 'failed', step: 'delete', code: 403, reason: 'Forbidden', message: 'pods is forbidden' },
  { outcome: 'already-absent' },
] as Outcome[];

/** How often `"key":` appears in a raw JSON line. */
const count = (line: string, key: string) => line.split(`"${key}":`).length - 1;

describe('outcome log lines', () => {
  it.each(outcomes.map((o) => [o.outcome, o] as const))(
    '%s: context, namespace, pod, uid and outcome once each, from the target logger',
    (_name, o) => {
      const { log, raw, lines } = memoryLogger();
      // The replica's target logger: a child carrying the target.
      logOutcome(log.child({ context: job.context, namespace: job.namespace }), job, 0, o);
      expect(raw).toHaveLength(1);
      for (const key of ['context', 'namespace', 'pod', 'uid', 'outcome'])
        expect(count(raw[0] ?? '', key), key).toBe(1);
      expect(lines[0]).toMatchObject({
        ...{ context: job.context, namespace: job.namespace },
        outcome: o.outcome,
      });
    },
  );

  it('a logger without the target gets it from the job', () => {
    const { log, lines } = memoryLogger();
    logOutcome(log, job, 0, { outcome: 'accepted', latenessMs: 0 } as Outcome);
    expect(lines[0]).toMatchObject({
      context: job.context,
      namespace: job.namespace,
      pod: job.pod,
      uid: job.uid,
    });
  });

  it('dry run: one info line "dry run: would delete" with the pod and its deadline (the line the README greps for)', () => {
    const { log, lines } = memoryLogger();
    logOutcome(log, job, 0, { outcome: 'would-delete', latenessMs: 3 } as Outcome);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'info',
      msg: 'dry run: would delete',
      outcome: 'would-delete',
      pod: job.pod,
      deadline: new Date(job.deadlineMs).toISOString(),
    });
  });
});
