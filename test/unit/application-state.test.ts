import { describe, expect, it } from 'vitest';
import { deadlineMs, decide, FINISH_TIME_MAX_AHEAD_MS, finishTime } from '../../src/cleanup/decision.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { podState } from '../../src/kube/application-state.ts';
import { expected, fixturePods } from '../helpers/fixtures.ts';

const selector = parseLabelSelector('spark-role=driver,kyuubi-unique-tag');

describe('every fixture pod gets its expected classification and decision', () => {
  const pods = fixturePods();
  it('has the fixtures', () => expect(pods.length).toBeGreaterThanOrEqual(13));
  for (const pod of pods) {
    const name = `${pod.metadata?.name} (${expected(pod, 'case')})`;
    it(name, () => {
      const state = podState(pod);
      expect(String(state.terminal)).toBe(expected(pod, 'terminal'));
      const appState = expected(pod, 'app-state');
      if (appState) expect(state.state).toBe(appState);
      const finished = expected(pod, 'finished-at');
      if (finished?.startsWith('unknown')) expect(state.finishedAtMs).toBeUndefined();
      else if (finished) expect(state.finishedAtMs).toBe(Date.parse(finished));
      for (const policy of ['ALL', 'COMPLETED'] as const) {
        const d = decide(pod, { selector, policy });
        expect(String(d.action === 'enqueue'), `delete under ${policy}`).toBe(
          expected(pod, `delete-under-${policy}`),
        );
      }
    });
  }
  it('the pod already being deleted is cancelled, not enqueued', () => {
    const pod = pods.find((p) => p.metadata?.deletionTimestamp);
    if (!pod) throw new Error('fixture with deletionTimestamp missing');
    expect(decide(pod, { selector, policy: 'ALL' })).toEqual({ action: 'cancel', reason: 'deleting' });
  });
});

describe('decide on malformed input', () => {
  it('a pod without uid is left alone as malformed', () => {
    expect(
      decide(
        {
          metadata: {
            name: 'x',
            namespace: 'n',
            labels: { 'spark-role': 'driver', 'kyuubi-unique-tag': 't' },
          },
        },
        { selector, policy: 'ALL' },
      ),
    ).toEqual({
      action: 'none',
      reason: 'malformed',
    });
  });
  it('an object without metadata does not throw', () => {
    expect(decide({} as never, { selector, policy: 'ALL' }).action).toBe('none');
  });
});

describe('deadlineMs(finishedAt, retention, now)', () => {
  const now = 1_000_000;
  const cases: [
    string,
    number | undefined,
    number,
    number | undefined,
    { deadlineMs: number; skewMs: number },
  ][] = [
    [
      'terminated 10 s ago, retention 15 s → due in 5000 ms',
      now - 10_000,
      15_000,
      undefined,
      { deadlineMs: now + 5000, skewMs: 0 },
    ],
    [
      'terminated 20 s ago, retention 15 s → overdue by 5000 ms',
      now - 20_000,
      15_000,
      undefined,
      { deadlineMs: now - 5000, skewMs: 0 },
    ],
    ['retention 0 → due at finish', now - 1, 0, undefined, { deadlineMs: now - 1, skewMs: 0 }],
    ['finishedAt exactly now → now + retention', now, 5000, undefined, { deadlineMs: now + 5000, skewMs: 0 }],
    [
      'finishedAt 1 h in the future (skew, or our clock behind) → deferred: finishedAt + retention, never earlier',
      now + 3_600_000,
      5000,
      undefined,
      { deadlineMs: now + 3_605_000, skewMs: 3_600_000 },
    ],
    [
      'no finishedAt, first seen 3 s ago → first seen + retention',
      undefined,
      5000,
      now - 3000,
      { deadlineMs: now + 2000, skewMs: 0 },
    ],
    [
      'no finishedAt, never seen before → now + retention',
      undefined,
      5000,
      undefined,
      { deadlineMs: now + 5000, skewMs: 0 },
    ],
  ];
  for (const [name, finished, retention, firstSeen, want] of cases) {
    it(name, () => {
      const got = deadlineMs(finished, retention, now, firstSeen);
      expect({ deadlineMs: got.deadlineMs, skewMs: got.skewMs }).toEqual(want);
    });
  }
});

describe("finishTime(pod, state, now): the pod's own finish time, when plausible", () => {
  const now = Date.parse('2026-12-01T10:00:00Z');
  const iso = (ms: number) => new Date(ms).toISOString();
  const pod = (o: { finishedAt?: number; transitions?: number[]; created?: number }) => ({
    metadata: { name: 'p', creationTimestamp: iso(o.created ?? now - 600_000) },
    status: {
      phase: 'Succeeded',
      ...(o.finishedAt === undefined
        ? {}
        : {
            containerStatuses: [
              {
                name: 'spark-kubernetes-driver',
                state: { terminated: { exitCode: 0, finishedAt: iso(o.finishedAt) } },
              },
            ],
          }),
      conditions: (o.transitions ?? []).map((t) => ({
        type: 'Ready',
        status: 'False',
        lastTransitionTime: iso(t),
      })),
    },
  });
  const of = (o: Parameters<typeof pod>[0]) => {
    const p = pod(o);
    return finishTime(p, podState(p), now);
  };
  it('finishedAt → itself', () =>
    expect(of({ finishedAt: now - 5000 })).toEqual({ ms: now - 5000, source: 'finishedAt' }));
  it('no finishedAt → the latest condition transition', () =>
    expect(of({ transitions: [now - 9000, now - 4000] })).toEqual({ ms: now - 4000, source: 'condition' }));
  it("nothing → undefined (the caller's first-seen time stands in)", () =>
    expect(of({})).toEqual({ ms: undefined, source: undefined }));
  it('1970-01-01 (before the creation) → refused, reported', () =>
    expect(of({ finishedAt: 0 })).toEqual({
      ms: undefined,
      source: undefined,
      implausible: { finishedAtMs: 0, why: 'before creationTimestamp' },
    }));
  it('9999-12-31 → refused; the condition time stands in', () => {
    const far = Date.parse('9999-12-31T00:00:00Z');
    expect(of({ finishedAt: far, transitions: [now - 1000] })).toEqual({
      ms: now - 1000,
      source: 'condition',
      implausible: { finishedAtMs: far, why: 'too far in the future' },
    });
  });
  it('up to the skew bound ahead → kept (deferred); beyond → refused', () => {
    expect(of({ finishedAt: now + FINISH_TIME_MAX_AHEAD_MS }).ms).toBe(now + FINISH_TIME_MAX_AHEAD_MS);
    expect(of({ finishedAt: now + FINISH_TIME_MAX_AHEAD_MS + 1 }).ms).toBeUndefined();
  });
});
