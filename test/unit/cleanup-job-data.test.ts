import { describe, expect, it } from 'vitest';
import {
  cleanupJobDataOf,
  finishedWithoutDeleting,
  InvalidJobDataError,
  JOB_FORMAT,
  storedJobData,
} from '../../src/queue/cleanup-queue.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';

const target = { cluster: 'prod-eu-1', context: 'prod-eu', namespace: 'spark-jobs' };
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
  it('stores the format and the deadline only (and the traceparent when there is one), well under 64 bytes', () => {
    expect(storedJobData(full)).toEqual({ v: JOB_FORMAT, deadlineMs: full.deadlineMs });
    expect(JSON.stringify(storedJobData(full)).length).toBeLessThanOrEqual(64);
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(storedJobData({ ...full, traceparent })).toEqual({
      v: JOB_FORMAT,
      deadlineMs: full.deadlineMs,
      traceparent,
    });
  });

  it('rebuilds the handler data from the job id, the job name and the target', () => {
    const job = { id: UID, name: full.pod, data: storedJobData(full) };
    const { finishedAtMs: _f, enqueuedBy: _e, ...expected } = full;
    expect(cleanupJobDataOf(target, job)).toEqual(expected);
  });

  // Replicas of adjacent releases share one Redis during a rolling update (docs/deployment.md, "Upgrading").
  it.each([
    { name: 'release 0.1.0: no format field → read as format 1', data: { deadlineMs: full.deadlineMs } },
    { name: 'format 1', data: { v: 1, deadlineMs: full.deadlineMs } },
    {
      name: 'a later format with fields this version does not know → the known ones read, the rest ignored',
      data: { v: JOB_FORMAT + 1, deadlineMs: full.deadlineMs, priority: 'high', finishedAtMs: 1 },
    },
  ])('reads $name', ({ data }) => {
    const { finishedAtMs: _f, enqueuedBy: _e, ...expected } = full;
    expect(cleanupJobDataOf(target, { id: UID, name: full.pod, data } as never)).toEqual(expected);
  });

  it('takes context and namespace from the queue, never from the stored data', () => {
    const data = { ...storedJobData(full), context: 'prod-us', namespace: 'other', pod: 'x', uid: 'y' };
    const { finishedAtMs: _f, enqueuedBy: _e, ...expected } = full;
    expect(cleanupJobDataOf(target, { id: UID, name: full.pod, data })).toEqual(expected);
  });

  it('a job marked for a live re-check keeps the mark (only `true` counts), still under 64 bytes', () => {
    const { finishedAtMs: _f, enqueuedBy: _e, ...expected } = full;
    const marked = { deadlineMs: full.deadlineMs, liveRecheck: true } as const;
    expect(JSON.stringify(marked).length).toBeLessThanOrEqual(64);
    expect(cleanupJobDataOf(target, { id: UID, name: full.pod, data: marked })).toEqual({
      ...expected,
      liveRecheck: true,
    });
    const odd = { deadlineMs: full.deadlineMs, liveRecheck: 'yes' } as unknown as typeof marked;
    expect(cleanupJobDataOf(target, { id: UID, name: full.pod, data: odd })).toEqual(expected);
  });
});

describe('job data that cannot be trusted is refused, naming the field', () => {
  type StoredJob = Parameters<typeof cleanupJobDataOf>[1];
  const compact = (over: Partial<{ id: string | undefined; name: string | undefined; data: unknown }>) =>
    ({ id: UID, name: full.pod, data: { deadlineMs: full.deadlineMs }, ...over }) as StoredJob;
  const cases: { name: string; job: StoredJob; field: InvalidJobDataError['field'] }[] = [
    // What BullMQ hands the worker when the job hash was deleted while the id sat in the delayed set.
    { name: 'hash lost: no name, data {} → pod', job: compact({ name: undefined, data: {} }), field: 'pod' },
    { name: 'empty pod name → pod', job: compact({ name: '' }), field: 'pod' },
    { name: 'no job id → uid', job: compact({ id: undefined }), field: 'uid' },
    { name: 'all-digit id → uid', job: compact({ id: '12345' }), field: 'uid' },
    { name: 'id with ":" → uid', job: compact({ id: 'a:b' }), field: 'uid' },
    { name: 'id not in RFC 4122 form → uid', job: compact({ id: 'not-a-uid' }), field: 'uid' },
    { name: 'UID with a trailing character → uid', job: compact({ id: `${UID}x` }), field: 'uid' },
    { name: 'deadline missing → deadlineMs', job: compact({ data: {} }), field: 'deadlineMs' },
    {
      name: 'deadline a string → deadlineMs',
      job: compact({ data: { deadlineMs: '1796021070999' } }),
      field: 'deadlineMs',
    },
    {
      name: 'deadline null (JSON of NaN) → deadlineMs',
      job: compact({ data: { deadlineMs: null } }),
      field: 'deadlineMs',
    },
    {
      name: 'deadline Infinity → deadlineMs',
      job: compact({ data: { deadlineMs: Infinity } }),
      field: 'deadlineMs',
    },
    { name: 'data null → deadlineMs', job: compact({ data: null }), field: 'deadlineMs' },
    {
      name: 'format a string → v',
      job: compact({ data: { v: '1', deadlineMs: full.deadlineMs } }),
      field: 'v',
    },
    { name: 'format 0 → v', job: compact({ data: { v: 0, deadlineMs: full.deadlineMs } }), field: 'v' },
    { name: 'format 1.5 → v', job: compact({ data: { v: 1.5, deadlineMs: full.deadlineMs } }), field: 'v' },
  ];
  it.each(cases)('$name', ({ job, field }) => {
    let err: unknown;
    try {
      cleanupJobDataOf(target, job);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidJobDataError);
    expect(err).toMatchObject({ name: 'InvalidJobDataError', field });
  });
});

describe('finishedWithoutDeleting: which finished jobs an enqueue replaces', () => {
  const json = (outcome: string) => JSON.stringify({ outcome, latenessMs: 3 });
  it.each([
    {
      name: 'would-delete, dry run now off → replaced',
      value: json('would-delete'),
      dryRun: false,
      replace: true,
    },
    {
      name: 'would-delete, still in dry run → kept',
      value: json('would-delete'),
      dryRun: true,
      replace: false,
    },
    {
      name: 'skipped (pod was not eligible then) → replaced',
      value: json('skipped'),
      dryRun: false,
      replace: true,
    },
    { name: 'skipped, in dry run → replaced', value: json('skipped'), dryRun: true, replace: true },
    { name: 'accepted → kept', value: json('accepted'), dryRun: false, replace: false },
    { name: 'already-absent → kept', value: json('already-absent'), dryRun: false, replace: false },
    { name: 'already-deleting → kept', value: json('already-deleting'), dryRun: false, replace: false },
    { name: 'replaced (another UID) → kept', value: json('replaced'), dryRun: false, replace: false },
    { name: 'no return value (pending or failed) → kept', value: null, dryRun: false, replace: false },
    { name: 'empty → kept', value: '', dryRun: false, replace: false },
    { name: 'not JSON → kept', value: '<oops', dryRun: false, replace: false },
    { name: 'JSON null → kept', value: 'null', dryRun: false, replace: false },
  ])('$name', ({ value, dryRun, replace }) => {
    expect(finishedWithoutDeleting(value, dryRun)).toBe(replace);
  });
});
