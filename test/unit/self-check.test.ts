import { describe, expect, it, vi } from 'vitest';
import { createSelfCheck, type SelfCheckSubject } from '../../src/cleaner/self-check.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import type { QueueLook } from '../../src/queue/queue-look.ts';
import { memoryLogger } from '../helpers/log.ts';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const RETENTION = 60_000;
const GRACE = 40_000;
const STUCK = 40_000;
const ALARM = 80_000;

function finished(name: string, agoMs: number): DriverPod {
  return {
    metadata: {
      name,
      namespace: 'spark',
      uid: `uid-${name}`,
      labels: { 'spark-role': 'driver', 'kyuubi-unique-tag': name },
    },
    status: {
      phase: 'Succeeded',
      containerStatuses: [
        {
          name: 'spark-kubernetes-driver',
          state: { terminated: { exitCode: 0, finishedAt: new Date(NOW - agoMs).toISOString() } },
        },
      ],
    },
  };
}

/** A target whose state the test sets; records step-downs. */
function subject(over: Partial<Omit<SelfCheckSubject, 'pods'>> & { pods?: DriverPod[] } = {}) {
  const steps: string[] = [];
  const list = over.pods ?? [];
  const s: SelfCheckSubject & { steps: string[] } = {
    informerSynced: true,
    isLeader: true,
    workerRunning: true,
    lastProgressMs: undefined,
    fenced: undefined,
    leaderSinceMs: 0,
    firstSeenTerminalMs: () => undefined,
    stepDown: (reason) => steps.push(reason),
    currentLeader: async () => 'replica-2',
    // Default: the overdue pod's job is due and waiting, untaken (what a stuck worker leaves).
    lookAtQueue: async () => ({ waiting: 1, earliestDelayedPastDueMs: undefined, missing: 0 }),
    ...over,
    pods: () => list,
    steps,
  };
  return s;
}

function check(s: SelfCheckSubject, mono: { t: number }, dryRun = false) {
  const log = memoryLogger();
  const sc = createSelfCheck({
    subject: s,
    selector: parseLabelSelector('spark-role=driver,kyuubi-unique-tag'),
    policy: 'ALL',
    retentionMs: RETENTION,
    graceMs: GRACE,
    leaderStuckMs: STUCK,
    followerAlarmMs: ALARM,
    dryRun,
    log: log.log,
    now: () => NOW,
    monotonicNow: () => mono.t,
  });
  return { sc, log };
}

const overduePod = () => finished('late', RETENTION + GRACE + 10_000); // 50 s past its deadline

describe('self-check of a leader', () => {
  it('processing jobs, pods overdue (API failures) → ok: stepping down would not help', async () => {
    const mono = { t: 100_000 };
    const s = subject({ pods: [overduePod()], lastProgressMs: 99_000 });
    expect(await check(s, mono).sc.check()).toBe('ok');
    expect(s.steps).toEqual([]);
  });

  it('no job processed for 40 s while pods are overdue and a job waits untaken → steps down with one error line', async () => {
    const mono = { t: 100_000 };
    const s = subject({ pods: [overduePod()], lastProgressMs: 60_000 });
    const { sc, log } = check(s, mono);
    expect(await sc.check()).toBe('stepped-down');
    expect(s.steps).toHaveLength(1);
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(1);
  });

  const looks: [string, QueueLook | Error, 'ok' | 'stepped-down', RegExp | undefined][] = [
    [
      'a job due and waiting',
      { waiting: 3, earliestDelayedPastDueMs: undefined, missing: 0 },
      'stepped-down',
      /3 jobs are due and waiting/,
    ],
    [
      'a delayed job 10 s past due, not promoted',
      { waiting: 0, earliestDelayedPastDueMs: 10_000, missing: 0 },
      'stepped-down',
      /past due, not promoted/,
    ],
    [
      'an overdue pod without a job',
      { waiting: 0, earliestDelayedPastDueMs: -5000, missing: 1 },
      'stepped-down',
      /have no job/,
    ],
    [
      'the queue unreadable (Redis down)',
      new Error('connection refused'),
      'stepped-down',
      /cannot be read: connection refused/,
    ],
    [
      'every job in its retry backoff (delayed, due in 2 min): failing, not stuck',
      { waiting: 0, earliestDelayedPastDueMs: -120_000, missing: 0 },
      'ok',
      undefined,
    ],
    [
      'a delayed job 9.999 s past due (clock slack)',
      { waiting: 0, earliestDelayedPastDueMs: 9999, missing: 0 },
      'ok',
      undefined,
    ],
    [
      'every job out of attempts (failed; none delayed, none waiting): failing, not stuck',
      { waiting: 0, earliestDelayedPastDueMs: undefined, missing: 0 },
      'ok',
      undefined,
    ],
  ];
  it.each(looks)(
    'no progress for 40 s while pods are overdue, the queue shows %s → %s',
    async (_name, look, want, why) => {
      const s = subject({
        pods: [overduePod()],
        lastProgressMs: 60_000,
        lookAtQueue: async () => {
          if (look instanceof Error) throw look;
          return look;
        },
      });
      const { sc, log } = check(s, { t: 100_000 });
      expect(await sc.check()).toBe(want);
      if (why) expect(s.steps[0]).toMatch(why);
      else {
        expect(s.steps).toEqual([]);
        expect(log.lines.filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([]);
        expect(
          log.lines.filter((l) => /failing and retried with backoff; not stuck/.test(String(l.msg))),
        ).toHaveLength(1);
      }
    },
  );

  it('a queue look that does not answer (Redis frozen) counts as unreadable after 5 s', async () => {
    vi.useFakeTimers();
    try {
      const s = subject({
        pods: [overduePod()],
        lastProgressMs: 60_000,
        lookAtQueue: () => new Promise(() => {}),
      });
      const result = check(s, { t: 100_000 }).sc.check();
      await vi.advanceTimersByTimeAsync(5000);
      expect(await result).toBe('stepped-down');
      expect(s.steps[0]).toMatch(/cannot be read/);
    } finally {
      vi.useRealTimers();
    }
  });

  it('every job fenced for 40 s while leading, the queue showing them put back (not due yet) → a warn line at 10 s (FENCED_WARN_MS), then steps down', async () => {
    const reason = 'lease may have expired: no recent keepalive';
    // Jobs fenced since 60 s, none making progress; each put back for 250 ms, so the look shows a failing
    // leader's queue (every job delayed, not due) and not a stuck one's: only the fences tell.
    const s = subject({
      pods: [overduePod()],
      lastProgressMs: 60_000,
      lookAtQueue: async () => ({ waiting: 0, earliestDelayedPastDueMs: -200, missing: 0 }),
    });
    const mono = { t: 60_000 };
    const fencedUntil = (t: number) => Object.assign(s, { fenced: { sinceMs: 60_000, lastMs: t, reason } });
    const { sc, log } = check(s, mono);
    const warns = () => log.lines.filter((l) => l.level === 'warn');
    mono.t = 69_999;
    fencedUntil(mono.t);
    expect(await sc.check()).toBe('ok');
    expect(warns()).toEqual([]);
    mono.t = 70_000;
    fencedUntil(mono.t);
    expect(await sc.check()).toBe('ok');
    expect(warns()).toHaveLength(1);
    expect(String(warns()[0]?.msg)).toMatch(/every job fenced while leading/);
    expect(warns()[0]).toMatchObject({ fencedMs: 10_000, why: reason });
    mono.t = 99_999;
    fencedUntil(mono.t);
    expect(await sc.check()).toBe('ok');
    expect(warns()).toHaveLength(1); // once per stretch
    mono.t = 100_000;
    fencedUntil(mono.t);
    expect(await sc.check()).toBe('stepped-down');
    expect(s.steps).toEqual([`self-check: leader fenced on every job for 40000 ms (${reason})`]);
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(1);
  });

  it('every job fenced while leading, no pod overdue yet → steps down all the same: a fenced job is a due one', async () => {
    const s = subject({
      pods: [finished('fresh', 1000)],
      fenced: { sinceMs: 50_000, lastMs: 99_900, reason: 'leader key gone or re-created' },
    });
    expect(await check(s, { t: 100_000 }).sc.check()).toBe('stepped-down');
    expect(s.steps[0]).toMatch(/fenced on every job for 49900 ms/);
  });

  it('jobs fenced at the end of an earlier term (a handover) say nothing about this one', async () => {
    const s = subject({
      pods: [finished('fresh', 1000)],
      leaderSinceMs: 60_000,
      fenced: { sinceMs: 10_000, lastMs: 59_000, reason: 'not the leader' },
    });
    const { sc, log } = check(s, { t: 200_000 });
    expect(await sc.check()).toBe('ok');
    expect(log.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
  });

  it('no job processed for 39.999 s → ok', async () => {
    const s = subject({ pods: [overduePod()], lastProgressMs: 60_001 });
    expect(await check(s, { t: 100_000 }).sc.check()).toBe('ok');
  });

  it('elected 10 s ago, nothing processed yet, pods overdue → ok (the term is young)', async () => {
    const s = subject({ pods: [overduePod()], leaderSinceMs: 90_000 });
    expect(await check(s, { t: 100_000 }).sc.check()).toBe('ok');
  });

  it('nothing overdue, nothing processed for an hour → ok (an idle target)', async () => {
    const s = subject({ pods: [finished('fresh', 1000)], lastProgressMs: 0 });
    expect(await check(s, { t: 3_600_000 }).sc.check()).toBe('ok');
  });

  it('worker not running: ok until 40 s have passed, then steps down', async () => {
    const mono = { t: 100_000 };
    const s = subject({ workerRunning: false });
    const { sc } = check(s, mono);
    expect(await sc.check()).toBe('ok');
    mono.t += STUCK - 1;
    expect(await sc.check()).toBe('ok');
    mono.t += 1;
    expect(await sc.check()).toBe('stepped-down');
    expect(s.steps[0]).toMatch(/without a running worker/);
  });

  it('worker down, then running again before 40 s → the count restarts', async () => {
    const mono = { t: 100_000 };
    const s = subject({ workerRunning: false });
    const { sc } = check(s, mono);
    await sc.check();
    mono.t += 30_000;
    Object.assign(s, { workerRunning: true });
    expect(await sc.check()).toBe('ok');
    Object.assign(s, { workerRunning: false });
    mono.t += 30_000;
    expect(await sc.check()).toBe('ok');
  });

  it('informer not synced: nothing is judged', async () => {
    const s = subject({ pods: [overduePod()], informerSynced: false, lastProgressMs: 0 });
    expect(check(s, { t: 100_000 }).sc.overdue().count).toBe(0);
  });
});

describe('self-check in dry run', () => {
  it('a pod 50 s past its would-delete deadline (grace 40 s) counts; the leader does not step down for it', async () => {
    // No progress for 100 s and a job due and waiting would make a leader step down outside dry run.
    const s = subject({ pods: [overduePod(), finished('fresh', RETENTION)], lastProgressMs: 0 });
    const { sc, log } = check(s, { t: 100_000 }, true);
    expect(sc.overdue()).toMatchObject({ count: 1, oldestAgeMs: GRACE + 10_000 });
    expect(sc.overdue().oldest.map((p) => p.name)).toEqual(['late']);
    expect(await sc.check()).toBe('ok');
    expect(s.steps).toEqual([]);
    expect(log.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
  });

  it('a leader without a running worker still steps down (it would not even log would-delete)', async () => {
    const mono = { t: 100_000 };
    const s = subject({ workerRunning: false });
    const { sc } = check(s, mono, true);
    expect(await sc.check()).toBe('ok');
    mono.t += STUCK;
    expect(await sc.check()).toBe('stepped-down');
  });

  it('the leader warns once a pod is 80 s past its would-delete deadline, again only after 80 s', async () => {
    const mono = { t: 100_000 };
    const s = subject({ pods: [finished('stuck', RETENTION + ALARM)], lastProgressMs: 0 });
    const { sc, log } = check(s, mono, true);
    expect(await sc.check()).toBe('alarmed');
    mono.t += ALARM - 1;
    expect(await sc.check()).toBe('ok');
    mono.t += 1;
    expect(await sc.check()).toBe('alarmed');
    const warns = log.lines.filter((l) => l.level === 'warn');
    expect(warns).toHaveLength(2);
    expect(warns[0]?.msg).toBe(
      'self-check: dry run is on and pods are past their would-delete deadline: nothing deletes them',
    );
    expect(warns[0]).toMatchObject({
      overdue: 1,
      dryRun: true,
      oldest: [{ pod: 'stuck', uid: 'uid-stuck' }],
    });
    expect(String(warns[0]?.fix)).toMatch(/SDC_DRY_RUN=false/);
    expect(log.lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(s.steps).toEqual([]);
  });

  it('a follower neither alarms nor warns: the leader speaks for the target', async () => {
    const s = subject({
      isLeader: false,
      leaderSinceMs: undefined,
      pods: [finished('stuck', RETENTION + ALARM)],
    });
    const { sc, log } = check(s, { t: 100_000 }, true);
    expect(sc.overdue().count).toBe(1);
    expect(await sc.check()).toBe('ok');
    expect(log.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
  });
});

describe('self-check of a follower', () => {
  it('a pod 50 s past its deadline (grace 40 s, alarm 80 s) → counted, no alarm yet', async () => {
    const s = subject({ isLeader: false, leaderSinceMs: undefined, pods: [overduePod()] });
    const { sc, log } = check(s, { t: 100_000 });
    expect(sc.overdue().count).toBe(1);
    expect(await sc.check()).toBe('ok');
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(0);
  });

  it('a pod 80 s past its deadline → one error naming the leader, repeated only after 80 s', async () => {
    const mono = { t: 100_000 };
    const s = subject({
      isLeader: false,
      leaderSinceMs: undefined,
      pods: [finished('stuck', RETENTION + ALARM)],
    });
    const { sc, log } = check(s, mono);
    expect(await sc.check()).toBe('alarmed');
    expect(await sc.check()).toBe('ok');
    mono.t += ALARM;
    expect(await sc.check()).toBe('alarmed');
    const errors = log.lines.filter((l) => l.level === 'error');
    expect(errors).toHaveLength(2);
    expect(errors[0]?.leader).toBe('replica-2');
    expect(String(errors[0]?.msg)).toMatch(/replica-2/);
    expect(s.steps).toEqual([]);
  });
});
