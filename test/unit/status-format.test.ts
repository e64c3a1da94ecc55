import { describe, expect, it } from 'vitest';
import { EXIT_UNHEALTHY, statusExitCode, when } from '../../src/status/status-format.ts';
import { statusProblems, type TargetStatus } from '../../src/status/target-status.ts';

const NOW = Date.parse('2026-12-01T12:00:00Z');

function row(o: Partial<TargetStatus>): TargetStatus {
  return {
    target: 'prod:spark',
    leader: 'replica-1',
    leaderFrom: 'etcd',
    consumingSinceMs: NOW - 60_000,
    consumers: ['replica-1'],
    candidates: [],
    jobs: { delayed: 0, waiting: 0, active: 0, failed: 0, completed: 0 },
    nextDeadlineMs: null,
    overdue: 0,
    overdueGraceMs: 36_000,
    lastAccepted: null,
    ...o,
  };
}

describe('statusProblems and the exit code', () => {
  const cases: [string, TargetStatus[], string[][], number][] = [
    ['a leader, nothing overdue → healthy, exit 0', [row({})], [[]], 0],
    [
      'no candidate in etcd → no leader, exit 1',
      [row({ leader: null })],
      [['no leader: no replica campaigns in etcd']],
      EXIT_UNHEALTHY,
    ],
    [
      'without etcd, no worker → no leader, exit 1',
      [row({ leader: null, leaderFrom: 'redis-workers' })],
      [['no leader: no worker consumes']],
      EXIT_UNHEALTHY,
    ],
    [
      '3 overdue jobs on one of two targets → that target named, exit 1',
      [row({}), row({ overdue: 3 })],
      [[], ['3 overdue job(s): past deadline + 36 s']],
      EXIT_UNHEALTHY,
    ],
  ];
  for (const [name, rows, problems, code] of cases)
    it(name, () => {
      expect(rows.map(statusProblems)).toEqual(problems);
      expect(statusExitCode(rows)).toBe(code);
    });
});

describe('when', () => {
  const cases: [string, number | null, string][] = [
    ['unknown → -', null, '-'],
    ['now', NOW, '2026-12-01T12:00:00.000Z (now)'],
    ['119 s ahead → seconds', NOW + 119_000, '2026-12-01T12:01:59.000Z (in 119 s)'],
    ['10 min ago → minutes', NOW - 600_000, '2026-12-01T11:50:00.000Z (10 min ago)'],
    ['3 h ahead → hours', NOW + 3 * 3_600_000, '2026-12-01T15:00:00.000Z (in 3 h)'],
    ['3 days ago → days', NOW - 3 * 86_400_000, '2026-11-28T12:00:00.000Z (3 d ago)'],
  ];
  for (const [name, at, want] of cases) it(name, () => expect(when(at, NOW)).toBe(want));
});
