import { describe, expect, it } from 'vitest';
import { findOverdue, NONE_OVERDUE } from '../../src/cleaner/overdue.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';

const selector = parseLabelSelector('spark-role=driver,kyuubi-unique-tag');
const NOW = Date.parse('2026-12-01T12:00:00Z');
const RETENTION = 300_000;
const GRACE = 40_000;

/** A driver pod whose driver container finished `finishedAgoMs` before NOW (undefined: no finish time). */
function driver(
  name: string,
  finishedAgoMs: number | undefined,
  extra: {
    phase?: string;
    exitCode?: number;
    deleting?: boolean;
    labels?: Record<string, string>;
  } = {},
): DriverPod {
  const finished = finishedAgoMs === undefined ? undefined : new Date(NOW - finishedAgoMs).toISOString();
  return {
    metadata: {
      name,
      namespace: 'spark',
      uid: `uid-${name}`,
      labels: extra.labels ?? { 'spark-role': 'driver', 'kyuubi-unique-tag': name },
      ...(extra.deleting ? { deletionTimestamp: new Date(NOW).toISOString() } : {}),
    },
    status: {
      phase: extra.phase ?? 'Succeeded',
      containerStatuses: finished
        ? [
            {
              name: 'spark-kubernetes-driver',
              state: { terminated: { exitCode: extra.exitCode ?? 0, finishedAt: finished } },
            },
          ]
        : [],
    },
  };
}

const base = { selector, policy: 'ALL' as const, retentionMs: RETENTION, graceMs: GRACE, nowMs: NOW };

describe('findOverdue', () => {
  const cases: { name: string; pods: DriverPod[]; count: number; oldestAgeMs?: number }[] = [
    { name: 'no pods → none', pods: [], count: 0 },
    {
      name: 'finished 5 min ago, retention 5 min, grace 40 s → due now, not overdue',
      pods: [driver('a', RETENTION)],
      count: 0,
    },
    {
      name: 'finished 5 min 39.999 s ago → 1 ms inside the grace, not overdue',
      pods: [driver('a', RETENTION + GRACE - 1)],
      count: 0,
    },
    {
      name: 'finished exactly retention + grace ago → overdue by 0 ms (counts)',
      pods: [driver('a', RETENTION + GRACE)],
      count: 1,
      oldestAgeMs: GRACE,
    },
    {
      name: 'finished 1 h ago → overdue, oldest age 55 min past its deadline',
      pods: [driver('a', 3_600_000), driver('b', RETENTION + GRACE + 1000)],
      count: 2,
      oldestAgeMs: 3_600_000 - RETENTION,
    },
    {
      name: 'being deleted (deletionTimestamp) → never overdue',
      pods: [driver('a', 3_600_000, { deleting: true })],
      count: 0,
    },
    {
      name: 'running driver → never overdue',
      pods: [driver('a', undefined, { phase: 'Running' })],
      count: 0,
    },
    {
      name: 'not selected (no kyuubi-unique-tag) → never overdue',
      pods: [driver('a', 3_600_000, { labels: { 'spark-role': 'driver' } })],
      count: 0,
    },
    {
      name: 'finish time in the future (node clock ahead) → deferred, not overdue',
      pods: [driver('a', -600_000)],
      count: 0,
    },
    {
      name: 'terminal without a finish time and never seen terminal → not judged',
      pods: [driver('a', undefined, { phase: 'Failed' })],
      count: 0,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const report = findOverdue(c.pods, base);
      expect(report.count).toBe(c.count);
      if (c.oldestAgeMs !== undefined) expect(report.oldestAgeMs).toBe(c.oldestAgeMs);
      if (c.count === 0) expect(report).toEqual(NONE_OVERDUE);
    });
  }

  it('policy COMPLETED: a failed driver finished 1 h ago is kept, not overdue; under ALL it is', () => {
    const failed = driver('f', 3_600_000, { exitCode: 1, phase: 'Failed' });
    expect(findOverdue([failed], { ...base, policy: 'COMPLETED' }).count).toBe(0);
    expect(findOverdue([failed], base).count).toBe(1);
  });

  it('an evicted driver (no finish time) is judged from when this replica first saw it terminal', () => {
    const evicted = driver('e', undefined, { phase: 'Failed' });
    const seen = (ago: number) => () => NOW - ago;
    expect(findOverdue([evicted], { ...base, firstSeenTerminalMs: seen(RETENTION) }).count).toBe(0);
    expect(findOverdue([evicted], { ...base, firstSeenTerminalMs: seen(RETENTION + GRACE) }).count).toBe(1);
  });

  it('lists the oldest first, at most `limit`', () => {
    const pods = [1, 5, 3, 4, 2].map((h) => driver(`p${h}`, h * 3_600_000));
    const report = findOverdue(pods, { ...base, limit: 2 });
    expect(report.count).toBe(5);
    expect(report.oldest.map((p) => p.name)).toEqual(['p5', 'p4']);
    expect(report.oldest[0]?.overdueMs).toBe(5 * 3_600_000 - RETENTION - GRACE);
  });
});
