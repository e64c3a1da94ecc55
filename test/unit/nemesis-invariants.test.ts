/**
 * The nemesis's invariant checks (test/helpers/invariants.ts) and its metrics parser, table-driven:
 * what each DELETE log, store and sample series must be found to violate — or not.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { DeleteRecord } from '../../harness/sandbox/apiserver/request-log.ts';
import {
  checkDeletes,
  checkOverdueMetric,
  checkSent,
  checkStaleLeaderDeletes,
  checkTerminatingDeletes,
  findLeaks,
  type InvariantName,
  judgePod,
  type OverdueSample,
  overdueWindows,
} from '../helpers/invariants.ts';
import { parseGauge } from '../nemesis/overdue-sampler.ts';

const RETENTION = 3000;
/** A driver that finished at `finishedMs` (epoch ms; whole seconds as in RFC 3339) in `phase`. */
function driver(
  uid: string,
  o: { phase?: string; finishedMs?: number; selected?: boolean; role?: string; deleting?: boolean } = {},
): V1Pod {
  const labels: Record<string, string> = { 'spark-role': o.role ?? 'driver' };
  if (o.selected ?? true) labels['kyuubi-unique-tag'] = `tag-${uid}`;
  const phase = o.phase ?? 'Succeeded';
  const state =
    o.finishedMs === undefined
      ? { running: {} }
      : { terminated: { exitCode: 0, finishedAt: new Date(o.finishedMs).toISOString() as unknown as Date } };
  return {
    metadata: {
      name: `pod-${uid}`,
      namespace: 'ns',
      uid,
      labels,
      ...(o.deleting ? { deletionTimestamp: new Date(0) } : {}),
    },
    status: { phase, containerStatuses: [{ name: 'spark-kubernetes-driver', state } as never] },
  };
}

const T = 1_800_000_000_000; // finish time of the pods below (whole second)
const done = (uid: string) => driver(uid, { finishedMs: T });
/** A DELETE of `pod` arriving at `atMs`, answered `code`; applied when 200/202. */
function del(pod: V1Pod, atMs: number, code: number, extra: Partial<DeleteRecord> = {}): DeleteRecord {
  const uid = pod.metadata?.uid ?? '';
  return {
    verb: 'delete',
    method: 'DELETE',
    path: `/api/v1/namespaces/ns/pods/${pod.metadata?.name}`,
    code,
    atMs,
    uid,
    preconditionUid: uid,
    found: code === 404 ? undefined : pod,
    applied: code === 200 || code === 202 ? pod : undefined,
    ...extra,
  };
}
const known = new Set(['a', 'b', 'run', 'exec', 'plain', 'new']);
const after = T + RETENTION + 100;

describe('judgePod', () => {
  it.each([
    [
      'finished selected driver → selected, terminal, deadline finishedAt + retention',
      done('a'),
      [true, true, T + RETENTION],
    ],
    [
      'running driver → not terminal, no deadline',
      driver('run', { phase: 'Running' }),
      [true, false, undefined],
    ],
    [
      'finished driver without kyuubi-unique-tag → not selected',
      driver('p', { finishedMs: T, selected: false }),
      [false, true, T + RETENTION],
    ],
    [
      'finished executor → not selected',
      driver('e', { finishedMs: T, role: 'executor' }),
      [false, true, T + RETENTION],
    ],
    [
      'phase Running but driver container terminated (sidecar) → not terminal under POD, Kyuubi’s default',
      driver('s', { phase: 'Running', finishedMs: T }),
      [true, false, undefined],
    ],
  ] as const)('%s', (_name, pod, [selected, terminal, deadlineMs]) => {
    expect(judgePod(pod, RETENTION)).toEqual({ selected, terminal, deadlineMs });
  });
  it('phase Running but driver container terminated (sidecar) → terminal under CONTAINER', () => {
    expect(judgePod(driver('s', { phase: 'Running', finishedMs: T }), RETENTION, 'CONTAINER')).toEqual({
      selected: true,
      terminal: true,
      deadlineMs: T + RETENTION,
    });
  });
});

describe('checkDeletes', () => {
  const windows = [{ fromMs: after + 10_000, toMs: after + 20_000 }];
  const cases: [string, DeleteRecord[], InvariantName[]][] = [
    ['one applied DELETE after the deadline → clean', [del(done('a'), after, 200)], []],
    [
      'applied, then 404 outside API-fault windows → repeated',
      [del(done('a'), after, 200), del(done('a'), after + 500, 404)],
      ['repeated-delete'],
    ],
    [
      'two applied DELETEs → repeated, even inside an API-fault window',
      [del(done('a'), after + 11_000, 200), del(done('a'), after + 12_000, 200)],
      ['repeated-delete'],
    ],
    [
      '403, 403, 200 (API fault) → clean: only applied ones count',
      [del(done('a'), after, 403), del(done('a'), after + 200, 403), del(done('a'), after + 600, 200)],
      [],
    ],
    [
      '200 then 404 inside a slow-answer window → clean (the abandoned one was applied)',
      [del(done('a'), after + 11_000, 200), del(done('a'), after + 13_500, 404)],
      [],
    ],
    ['a DELETE 1 ms before the deadline → early', [del(done('a'), T + RETENTION - 1, 200)], ['early-delete']],
    [
      'a refused (409) DELETE before the deadline is early too',
      [del(done('a'), T + RETENTION - 500, 409, { applied: undefined })],
      ['early-delete'],
    ],
    ['exactly at the deadline → clean', [del(done('a'), T + RETENTION, 200)], []],
    [
      '409, 409 (preconditions refused twice: a re-run after a kill), nothing else → clean',
      [
        del(done('a'), after, 409, { applied: undefined }),
        del(done('a'), after + 300, 409, { applied: undefined }),
      ],
      [],
    ],
    [
      '409 then 200, then 404 → repeated (the 200 and the 404 count)',
      [
        del(done('a'), after, 409, { applied: undefined }),
        del(done('a'), after + 300, 200),
        del(done('a'), after + 600, 404),
      ],
      ['repeated-delete'],
    ],
    [
      'applied to a running driver → wrong',
      [del(driver('run', { phase: 'Running' }), after, 200)],
      ['wrong-delete'],
    ],
    [
      'applied to a pod relabelled out of the selector → wrong',
      [del(driver('plain', { finishedMs: T, selected: false }), after, 200)],
      ['wrong-delete'],
    ],
    [
      'applied to an executor → wrong',
      [del(driver('exec', { finishedMs: T, role: 'executor' }), after, 200)],
      ['wrong-delete'],
    ],
    [
      "old pod's DELETE answered 409 by the re-created pod (UID precondition) → clean",
      [
        del(driver('new', { phase: 'Running' }), after, 409, {
          preconditionUid: 'a',
          uid: 'new',
          applied: undefined,
        }),
      ],
      [],
    ],
    ['a UID the harness never created → wrong', [del(done('zzz'), after, 404)], ['wrong-delete']],
    [
      'answered without preconditions.uid → no-precondition',
      [del(done('a'), after, 200, { preconditionUid: undefined })],
      ['no-precondition'],
    ],
    [
      'reset before the body was read (code 0, no precondition known) → clean',
      [del(done('a'), after, 0, { preconditionUid: undefined, applied: undefined })],
      [],
    ],
  ];
  it.each(cases)('%s', (_name, records, want) => {
    const found = checkDeletes(records, {
      retentionMs: RETENTION,
      apiFaultWindows: windows,
      knownUids: known,
    });
    expect(found.map((v) => v.invariant).sort()).toEqual([...want].sort());
  });

  it('200 then 404 outside API-fault windows, the first abandoned by its sender (client timeout) → clean', () => {
    const records = [del(done('a'), after, 200), del(done('a'), after + 2500, 404)];
    const opts = { retentionMs: RETENTION, apiFaultWindows: [], knownUids: known };
    expect(checkDeletes(records, opts).map((v) => v.invariant)).toEqual(['repeated-delete']);
    expect(checkDeletes(records, { ...opts, abandonedUids: new Set(['a']) })).toEqual([]);
    // Two applied DELETEs are repeated whatever the client did.
    const twice = [del(done('a'), after, 200), del(done('a'), after + 2500, 200)];
    expect(checkDeletes(twice, { ...opts, abandonedUids: new Set(['a']) }).map((v) => v.invariant)).toEqual([
      'repeated-delete',
    ]);
  });

  it("judged by the sender's own retention (a fleet whose replicas disagree): a longer one makes a DELETE early, a shorter one does not", () => {
    const opts = { retentionMs: RETENTION, apiFaultWindows: [], knownUids: known };
    // After the fleet's deadline, before the sender's own (9 s): early.
    const longer = checkDeletes([del(done('a'), T + RETENTION + 100, 200)], {
      ...opts,
      retentionOf: () => 9000,
    });
    expect(longer.map((v) => v.invariant)).toEqual(['early-delete']);
    expect(longer[0]?.detail).toMatch(/arrived 5900 ms before the deadline/);
    // Before the fleet's deadline, after the sender's own (1.5 s): fine.
    expect(checkDeletes([del(done('b'), T + 2000, 200)], { ...opts, retentionOf: () => 1500 })).toEqual([]);
    // Sender unknown: the fleet's.
    expect(
      checkDeletes([del(done('b'), T + 2000, 200)], { ...opts, retentionOf: () => undefined }).map(
        (v) => v.invariant,
      ),
    ).toEqual(['early-delete']);
  });

  it('names the sender in the detail', () => {
    const [v] = checkDeletes([del(done('a'), T, 200)], {
      retentionMs: RETENTION,
      apiFaultWindows: [],
      knownUids: known,
      sender: () => 'r2',
    });
    expect(v?.detail).toBe(`DELETE from r2 arrived ${RETENTION} ms before the deadline (code 200)`);
  });
});

describe('checkSent', () => {
  it.each([
    ['a DELETE with a precondition UID → clean', 'u1', 0],
    ['a DELETE whose body had none → violation', '', 1],
    ['a DELETE whose body never arrived whole → not judged', undefined, 0],
  ] as const)('%s', (_name, uid, n) => {
    expect(checkSent([{ replica: 'r0', path: '/p', atMs: 1, uid }])).toHaveLength(n);
  });
});

describe('checkStaleLeaderDeletes', () => {
  const path = '/api/v1/namespaces/nem-b/pods/kyuubi-x-driver';
  // The store (reads answered in 100 ms): r1 leads nem-b in the samples up to 10 000, r2 from 10 500 on,
  // then r1 again once, at 14 000; nem-a always r1.
  const sample = (fromMs: number, namespace: string, leader: string | undefined) => ({
    fromMs,
    toMs: fromMs + 100,
    namespace,
    leader,
  });
  const samples = [9000, 9500, 10_000, 10_500, 11_000, 11_500, 12_000, 12_500, 14_000].flatMap((at) => [
    sample(at, 'nem-b', at <= 10_000 || at === 14_000 ? 'r1' : 'r2'),
    sample(at, 'nem-a', 'r1'),
  ]);
  it.each([
    ['the old leader deletes while the store still shows it → clean', 'r1', path, 10_050, 0],
    [
      'the old leader deletes between the last sample of it and the first of the new one → not judged',
      'r1',
      path,
      10_300,
      0,
    ],
    ['the old leader deletes within a second of the new one showing → clean', 'r1', path, 11_500, 0],
    ['the old leader deletes a second and more after the new one shows → violation', 'r1', path, 11_700, 1],
    ['after the last sample of the new leader → not judged', 'r1', path, 13_000, 0],
    ['the new leader deletes → clean', 'r2', path, 12_400, 0],
    ['another target the replica leads → clean', 'r1', '/api/v1/namespaces/nem-a/pods/p', 12_400, 0],
    ['before any sample → not judged', 'r2', path, 8000, 0],
  ] as const)('%s', (_name, replica, p, atMs, n) => {
    const v = checkStaleLeaderDeletes(samples, [{ replica, path: p, atMs, uid: 'u1' }]);
    expect(v).toHaveLength(n);
    if (n > 0) expect(v[0]?.invariant).toBe('stale-leader-delete');
  });

  it('two sampling windows that both show r2: a DELETE of r1 between them is not judged (r2 may have left and come back)', () => {
    const windows = [
      ...[9000, 9500, 10_000].map((at) => ({ ...sample(at, 'nem-b', 'r2'), window: 1 })),
      ...[50_000, 50_500].map((at) => ({ ...sample(at, 'nem-b', 'r2'), window: 2 })),
    ];
    expect(checkStaleLeaderDeletes(windows, [{ replica: 'r1', path, atMs: 30_000, uid: 'u1' }])).toEqual([]);
    // Within one window it is.
    expect(checkStaleLeaderDeletes(windows, [{ replica: 'r1', path, atMs: 50_450, uid: 'u1' }])).toHaveLength(
      0,
    );
    expect(
      checkStaleLeaderDeletes(
        [...[50_000, 50_500, 51_000, 52_000].map((at) => ({ ...sample(at, 'nem-b', 'r2'), window: 2 }))],
        [{ replica: 'r1', path, atMs: 51_500, uid: 'u1' }],
      ),
    ).toHaveLength(1);
  });
});

describe('checkTerminatingDeletes', () => {
  const terminating = driver('a', { finishedMs: T, deleting: true });
  const personAt = new Map([['a', T + 1500]]);
  const cases: [string, DeleteRecord[], ReadonlyMap<string, number>, number][] = [
    [
      'accepted DELETE of a pod a person deleted before its deadline → violation',
      [del(terminating, after, 200)],
      personAt,
      1,
    ],
    [
      'refused by the resourceVersion precondition (409) → clean',
      [del(terminating, after, 409)],
      personAt,
      0,
    ],
    ['met a fault (503) → clean', [del(terminating, after, 503)], personAt, 0],
    [
      'the person deleted it after its deadline (a race with the re-check) → clean',
      [del(terminating, after, 200)],
      new Map([['a', T + RETENTION + 1]]),
      0,
    ],
    [
      'not deleted by a person (our own earlier DELETE: a repeated-delete) → clean here',
      [del(terminating, after, 200)],
      new Map(),
      0,
    ],
    ['the pod found was not terminating → clean', [del(done('a'), after, 200)], personAt, 0],
  ];
  it.each(cases)('%s', (_name, records, deletedAt, n) => {
    const v = checkTerminatingDeletes(records, deletedAt, RETENTION);
    expect(v).toHaveLength(n);
    for (const x of v) expect(x.invariant).toBe('terminating-delete');
  });
});

describe('findLeaks', () => {
  const opts = { retentionMs: RETENTION, graceMs: 60_000 };
  it.each([
    ['finished, deadline + settle passed → leak', done('a'), T + RETENTION + 60_001, 1],
    ['finished, deadline + settle not yet passed → no leak', done('a'), T + RETENTION + 60_000, 0],
    [
      'being deleted (deletionTimestamp) → no leak',
      driver('d', { finishedMs: T, deleting: true }),
      T + 10 ** 6,
      0,
    ],
    ['running → no leak', driver('run', { phase: 'Running' }), T + 10 ** 6, 0],
    ['not selected → no leak', driver('p', { finishedMs: T, selected: false }), T + 10 ** 6, 0],
  ] as const)('%s', (_name, pod, nowMs, n) => {
    expect(findLeaks([pod], { ...opts, nowMs })).toHaveLength(n);
  });
});

describe('overdue metric', () => {
  const s = (atS: number, actual: number, reported: Record<string, number> = {}): OverdueSample => ({
    atMs: atS * 1000,
    target: 'nem:a',
    actual,
    reported,
  });
  it('windows are the runs of samples with pods in fact overdue', () => {
    const w = overdueWindows([s(0, 0), s(1, 2), s(2, 3), s(3, 0), s(4, 1), s(5, 1)]);
    expect(w.get('nem:a')).toEqual([
      { fromMs: 1000, toMs: 2000 },
      { fromMs: 4000, toMs: 5000 },
    ]);
  });

  const opts = { minWindowMs: 10_000, lagMs: 5000 };
  const series = (reportAt: number | undefined) =>
    Array.from({ length: 30 }, (_, i) =>
      s(i, i >= 5 && i < 20 ? 2 : 0, i === reportAt ? { r0: 2, r1: 0 } : { r0: 0, r1: 0 }),
    );
  it.each([
    ['15 s overdue, one replica reported it → clean', series(12), 0],
    ['15 s overdue, reported within the lag after the window → clean', series(23), 0],
    ['15 s overdue, reported only after the lag → missed', series(26), 1],
    ['15 s overdue, never reported → missed', series(undefined), 1],
    [
      '5 s overdue (shorter than the minimum window), never reported → not judged',
      Array.from({ length: 30 }, (_, i) => s(i, i >= 5 && i < 10 ? 1 : 0)),
      0,
    ],
  ] as const)('%s', (_name, samples, n) => {
    expect(checkOverdueMetric(samples, opts)).toHaveLength(n);
  });
});

describe('parseGauge', () => {
  const text = [
    '# HELP sdc_overdue_pods Overdue driver pods.',
    '# TYPE sdc_overdue_pods gauge',
    'sdc_overdue_pods{context="nem",namespace="nem-a"} 3',
    'sdc_overdue_pods{namespace="nem-b",context="nem"} 0',
    'sdc_overdue_pods{context="other",namespace="nem-a"} 9',
    'sdc_overdue_pods_total{context="nem",namespace="nem-c"} 5',
    'sdc_overdue_oldest_age_seconds{context="nem",namespace="nem-a"} 42.5',
  ].join('\n');
  it.each([
    [
      'the gauge of one context, by namespace, whatever the label order',
      'sdc_overdue_pods',
      'nem',
      { 'nem-a': 3, 'nem-b': 0 },
    ],
    ['another context', 'sdc_overdue_pods', 'other', { 'nem-a': 9 }],
    ['another metric', 'sdc_overdue_oldest_age_seconds', 'nem', { 'nem-a': 42.5 }],
    ['an absent metric → nothing', 'sdc_nothing', 'nem', {}],
  ] as const)('%s', (_name, metric, context, want) => {
    expect(parseGauge(text, metric, context)).toEqual(want);
  });
});
