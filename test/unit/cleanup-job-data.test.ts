import { describe, expect, it } from 'vitest';
import { type CleanupJobData, cleanupJobDataOf, storedJobData } from '../../src/queue/cleanup-queue.ts';
import { InvalidJobIdError } from '../../src/queue/job-identity.ts';

const target = { context: 'prod-eu', namespace: 'spark-jobs' };
const UID = '4720771f-8ca8-4811-a6d2-287672fdf202';
const full: CleanupJobData = {
  context: 'prod-eu',
  namespace: 'spark-jobs',
  pod: 'spark-pi-3f2a9c8e1b7d4a60-driver',
  uid: UID,
  deadlineMs: 1_796_021_070_999,
  finishedAtMs: 1_796_020_770_999,
  enqueuedBy: 'r1',
};

describe('stored job data', () => {
  it('stores the deadline only (and the traceparent when there is one), well under 64 bytes', () => {
    expect(storedJobData(full)).toEqual({ deadlineMs: full.deadlineMs });
    expect(JSON.stringify(storedJobData(full)).length).toBeLessThanOrEqual(64);
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(storedJobData({ ...full, traceparent })).toEqual({ deadlineMs: full.deadlineMs, traceparent });
  });

  it('rebuilds the handler data from the job id, the job name and the target', () => {
    const job = { id: UID, name: full.pod, data: storedJobData(full) };
    const { finishedAtMs: _f, enqueuedBy: _e, ...expected } = full;
    expect(cleanupJobDataOf(target, job)).toEqual(expected);
  });

  it('accepts a job stored whole by an older version as it is', () => {
    const traced = { ...full, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    expect(cleanupJobDataOf(target, { id: UID, name: 'cleanup-driver-pod', data: traced })).toEqual(traced);
  });

  it('refuses a compact job without a usable id', () => {
    expect(() => cleanupJobDataOf(target, { name: 'p', data: { deadlineMs: 1 } })).toThrow(InvalidJobIdError);
  });
});
