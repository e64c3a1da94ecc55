import { describe, expect, it } from 'vitest';
import {
  computeSummary,
  deleteRatio,
  percentile,
  type SummaryInput,
  verdict,
} from '../../harness/demo/summary.ts';

const base: SummaryInput = {
  replicas: 3,
  targets: ['a:x'],
  podsCreated: 0,
  terminated: [],
  deleteRequests: 0,
  outcomes: { noop: 0, failed: 0, latenessMs: [] },
  leaders: {},
  overduePodsReported: 0,
  failovers: 0,
  handovers: 0,
  retentionMs: 5000,
  leakGraceMs: 10_000,
  nowMs: 100_000,
};
const pod = (uid: string, finishedAtMs: number, present: boolean, deleteRequests: number) => ({
  uid,
  finishedAtMs,
  present,
  deleteRequests,
});

describe('percentile (nearest rank)', () => {
  it.each([
    ['empty list → 0', [], 50, 0],
    ['one value → that value at p50 and p99', [7], 99, 7],
    ['1..100, p50 → 50', Array.from({ length: 100 }, (_, i) => i + 1), 50, 50],
    ['1..100, p99 → 99', Array.from({ length: 100 }, (_, i) => i + 1), 99, 99],
    ['unsorted input, p50 of [30, 10, 20] → 20', [30, 10, 20], 50, 20],
  ])('%s', (_name, values, p, expected) => {
    expect(percentile(values, p)).toBe(expected);
  });
});

describe('computeSummary', () => {
  it('a present pod counts as leaked only past finishedAt + retention + grace', () => {
    // now 100 000; retention 5 000; grace 10 000 → leaked when finished before 85 000.
    const s = computeSummary({
      ...base,
      terminated: [
        pod('gone', 1000, false, 1),
        pod('due-long-ago', 84_999, true, 0),
        pod('just-at-margin', 85_000, true, 0),
        pod('recent', 99_000, true, 0),
      ],
    });
    expect(s).toMatchObject({ pods_terminated: 4, pods_deleted: 1, pods_leaked: 1 });
  });

  it('DELETEs per pod: max over all terminated pods, mean over those that got at least one', () => {
    const s = computeSummary({
      ...base,
      terminated: [pod('a', 0, false, 3), pod('b', 0, false, 2), pod('c', 99_000, true, 0)],
      deleteRequests: 5,
    });
    expect(s.delete_requests_per_pod).toEqual({ max: 3, mean: 2.5 });
    expect(s.delete_requests).toBe(5);
  });

  it('no terminated pods → zeros, not NaN', () => {
    const s = computeSummary(base);
    expect(s.delete_requests_per_pod).toEqual({ max: 0, mean: 0 });
    expect(s.lateness_ms).toEqual({ p50: 0, p99: 0 });
  });
});

describe('verdict', () => {
  const summary = (max: number, leaked: number) =>
    computeSummary({
      ...base,
      terminated: [
        pod('a', 0, false, max),
        ...Array.from({ length: leaked }, (_, i) => pod(`l${i}`, 0, true, 0)),
      ],
    });
  it.each([
    ['coordinated, one DELETE each, nothing leaked → passed', 'coordinated', 1, 0, true],
    ['coordinated, a second DELETE → failed', 'coordinated', 2, 0, false],
    ['coordinated, a leaked pod → failed', 'coordinated', 1, 1, false],
    ['baseline, three DELETEs each → passed (expected there)', 'baseline', 3, 0, true],
    ['baseline, a leaked pod → failed', 'baseline', 3, 1, false],
  ] as const)('%s', (_name, mode, max, leaked, passed) => {
    expect(verdict(summary(max, leaked), mode).passed).toBe(passed);
  });

  it('ratio of DELETE requests: baseline over coordinated, 0 when the coordinated run sent none', () => {
    const c = computeSummary({ ...base, deleteRequests: 200 });
    const b = computeSummary({ ...base, deleteRequests: 600 });
    expect(deleteRatio(c, b)).toBe(3);
    expect(deleteRatio(computeSummary(base), b)).toBe(0);
  });
});
