/**
 * The terminal rule against Kyuubi's own, for every fixture pod (the shared file and
 * test/fixtures/kyuubi-state-pods.json) under both values of `kyuubi.kubernetes.application.state.source`.
 *
 * The expected states are Kyuubi's, written down in the fixtures' `kyuubi-<SOURCE>-app-state` annotations from
 * Apache Kyuubi v1.12.0 (commit bca17a7b5cfa0d32440832f5611f922164644943),
 * kyuubi-server/src/main/scala/org/apache/kyuubi/engine/KubernetesApplicationOperation.scala:
 * - L636–681 `getApplicationStateAndErrorFromPod`: under CONTAINER the container named by
 *   `kyuubi.kubernetes.application.state.container`, found ignoring case (L643–644); a terminal container state
 *   wins (L655–656), else a terminal pod phase (L658), else the container's state (L659), else the phase (L660);
 * - L683–697 `containerStateToApplicationState`: waiting with no reason or ContainerCreating/PodInitializing
 *   (L605) → PENDING, other waiting reasons → FAILED, running → RUNNING, no state → UNKNOWN, exit 0 → FINISHED,
 *   any other exit code (137 included) → FAILED;
 * - L699–711 `podStateToApplicationState`: Pending, Running, Succeeded → FINISHED, Failed|Error → FAILED,
 *   OOMKilled → KILLED, Unknown, anything else → UNKNOWN (with a warning);
 * - L179–195 the cleanup trigger: ALL deletes every terminated application's pod, COMPLETED those not
 *   `isFailed` (ApplicationOperation.scala L96–122: FAILED and KILLED are failed; terminated = FINISHED,
 *   FAILED, KILLED).
 */
import { describe, expect, it } from 'vitest';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import {
  type ApplicationState,
  type AppStateSettings,
  DRIVER_CONTAINER,
  isTerminalState,
  KYUUBI_STATE_DEFAULTS,
  podState,
  type StateSource,
} from '../../src/kube/application-state.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import { deadlineMs, decide, FINISH_TIME_MAX_AHEAD_MS, finishTime } from '../../src/rules/decision.ts';
import { findKeptByPodPhase, keptByPodPhase } from '../../src/rules/kept-by-pod-phase.ts';
import { expected, type FixturePod, fixturePods, kyuubiStatePods } from '../helpers/fixtures.ts';

const selector = parseLabelSelector('spark-role=driver,kyuubi-unique-tag');
const SOURCES: readonly StateSource[] = ['POD', 'CONTAINER'];
const POLICIES = ['ALL', 'COMPLETED'] as const;

const settingsFor = (pod: FixturePod, source: StateSource): AppStateSettings => ({
  source,
  container: expected(pod, 'state-container') ?? DRIVER_CONTAINER,
});

/** Kyuubi's cleanup decision from its state: selected, not being deleted, terminated, and not failed under COMPLETED. */
function kyuubiDeletes(pod: FixturePod, state: ApplicationState, policy: 'ALL' | 'COMPLETED'): boolean {
  if (!selector.matches(pod.metadata?.labels) || pod.metadata?.deletionTimestamp) return false;
  return isTerminalState(state) && (policy === 'ALL' || state === 'FINISHED');
}

describe.each(SOURCES)(
  'kyuubi.kubernetes.application.state.source=%s: every fixture pod as Kyuubi computes it',
  (source) => {
    const shared = fixturePods();
    const own = kyuubiStatePods();
    it('has the fixtures of both files', () => {
      expect(shared.length).toBeGreaterThanOrEqual(13);
      expect(own.length).toBeGreaterThanOrEqual(13);
    });
    for (const pod of [...shared, ...own]) {
      it(`${pod.metadata?.name} (${expected(pod, 'case')})`, () => {
        const settings = settingsFor(pod, source);
        const want = expected(pod, `kyuubi-${source}-app-state`) as ApplicationState;
        expect(want, 'the fixture states Kyuubi’s answer').toBeDefined();
        const state = podState(pod, settings);
        expect(state.state).toBe(want);
        expect(state.terminal).toBe(isTerminalState(want));

        for (const policy of POLICIES) {
          const d = decide(pod, { selector, policy, appState: settings });
          const written = expected(pod, `delete-under-${source}-${policy}`);
          const kyuubi = kyuubiDeletes(pod, want, policy);
          if (written !== undefined)
            expect(String(kyuubi), 'the written answer is Kyuubi’s rule').toBe(written);
          expect(d.action === 'enqueue', `delete under ${policy}`).toBe(kyuubi);
          // The shared file's own delete keys were written with the driver container deciding: CONTAINER.
          const sharedKey = expected(pod, `delete-under-${policy}`);
          if (source === 'CONTAINER' && sharedKey !== undefined)
            expect(String(d.action === 'enqueue')).toBe(sharedKey);
          const kept = expected(pod, `kept-by-pod-phase-${policy}`);
          if (kept !== undefined)
            expect(String(keptByPodPhase(pod, { selector, policy, appState: settings }) !== undefined)).toBe(
              source === 'POD' ? kept : 'false',
            );
        }

        if (state.terminal) {
          const finished =
            expected(pod, `finished-at-${source}`) ??
            (source === 'CONTAINER' ? expected(pod, 'finished-at') : undefined);
          if (finished?.startsWith('unknown')) expect(state.finishedAtMs).toBeUndefined();
          else if (finished) expect(state.finishedAtMs).toBe(Date.parse(finished));
        } else expect(state.finishedAtMs).toBeUndefined();

        // The shared file marks its malformed pod by its case; ours with `unreadable`.
        const unreadable =
          expected(pod, 'unreadable') ?? String(expected(pod, 'case')?.startsWith('malformed'));
        expect(state.unreadable.length > 0).toBe(unreadable === 'true');
      });
    }
  },
);

describe('the sidecar pod of the shared file (driver container ended, istio-proxy keeps the pod Running)', () => {
  const pod = fixturePods().find((p) => p.metadata?.name?.startsWith('kyuubi-mesh-enabled-etl'));
  if (!pod) throw new Error('sidecar fixture missing');
  it('is kept under POD (Kyuubi’s default) and counted as kept by the pod phase', () => {
    const rules = { selector, policy: 'ALL' as const, appState: KYUUBI_STATE_DEFAULTS };
    expect(decide(pod, rules)).toMatchObject({ action: 'none', reason: 'not-terminal' });
    expect(keptByPodPhase(pod, rules)).toEqual({
      container: DRIVER_CONTAINER,
      containerState: 'FINISHED',
      exitCode: 0,
      finishedAtMs: Date.parse('2026-11-28T09:35:40Z'),
      phase: 'Running',
      running: ['istio-proxy'],
    });
  });
  it('is cleaned under CONTAINER, with the driver container’s finish time', () => {
    const d = decide(pod, {
      selector,
      policy: 'ALL',
      appState: { source: 'CONTAINER', container: DRIVER_CONTAINER },
    });
    expect(d).toMatchObject({ action: 'enqueue', state: { state: 'FINISHED', from: 'container' } });
    expect(d.action === 'enqueue' && d.state.finishedAtMs).toBe(Date.parse('2026-11-28T09:35:40Z'));
  });
});

describe('the renamed driver container', () => {
  const pod = kyuubiStatePods().find((p) => expected(p, 'state-container') === 'driver');
  if (!pod) throw new Error('renamed-container fixture missing');
  it('with the default container name, CONTAINER finds no container and reads the phase', () => {
    const s = podState(pod, { source: 'CONTAINER', container: DRIVER_CONTAINER });
    expect(s.state).toBe(expected(pod, 'kyuubi-CONTAINER-app-state-default-container'));
    expect(s.stateContainer).toBeUndefined();
  });
  it('the name is matched ignoring case, as Kyuubi’s equalsIgnoreCase (L644)', () => {
    expect(podState(pod, { source: 'CONTAINER', container: 'DRIVER' }).state).toBe('FINISHED');
  });
});

/** A minimal pod: `phase` and the named container's state. */
function pod(
  phase: string | undefined,
  container?: Record<string, unknown>,
  name = DRIVER_CONTAINER,
): DriverPod {
  return {
    metadata: {
      name: 'p',
      namespace: 'n',
      uid: 'u',
      labels: { 'spark-role': 'driver', 'kyuubi-unique-tag': 't' },
    },
    status: {
      ...(phase === undefined ? {} : { phase }),
      ...(container ? { containerStatuses: [{ name, state: container }] } : {}),
    },
  } as DriverPod;
}

describe('Kyuubi’s mappings, case by case', () => {
  const CONTAINER: AppStateSettings = { source: 'CONTAINER', container: DRIVER_CONTAINER };
  const cases: [string, DriverPod, ApplicationState, ApplicationState][] = [
    ['phase Error (L704) → FAILED', pod('Error'), 'FAILED', 'FAILED'],
    ['phase OOMKilled (L705) → KILLED', pod('OOMKilled'), 'KILLED', 'KILLED'],
    ['a phase Kubernetes does not have (L707) → UNKNOWN', pod('Weird'), 'UNKNOWN', 'UNKNOWN'],
    [
      'waiting with an empty reason (L686-687) → PENDING',
      pod('Pending', { waiting: { reason: ' ' } }),
      'PENDING',
      'PENDING',
    ],
    [
      'waiting PodInitializing (L605) → PENDING',
      pod('Pending', { waiting: { reason: 'PodInitializing' } }),
      'PENDING',
      'PENDING',
    ],
    [
      'waiting CreateContainerConfigError (L687) → FAILED under CONTAINER',
      pod('Pending', { waiting: { reason: 'CreateContainerConfigError' } }),
      'PENDING',
      'FAILED',
    ],
    [
      'a container state with none of its three fields (L690-691) → UNKNOWN',
      pod('Running', {}),
      'RUNNING',
      'UNKNOWN',
    ],
    [
      'terminated without an exit code (null ≠ 0, L692) → FAILED',
      pod('Running', { terminated: { reason: 'Error' } }),
      'RUNNING',
      'FAILED',
    ],
    [
      'a terminal phase wins over a running container (L658)',
      pod('Succeeded', { running: {} }),
      'FINISHED',
      'FINISHED',
    ],
    [
      'a terminated container wins over a terminal phase (L655-656)',
      pod('Succeeded', { terminated: { exitCode: 3 } }),
      'FINISHED',
      'FAILED',
    ],
  ];
  for (const [name, p, underPod, underContainer] of cases)
    it(name, () => {
      expect(podState(p, KYUUBI_STATE_DEFAULTS).state).toBe(underPod);
      expect(podState(p, CONTAINER).state).toBe(underContainer);
    });
});

describe('what the rule cannot read is named, never thrown', () => {
  it('an unparsable finishedAt: first seen stands in, and the field is named', () => {
    const s = podState(
      pod('Succeeded', { terminated: { exitCode: 0, finishedAt: 'soon' } }),
      KYUUBI_STATE_DEFAULTS,
    );
    expect(s).toMatchObject({ state: 'FINISHED', terminal: true, finishedAtMs: undefined });
    expect(s.unreadable).toEqual([
      `finishedAt of container ${DRIVER_CONTAINER} "soon" is not a timestamp: the retention counts from when the pod was first seen terminal`,
    ]);
  });
  it('an unknown phase with malformed container statuses: UNKNOWN, both named', () => {
    const odd = {
      ...pod('Exploded'),
      status: { phase: 'Exploded', containerStatuses: 'oops' },
    } as unknown as DriverPod;
    for (const settings of [
      KYUUBI_STATE_DEFAULTS,
      { source: 'CONTAINER' as const, container: DRIVER_CONTAINER },
    ]) {
      const s = podState(odd, settings);
      expect(s.state).toBe('UNKNOWN');
      expect(s.unreadable).toEqual([
        'status.phase "Exploded" is not a pod phase: state UNKNOWN',
        'status.containerStatuses is not a list: no container state read',
      ]);
    }
  });
  it('a well-formed pod has nothing unreadable', () => {
    expect(podState(pod('Running', { running: {} }), KYUUBI_STATE_DEFAULTS).unreadable).toEqual([]);
  });
});

describe('findKeptByPodPhase counts a target’s kept pods', () => {
  const pods = [...fixturePods(), ...kyuubiStatePods()];
  const kept = pods.filter(
    (p) =>
      expected(p, 'kept-by-pod-phase-ALL') === 'true' ||
      p.metadata?.name?.startsWith('kyuubi-mesh-enabled-etl'),
  );
  it('under POD and ALL: exactly the fixtures marked kept, names sorted, at most the limit listed', () => {
    const report = findKeptByPodPhase(
      pods.filter((p) => expected(p, 'state-container') === undefined),
      { selector, policy: 'ALL', appState: KYUUBI_STATE_DEFAULTS },
      3,
    );
    const names = kept
      .filter((p) => expected(p, 'state-container') === undefined)
      .map((p) => p.metadata?.name ?? '')
      .sort();
    expect(report.count).toBe(names.length);
    expect(report.pods).toEqual(names.slice(0, 3));
  });
  it('under CONTAINER: none (they are cleaned)', () => {
    expect(
      findKeptByPodPhase(pods, {
        selector,
        policy: 'ALL',
        appState: { source: 'CONTAINER', container: DRIVER_CONTAINER },
      }),
    ).toEqual({ count: 0, pods: [] });
  });
});

describe('decide on malformed input', () => {
  const rules = { selector, policy: 'ALL' as const, appState: KYUUBI_STATE_DEFAULTS };
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
        rules,
      ),
    ).toEqual({ action: 'none', reason: 'malformed' });
  });
  it('an object without metadata does not throw', () => {
    expect(decide({} as never, rules).action).toBe('none');
  });
  it('the pod already being deleted is cancelled, not enqueued', () => {
    const deleting = fixturePods().find((p) => p.metadata?.deletionTimestamp);
    if (!deleting) throw new Error('fixture with deletionTimestamp missing');
    expect(decide(deleting, rules)).toEqual({ action: 'cancel', reason: 'deleting' });
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
      'no finishedAt, first seen stamped ahead of now (a clock not behind the API server’s) → no skew: the pod has no finish time',
      undefined,
      5000,
      now + 1,
      { deadlineMs: now + 5001, skewMs: 0 },
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
    return finishTime(p, podState(p, KYUUBI_STATE_DEFAULTS), now);
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
