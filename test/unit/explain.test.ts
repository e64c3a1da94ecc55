import { describe, expect, it } from 'vitest';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import { type ExplainFacts, explain, type JobFacts, type VerdictKind } from '../../src/status/explain.ts';
import { parsePodRef } from '../../src/status/pod-ref.ts';

const SELECTOR = 'spark-role=driver,kyuubi-unique-tag';
const NOW = Date.parse('2026-12-01T12:00:00Z');
const MIN = 60_000;
const UID = '0b5e8c1e-2f6a-4c1e-9d3b-6a7f1e2d3c4b';
const rules = {
  selector: parseLabelSelector(SELECTOR),
  selectorText: SELECTOR,
  policy: 'COMPLETED' as const,
  appState: KYUUBI_STATE_DEFAULTS,
  retentionMs: 10 * MIN,
  nowMs: NOW,
};

/** A driver pod that finished `agoMs` before NOW (Succeeded; `exitCode` ≠ 0 → Failed). */
function pod(
  agoMs: number | undefined,
  o: { exitCode?: number; tag?: boolean; deleting?: boolean; phase?: string } = {},
): DriverPod {
  return {
    metadata: {
      name: 'etl-driver',
      namespace: 'spark',
      uid: UID,
      labels:
        o.tag === false ? { 'spark-role': 'driver' } : { 'spark-role': 'driver', 'kyuubi-unique-tag': 't' },
      ...(o.deleting ? { deletionTimestamp: new Date(NOW - MIN).toISOString() } : {}),
    },
    status: {
      phase: o.phase ?? (o.exitCode ? 'Failed' : 'Succeeded'),
      containerStatuses:
        agoMs === undefined
          ? []
          : [
              {
                name: 'spark-kubernetes-driver',
                state: {
                  terminated: { exitCode: o.exitCode ?? 0, finishedAt: new Date(NOW - agoMs).toISOString() },
                },
              },
            ],
    },
  };
}

function job(state: string, o: Partial<JobFacts> = {}): JobFacts {
  return {
    state,
    pod: 'etl-driver',
    deadlineMs: NOW + 5 * MIN,
    attemptsMade: 0,
    outcome: undefined,
    failedReason: undefined,
    finishedOnMs: undefined,
    processedBy: undefined,
    nextRunMs: state === 'delayed' ? NOW + 5 * MIN : undefined,
    ...o,
  };
}

function facts(o: Partial<ExplainFacts>): ExplainFacts {
  return {
    target: { cluster: 'prod-1', context: 'prod', namespace: 'spark' },
    name: 'etl-driver',
    uid: UID,
    pod: { read: 'present', object: pod(5 * MIN) },
    job: undefined,
    tombstoneTtlMs: undefined,
    leader: 'replica-2',
    leaderFrom: 'etcd',
    ...o,
  };
}

const at = (ms: number) => new Date(ms).toISOString();

describe('explain: the verdict', () => {
  const cases: [string, ExplainFacts, VerdictKind, string][] = [
    [
      'absent, job completed accepted → deleted at its finish time by its replica',
      facts({
        pod: { read: 'absent' },
        job: job('completed', {
          outcome: { outcome: 'accepted' },
          finishedOnMs: NOW - 2 * MIN,
          processedBy: 'replica-1',
        }),
      }),
      'deleted',
      `deleted at ${at(NOW - 2 * MIN)} (2 min ago) by replica-1`,
    ],
    [
      'finished 5 min ago, retention 10 min, job delayed, leader → will be deleted at the deadline by the leader',
      facts({ job: job('delayed') }),
      'pending',
      `will be deleted at ${at(NOW + 5 * MIN)} (in 5 min) by replica-2`,
    ],
    [
      'job waiting, deadline passed 2 min ago, leader → due, the leader takes it (or see status)',
      facts({
        pod: { read: 'present', object: pod(12 * MIN) },
        job: job('waiting', { deadlineMs: NOW - 2 * MIN }),
      }),
      'pending',
      `due since ${at(NOW - 2 * MIN)} (2 min ago): replica-2 deletes it when its worker takes the job (if this lasts, see status and replica-2's log)`,
    ],
    [
      'failed driver, policy COMPLETED → kept',
      facts({ pod: { read: 'present', object: pod(5 * MIN, { exitCode: 1 }) } }),
      'kept',
      'kept: policy COMPLETED keeps failed drivers (state FAILED)',
    ],
    [
      'no kyuubi-unique-tag → not a driver pod we select',
      facts({ pod: { read: 'present', object: pod(5 * MIN, { tag: false }) } }),
      'not-matching',
      `not a driver pod: labels do not match ${SELECTOR}`,
    ],
    [
      'deletionTimestamp set, no job of ours → being deleted by someone else',
      facts({
        pod: { read: 'present', object: pod(5 * MIN, { deleting: true }) },
        tombstoneTtlMs: 3_600_000,
      }),
      'being-deleted',
      `being deleted by someone else since ${at(NOW - MIN)}: the cleaner leaves it to them (grace period or finalizers keep it)`,
    ],
    [
      'deletionTimestamp set by our accepted DELETE → deleted, the API server finishing it',
      facts({
        pod: { read: 'present', object: pod(20 * MIN, { deleting: true }) },
        job: job('completed', {
          outcome: { outcome: 'accepted' },
          finishedOnMs: NOW - MIN,
          processedBy: 'replica-2',
        }),
      }),
      'deleted',
      `deleted at ${at(NOW - MIN)} (60 s ago) by replica-2; the API server is finishing it (grace period or finalizers)`,
    ],
    [
      'job delayed, no leader, deadline in 5 min → stuck: no leader',
      facts({ job: job('delayed'), leader: undefined }),
      'stuck',
      `stuck: no leader for this target (no replica campaigns in etcd); its deadline is ${at(NOW + 5 * MIN)} (in 5 min)`,
    ],
    [
      'job waiting, no leader, deadline passed 10 min ago → stuck, the deadline passed',
      facts({
        pod: { read: 'present', object: pod(20 * MIN) },
        job: job('waiting', { deadlineMs: NOW - 10 * MIN }),
        leader: undefined,
      }),
      'stuck',
      `stuck: no leader for this target (no replica campaigns in etcd); its deadline passed ${at(NOW - 10 * MIN)} (10 min ago)`,
    ],
    [
      'without etcd, no worker → stuck: no worker consumes',
      facts({ job: job('delayed'), leader: undefined, leaderFrom: 'redis-workers' }),
      'stuck',
      `stuck: no leader for this target (no worker consumes its queue); its deadline is ${at(NOW + 5 * MIN)} (in 5 min)`,
    ],
    [
      'job failed 15 times → stuck, with the Status reason',
      facts({
        job: job('failed', { attemptsMade: 15, failedReason: 'delete 403 Forbidden: pods is forbidden' }),
      }),
      'stuck',
      "stuck: the cleanup failed 15 times (delete 403 Forbidden: pods is forbidden); the leader's periodic reconcile retries it",
    ],
    [
      'still running → kept until it terminates',
      facts({ pod: { read: 'present', object: pod(undefined, { phase: 'Running' }) } }),
      'kept',
      'kept: not finished (state RUNNING); its cleanup starts when the driver terminates',
    ],
    [
      'eligible, no job, no tombstone, a leader → not enqueued',
      facts({}),
      'stuck',
      'not enqueued: no replica has a job for it (is a replica watching prod:spark?)',
    ],
    [
      'job completed skipped (relabelled when it ran) → kept, with the reason',
      facts({
        job: job('completed', { outcome: { outcome: 'skipped', reason: 'not selected' }, finishedOnMs: NOW }),
      }),
      'kept',
      `kept: its job ran at ${at(NOW)} (now) and ended skipped (not selected)`,
    ],
    [
      'absent, tombstoned, no job → gone, deleted by someone else',
      facts({ pod: { read: 'absent' }, tombstoneTtlMs: 1000 }),
      'gone',
      'gone: deleted by someone else (tombstoned)',
    ],
    [
      'not read (offline), job delayed → judged by the job',
      facts({ pod: { read: 'unread', why: 'not asked (--offline)' }, job: job('delayed') }),
      'pending',
      `will be deleted at ${at(NOW + 5 * MIN)} (in 5 min) by replica-2`,
    ],
  ];
  for (const [name, f, kind, verdict] of cases)
    it(name, () => expect(explain(f, rules)).toMatchObject({ kind, verdict }));
});

describe('parsePodRef', () => {
  const cases: [string, string, unknown][] = [
    [
      'context:namespace/pod',
      'prod:spark/etl-driver',
      { target: { context: 'prod', namespace: 'spark' }, name: 'etl-driver' },
    ],
    [
      'an EKS ARN context (colons and a slash) → namespace after the last colon, pod after the last slash',
      'arn:aws:eks:eu-west-1:1:cluster/prod:spark/etl',
      { target: { context: 'arn:aws:eks:eu-west-1:1:cluster/prod', namespace: 'spark' }, name: 'etl' },
    ],
    [
      'namespace/pod → the current context',
      'spark/etl',
      { target: { context: undefined, namespace: 'spark' }, name: 'etl' },
    ],
    ['a UID (upper case) → lower case', UID.toUpperCase(), { uid: UID }],
  ];
  for (const [name, text, want] of cases) it(name, () => expect(parsePodRef(text)).toEqual(want));
  const bad: [string, string, RegExp][] = [
    ['a bare name', 'etl-driver', /expected context:namespace\/pod/],
    ['an upper-case pod name', 'prod:spark/ETL', /not a pod name/],
    ['an empty context', ':spark/etl', /context before ":" is empty/],
  ];
  for (const [name, text, want] of bad)
    it(`${name} → a message`, () => expect(parsePodRef(text)).toMatch(want));
});
