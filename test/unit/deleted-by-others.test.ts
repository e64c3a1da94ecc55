/**
 * `sdc_pods_deleted_by_others_total`, the counter the alert "another deleter is active on this target" reads:
 * which job outcomes count as another client's deletion, and which may be the cleaner's own.
 */
import { trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import type { Outcome } from '../../src/rules/outcome.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { createTargetTelemetry } from '../../src/telemetry/target-telemetry.ts';

const target = { cluster: 'c1', context: 'prod', namespace: 'spark-a' };
const job: CleanupJobData = {
  context: 'prod',
  namespace: 'spark-a',
  pod: 'kyuubi-etl-driver',
  uid: '0c9a3f5e-2b7d-4c1e-9f8a-6d5b4e3c2a10',
  deadlineMs: 1_000,
};

/** The counter's samples, `seen` → value, for the target. */
async function counted(metrics: ReturnType<typeof createMetrics>): Promise<Record<string, number>> {
  const m = await metrics.registry.getSingleMetric('sdc_pods_deleted_by_others_total')?.get();
  return Object.fromEntries(
    (m?.values ?? [])
      .filter((v) => v.labels.namespace === 'spark-a' && v.labels.context === 'prod')
      .map((v) => [String(v.labels.seen), v.value]),
  );
}

describe('sdc_pods_deleted_by_others_total', () => {
  const cases: [string, CleanupJobData, Outcome, Record<string, number>][] = [
    [
      'already-absent: the job found the pod gone',
      job,
      { outcome: 'already-absent' },
      { 'already-absent': 1 },
    ],
    [
      'already-deleting: someone else set its deletionTimestamp',
      job,
      { outcome: 'already-deleting' },
      { 'already-deleting': 1 },
    ],
    [
      'already-deleting after this replica’s own accepted DELETE: not counted',
      job,
      { outcome: 'already-deleting', ours: true },
      {},
    ],
    [
      'already-absent on a job whose earlier DELETE left unanswered (liveRecheck): may be ours, not counted',
      { ...job, liveRecheck: true },
      { outcome: 'already-absent' },
      {},
    ],
    ['accepted: the cleaner deleted it', job, { outcome: 'accepted', latenessMs: 5 }, {}],
    ['replaced: a new pod of the same name', job, { outcome: 'replaced' }, {}],
  ];
  for (const [name, data, outcome, want] of cases)
    it(name, async () => {
      const metrics = createMetrics({ processMetrics: false });
      const telemetry = createTargetTelemetry(target, trace.getTracer('test'), metrics);
      expect(await telemetry.process(data, async () => outcome)).toEqual(outcome);
      expect(await counted(metrics)).toEqual(want);
    });

  it('a deletion the informer saw while the job waited counts as deletion-seen', async () => {
    const metrics = createMetrics({ processMetrics: false });
    const telemetry = createTargetTelemetry(target, trace.getTracer('test'), metrics);
    telemetry.deletedByOthers('deletion-seen');
    telemetry.deletedByOthers('deletion-seen');
    expect(await counted(metrics)).toEqual({ 'deletion-seen': 2 });
  });
});
