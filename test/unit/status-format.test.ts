import { describe, expect, it } from 'vitest';
import { assignTargets, memberValue, targetSetValue } from '../../src/leadership/assignment.ts';
import { balanceOf } from '../../src/status/balance-read.ts';
import {
  EXIT_UNHEALTHY,
  formatBalance,
  formatStatus,
  statusExitCode,
  statusJson,
  when,
} from '../../src/status/status-format.ts';
import { statusProblems, type TargetStatus } from '../../src/status/target-status.ts';

const NOW = Date.parse('2026-12-01T12:00:00Z');

function row(o: Partial<TargetStatus>): TargetStatus {
  const target = o.target ?? 'prod:spark';
  return {
    target,
    cluster: 'prod-1',
    key: target,
    refused: null,
    previousRelease: null,
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
    keptByPodPhase: null,
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

describe('the leadership balance (status, from the members and leaders etcd has)', () => {
  const targets = Array.from({ length: 10 }, (_, i) => `prod:ns-${i}`);
  const set = targetSetValue(targets);
  const members = new Map([
    ['r1', set],
    ['r2', set],
    ['r3', set],
    ['other-1', targetSetValue(['prod:elsewhere'])],
  ]);
  const { owners } = assignTargets(targets, ['r1', 'r2', 'r3']);
  const ownerOf = (t: string) => owners.get(t) ?? '';

  it('balanced: cap ⌈10/3⌉ = 4, every member leads what it is assigned, no flag', () => {
    const leaders = targets.map(ownerOf);
    const b = balanceOf(targets, members, leaders);
    expect(b).toMatchObject({ members: ['r1', 'r2', 'r3'], targets: 10, cap: 4, otherMembers: ['other-1'] });
    for (const m of ['r1', 'r2', 'r3']) {
      const assigned = targets.filter((t) => ownerOf(t) === m).length;
      expect(b.share[m]).toEqual({ assigned, leading: assigned });
    }
    const rows = targets.map((t) => row({ target: t, leader: ownerOf(t) }));
    const lines = formatBalance(b, rows);
    expect(lines.slice(0, 2)).toEqual([
      'Leadership balance (the live members serving these targets)',
      '  members 3, targets 10, cap 4',
    ]);
    expect(lines.filter((l) => /^ {2}r\d {2}leads \d {2}assigned \d$/.test(l))).toHaveLength(3);
    expect(lines.join('\n')).not.toContain('OVER CAP');
    expect(lines.at(-1)).toBe('  other members (serving other targets): other-1');
  });

  it('a member leading more than the cap is flagged, with the targets it holds that are assigned elsewhere', () => {
    const leaders = targets.map(() => 'r1');
    const b = balanceOf(targets, members, leaders);
    const moving = targets.filter((t) => ownerOf(t) !== 'r1').length;
    const rows = targets.map((t) => row({ target: t, leader: 'r1' }));
    const r1 = formatBalance(b, rows).find((l) => l.startsWith('  r1'));
    expect(r1).toBe(
      `  r1  leads 10  assigned ${b.share.r1?.assigned}  OVER CAP: leads more than 4 ` +
        `(${moving} of its targets assigned elsewhere: normal only while it hands them over)`,
    );
    expect(formatBalance(b, rows).find((l) => l.startsWith('  r2'))).toMatch(
      /^ {2}r2 {2}leads 0 {2}assigned \d$/,
    );
  });

  it('a leader that is not a member serving these targets is named, not flagged', () => {
    const b = balanceOf(['prod:ns-0'], new Map([['gone', 'x']]), ['gone']);
    expect(b).toMatchObject({ members: [], cap: 0, share: { gone: { assigned: 0, leading: 1 } } });
    expect(formatBalance(b, [row({ target: 'prod:ns-0', leader: 'gone' })])).toContain(
      '  gone  leads 1  assigned 0  (not balanced here: a member serving other targets)',
    );
  });

  it('text and JSON: the block after the targets, `assigned` per target, `balance` without owners; neither without etcd', () => {
    const leaders = targets.map(ownerOf);
    const b = balanceOf(targets, members, leaders);
    const rows = targets.map((t) => row({ target: t, leader: ownerOf(t) }));
    const text = formatStatus(rows, NOW, b);
    expect(text).toContain(`  assigned to:   ${ownerOf('prod:ns-0')}`);
    expect(text).toContain('\nLeadership balance');
    expect(formatStatus(rows, NOW)).not.toContain('Leadership balance');
    const json = statusJson(rows, NOW, b) as {
      targets: { assigned: string }[];
      balance: Record<string, unknown>;
    };
    expect(json.targets[0]?.assigned).toBe(ownerOf('prod:ns-0'));
    expect(Object.keys(json.balance).sort()).toEqual([
      'cap',
      'members',
      'notReady',
      'otherMembers',
      'rule',
      'share',
      'targets',
    ]);
    expect(statusJson(rows, NOW)).not.toHaveProperty('balance');
  });

  it('a member that cannot clean a target (its membership value says so): named on the target, never assigned it', () => {
    const notReady = new Map(members);
    notReady.set('r3', memberValue(set, ['prod:ns-0', 'prod:ns-1'], targets.length));
    const b = balanceOf(
      targets,
      notReady,
      targets.map(() => null),
    );
    expect(b.members).toEqual(['r1', 'r2', 'r3']);
    expect(b.notReady).toEqual({ 'prod:ns-0': ['r3'], 'prod:ns-1': ['r3'] });
    expect(b.owners['prod:ns-0']).not.toBe('r3');
    expect(b.owners['prod:ns-1']).not.toBe('r3');
    const rows = targets.map((t) => row({ target: t, leader: null }));
    const text = formatStatus(rows, NOW, b);
    expect(text).toContain(
      '  not ready on:  r3 (cannot list or watch its pods, or stepped down for want of progress; its /readyz says which: not campaigning)',
    );
    expect(text.match(/not ready on/g)).toHaveLength(2);
    const json = statusJson(rows, NOW, b) as { targets: { target: string; notReadyOn: string[] }[] };
    expect(json.targets.find((t) => t.target === 'prod:ns-1')?.notReadyOn).toEqual(['r3']);
    expect(json.targets.find((t) => t.target === 'prod:ns-2')?.notReadyOn).toEqual([]);
  });
});
