/**
 * The pure parts of `check`: the clock skew one answer proves (src/check/clock-skew.ts), the server version
 * and transport failures (src/check/context-checks.ts), the canary pods' labels and object
 * (src/check/canary-pod.ts), and the ACL probe's command list against BullMQ's own scripts
 * (src/check/redis-acl.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CANARY_LABEL, CanaryLabelsError, canaryLabels, canaryPod } from '../../src/check/canary-pod.ts';
import { type CanaryObservation, type CanaryRecord, judgeCanary } from '../../src/check/canary-verdict.ts';
import { provenSkewMs } from '../../src/check/clock-skew.ts';
import { parseServerVersion, transportFailure } from '../../src/check/context-checks.ts';
import { SCRIPT_COMMANDS } from '../../src/check/redis-acl.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS, podState } from '../../src/kube/application-state.ts';
import { trimPod } from '../../src/kube/driver-pod.ts';

const T = Date.parse('2026-12-01T10:00:00Z');
const date = (ms: number) => new Date(ms).toUTCString();

describe('provenSkewMs', () => {
  const cases: [
    string,
    { dateHeader: string | undefined; sentAtMs: number; receivedAtMs: number },
    number | undefined,
  ][] = [
    [
      'same second, answered in 50 ms → 0',
      { dateHeader: date(T), sentAtMs: T + 100, receivedAtMs: T + 150 },
      0,
    ],
    [
      'Date 0.9 s before our send: within its 1 s resolution → 0',
      { dateHeader: date(T), sentAtMs: T + 900, receivedAtMs: T + 950 },
      0,
    ],
    [
      'server 30 s ahead → +29.9 s proven',
      { dateHeader: date(T + 30_000), sentAtMs: T, receivedAtMs: T + 100 },
      29_900,
    ],
    [
      'server 30 s behind → −29 s proven (its second may end 1 s later)',
      { dateHeader: date(T - 30_000), sentAtMs: T, receivedAtMs: T + 100 },
      -29_000,
    ],
    [
      'a slow answer widens what is possible: Date within [send, receive] → 0',
      { dateHeader: date(T + 5000), sentAtMs: T, receivedAtMs: T + 6000 },
      0,
    ],
    ['no Date header → unknown', { dateHeader: undefined, sentAtMs: T, receivedAtMs: T }, undefined],
    ['an unreadable Date → unknown', { dateHeader: 'yesterday', sentAtMs: T, receivedAtMs: T }, undefined],
  ];
  for (const [name, sample, want] of cases) it(name, () => expect(provenSkewMs(sample)).toBe(want));
});

describe('parseServerVersion', () => {
  it('reads major and minor, a managed cluster’s "27+" included; undefined without them', () => {
    expect(parseServerVersion({ major: '1', minor: '32', gitVersion: 'v1.32.0' })).toEqual({
      major: 1,
      minor: 32,
      git: 'v1.32.0',
    });
    expect(parseServerVersion({ major: '1', minor: '27+', gitVersion: 'v1.27.16-eks-a737599' })?.minor).toBe(
      27,
    );
    expect(parseServerVersion({ kind: 'Status' })).toBeUndefined();
    expect(parseServerVersion('<html>')).toBeUndefined();
  });
});

describe('transportFailure', () => {
  const withCause = (code: string, message: string) =>
    Object.assign(new Error('fetch failed'), { cause: Object.assign(new Error(message), { code }) });
  const cases: [string, unknown, string][] = [
    [
      'connection refused → unreachable',
      withCause('ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.1:6443'),
      'unreachable',
    ],
    [
      'our timeout → unreachable',
      new DOMException('The operation was aborted due to timeout', 'TimeoutError'),
      'unreachable',
    ],
    [
      'an unknown CA → tls',
      withCause('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'),
      'tls',
    ],
    [
      'a self-signed certificate → tls',
      withCause('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'),
      'tls',
    ],
    [
      'a failing exec credential plugin → credentials',
      new Error('exec credential plugin "aws" exited with 1: no profile'),
      'credentials',
    ],
  ];
  for (const [name, err, kind] of cases) it(name, () => expect(transportFailure(err).kind).toBe(kind));
});

describe('canaryLabels', () => {
  it('the default selector: spark-role=driver, a unique kyuubi-unique-tag, the canary label; the selector matches', () => {
    const selector = parseLabelSelector('spark-role=driver,kyuubi-unique-tag');
    const labels = canaryLabels(selector, 'r1', 'sdc-canary-r1-1');
    expect(labels).toEqual({
      'spark-role': 'driver',
      'kyuubi-unique-tag': 'sdc-canary-r1-1',
      'spark-app-name': 'sdc-canary',
      [CANARY_LABEL]: 'r1',
    });
    expect(selector.matches(labels)).toBe(true);
  });

  it('a selector with a set and an exclusion: the first value, the excluded label left out', () => {
    const selector = parseLabelSelector('team in (etl,ml),!kyuubi-unique-tag,spark-role!=executor');
    const labels = canaryLabels(selector, 'r2', 't');
    expect(labels.team).toBe('etl');
    expect(labels).not.toHaveProperty('kyuubi-unique-tag');
    expect(labels['spark-role']).toBe('driver');
    expect(selector.matches(labels)).toBe(true);
  });

  it('a selector no pod can match → CanaryLabelsError', () => {
    expect(() => canaryLabels(parseLabelSelector('a=x,!a'), 'r', 't')).toThrow(CanaryLabelsError);
  });
});

describe('canaryPod', () => {
  it('a driver container the cleaner reads the end from, never restarted, restricted, no token', () => {
    const pod = canaryPod({
      namespace: 'ns',
      name: 'sdc-canary-x-1',
      labels: { a: 'b' },
      image: 'img:1',
    }) as {
      spec: {
        restartPolicy: string;
        automountServiceAccountToken: boolean;
        containers: {
          name: string;
          image: string;
          command: string[];
          securityContext: Record<string, unknown>;
        }[];
        securityContext: Record<string, unknown>;
      };
    };
    expect(pod.spec.restartPolicy).toBe('Never');
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(pod.spec.containers).toEqual([
      expect.objectContaining({ name: 'spark-kubernetes-driver', image: 'img:1', command: ['true'] }),
    ]);
    expect(pod.spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.spec.containers[0]?.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    // As the kubelet ends it, the cleaner reads it as a finished driver.
    const ended = {
      ...pod,
      status: {
        phase: 'Succeeded',
        containerStatuses: [
          {
            name: 'spark-kubernetes-driver',
            state: { terminated: { exitCode: 0, reason: 'Completed', finishedAt: '2026-12-01T10:00:00Z' } },
          },
        ],
      },
    };
    expect(podState(trimPod(ended), KYUUBI_STATE_DEFAULTS)).toMatchObject({
      state: 'FINISHED',
      terminal: true,
      finishedAtMs: T,
    });
  });
});

describe('the ACL probe covers BullMQ', () => {
  it("every command BullMQ's Lua scripts call is tried (a new BullMQ calling another fails here)", () => {
    const dir = fileURLToPath(new URL('../../node_modules/bullmq/dist/esm/commands/', import.meta.url));
    const called = new Set<string>();
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.lua')))
      for (const m of readFileSync(`${dir}${f}`, 'utf8').matchAll(
        /(?:rcall|redis\.call)\(\s*["']([A-Za-z]+)["']/g,
      ))
        called.add((m[1] as string).toUpperCase());
    expect(called.size).toBeGreaterThan(30);
    const tried = new Set([...Object.keys(SCRIPT_COMMANDS), 'XREAD', 'TIME']);
    expect([...called].filter((c) => !tried.has(c)).sort()).toEqual([]);
  });
});

describe('judgeCanary', () => {
  const finished = T;
  const rules = { retentionMs: 300_000, overdueGraceMs: 50_000, dryRun: false, target: 'prod:spark-a' };
  const obs = (extra: Partial<CanaryObservation>): CanaryObservation => ({
    name: 'sdc-canary-x-1',
    uid: 'u1',
    finishedAtMs: finished,
    gone: false,
    ...extra,
  });
  const job = (outcome: string | undefined, finishedOnMs?: number): CanaryRecord => ({
    job: {
      state: 'completed',
      pod: 'sdc-canary-x-1',
      deadlineMs: finished + 300_000,
      attemptsMade: 1,
      outcome: outcome ? { outcome } : undefined,
      failedReason: undefined,
      finishedOnMs,
      processedBy: 'replica-2',
      nextRunMs: undefined,
    },
    tombstoned: false,
    leader: 'replica-2',
  });
  const cases: [string, CanaryObservation, CanaryRecord, typeof rules, string, RegExp][] = [
    [
      'deleted 1 s after its deadline, accepted → pass',
      obs({ gone: true, deletionMs: finished + 301_000 }),
      job('accepted'),
      rules,
      'pass',
      /deleted once by replica-2 \(outcome accepted\), 1 s after its deadline$/,
    ],
    [
      'deleted in the deadline’s own second → pass (1 s timestamps)',
      obs({ gone: true, deletionMs: finished + 300_000 }),
      job('accepted'),
      rules,
      'pass',
      /0 s after its deadline$/,
    ],
    [
      'deleted 1 s before its deadline → fail BEFORE',
      obs({ gone: true, deletionMs: finished + 299_000 }),
      job('accepted'),
      rules,
      'fail',
      /deleted 1 s BEFORE its deadline \(finishedAt \+ 300 s\) by replica-2$/,
    ],
    [
      'deleted on time by someone else (already-absent) → fail',
      obs({ gone: true, deletionMs: finished + 300_000 }),
      job('already-absent'),
      rules,
      'fail',
      /deleted, but not by the fleet \(its job's outcome: already-absent\)$/,
    ],
    [
      'deleted without a job, tombstoned → fail naming the tombstone',
      obs({ gone: true, deletionMs: finished + 301_000 }),
      { job: undefined, tombstoned: true, leader: 'r' },
      rules,
      'fail',
      /outcome: cancelled, tombstoned/,
    ],
    [
      'deleted 60 s late (grace 50 s) → fail overdue',
      obs({ gone: true, deletionMs: finished + 360_000 }),
      job('accepted'),
      rules,
      'fail',
      /but 60 s after its deadline \(overdue after 50 s\)$/,
    ],
    [
      'not deleted, no leader → fail naming the target',
      obs({}),
      { job: undefined, tombstoned: false, leader: undefined },
      rules,
      'fail',
      /not deleted 50 s after its deadline: no replica leads prod:spark-a/,
    ],
    [
      'not deleted, its job delayed → fail naming the state',
      obs({}),
      {
        ...job(undefined),
        job: { ...(job(undefined).job as NonNullable<CanaryRecord['job']>), state: 'delayed' },
      },
      rules,
      'fail',
      /its job is delayed$/,
    ],
    [
      'dry run, would-delete 0.5 s after the deadline → pass',
      obs({}),
      job('would-delete', finished + 300_500),
      { ...rules, dryRun: true },
      'pass',
      /would be deleted once by replica-2 \(dry run: outcome would-delete\), 0\.5 s after its deadline$/,
    ],
    [
      'dry run, judged due 5 s early → fail BEFORE',
      obs({}),
      job('would-delete', finished + 295_000),
      { ...rules, dryRun: true },
      'fail',
      /would be deleted 5 s BEFORE its deadline/,
    ],
    [
      'dry run, gone: someone else deleted it → fail',
      obs({ gone: true, deletionMs: finished + 1000 }),
      job(undefined),
      { ...rules, dryRun: true },
      'fail',
      /deleted by someone else while the fleet is in dry run$/,
    ],
  ];
  for (const [name, o, rec, ru, status, message] of cases)
    it(name, () => {
      const v = judgeCanary('canary prod:spark-a', o, rec, ru);
      expect(v.status).toBe(status);
      expect(v.message).toMatch(message);
      if (status === 'fail') expect(v.fix).toBeTruthy();
    });
});
