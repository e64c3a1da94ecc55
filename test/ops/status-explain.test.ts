/**
 * `status` and `explain` against real processes: replica processes, Redis, etcd and the sandbox API server,
 * and the two commands run as the operator runs them (`src/cli.ts status|explain`, the replicas' SDC_*
 * configuration). One case per answer the issue asks for: accepted, pending, kept by policy, not matching,
 * being deleted by someone else, leaderless target (with an overdue job); `/api/v1/explain` behind the
 * same auth as the rest of `/api/`; the state API showing a running driver being deleted as such; the
 * single-server mode (no etcd); the bad-input exit codes; the leadership balance `status` reads from etcd
 * (the real replica's membership key, and hand-written keys for a replica over the cap).
 */
import { execFile } from 'node:child_process';
import type { V1Pod } from '@kubernetes/client-node';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_PATH, type ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { assignTargets, targetSetValue } from '../../src/leadership/assignment.ts';
import { createLogger } from '../../src/log.ts';
import { createCleanupQueue } from '../../src/queue/cleanup-queue.ts';
import { electionPrefix, membersPrefix, targetKey } from '../../src/queue/job-identity.ts';
import {
  createDrivers,
  firstLeader,
  httpUrl,
  nameOf,
  remember,
  replicaEnv,
  SELECTOR,
  stopAll,
  targetIn,
  uidOf,
  useFailureCluster,
  waitGone,
} from '../failure/helpers.ts';
import { serviceEnv } from '../helpers/cluster.ts';
import { judgePod } from '../helpers/invariants.ts';
import { waitFor } from '../helpers/wait.ts';

const cluster = useFailureCluster({ context: 'why' });
const NS = 'why-here';
const ORPHAN = 'why-orphan';
const PREFIX = 'why';
const AUTH = { user: 'ops', password: 's3cret' };
const MIN = 60_000;

/** The replicas' configuration: retention 10 min, policy COMPLETED (keeps failed drivers), our selector. */
function env(namespaces: string[]): Record<string, string> {
  return {
    ...serviceEnv(cluster().server.kubeconfigPath, cluster().redis, cluster().etcd),
    ...replicaEnv(cluster(), NS, PREFIX),
    SDC_TARGETS: namespaces.map((ns) => `${cluster().context}:${ns}`).join(','),
    SDC_RETENTION: '10m',
    SDC_POLICY: 'COMPLETED',
    SDC_OVERDUE_GRACE: '1s',
    SDC_DASHBOARD_USER: AUTH.user,
    SDC_DASHBOARD_PASSWORD: AUTH.password,
  };
}

interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `src/cli.ts <args>` with the replicas' configuration, as an operator would beside them. */
function cli(args: string[], extra: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_PATH, ...args],
      { env: { ...process.env, SDC_LOG_LEVEL: 'silent', ...extra }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const status = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ status, stdout, stderr });
      },
    );
  });
}

interface StatusJson {
  healthy: boolean;
  targets: {
    target: string;
    leader: string | null;
    leaderFrom: string;
    consumingSince: string | null;
    jobs: Record<string, number>;
    nextDeadline: string | null;
    overdue: number;
    lastAccepted: { pod: string; uid: string; replica: string; at: string } | null;
    problems: string[];
    assigned?: string | null;
  }[];
  balance?: {
    rule: string;
    members: string[];
    targets: number;
    cap: number;
    share: Record<string, { assigned: number; leading: number }>;
    otherMembers: string[];
  };
}

interface ExplainJson {
  kind: string;
  cluster: string;
  verdict: string;
  uid: string | null;
  parts: Record<string, string>;
}

async function explainOf(ref: string, namespaces = [NS]): Promise<ExplainJson> {
  const r = await cli(['explain', ref, '--json'], env(namespaces));
  expect(r.status, r.stderr).toBe(0);
  const e = JSON.parse(r.stdout) as ExplainJson;
  // Every explanation names the target's cluster, as the replicas name it.
  expect(e.cluster).toBe(cluster().clusterName);
  return e;
}

/** A finished driver (Succeeded unless said) created `agoMs` ago by the sandbox clock, optionally without the tag. */
function driver(
  ns: string,
  app: string,
  agoMs: number,
  o: { phase?: 'Succeeded' | 'Failed' | 'Running'; tag?: boolean; finalizer?: boolean } = {},
): V1Pod {
  const pod = sparkDriverPod({
    namespace: ns,
    appName: app,
    phase: o.phase ?? 'Succeeded',
    nowMs: cluster().server.clock.now() - agoMs,
  });
  if (o.tag === false) delete pod.metadata?.labels?.['kyuubi-unique-tag'];
  if (o.finalizer && pod.metadata) pod.metadata.finalizers = ['example.com/keep'];
  return remember(cluster().server.pods.create(pod));
}

describe('status and explain: why is this pod still here?', () => {
  let leader: ReplicaProcess;
  let orphanReplica: ReplicaProcess;
  const pods: Record<string, V1Pod> = {};

  beforeAll(async () => {
    leader = cluster().startReplica('why-1', env([NS]));
    orphanReplica = cluster().startReplica('why-orphan-1', env([ORPHAN]));
    await firstLeader([leader], NS);
    await firstLeader([orphanReplica], ORPHAN);
    pods.accepted = createDrivers(cluster().server, NS, 1, 'done', 20 * MIN)[0] as V1Pod;
    pods.pending = driver(NS, 'pending', 0);
    pods.policy = driver(NS, 'failed', 20 * MIN, { phase: 'Failed' });
    pods.unmatched = driver(NS, 'manual', 20 * MIN, { tag: false });
    pods.deleting = driver(NS, 'held', 0, { finalizer: true });
    pods.orphan = driver(ORPHAN, 'orphan', 0);
    await waitGone(cluster().server, [pods.accepted as V1Pod], 'the old driver deleted');
    for (const [p, r] of [
      [pods.pending, leader],
      [pods.deleting, leader],
      [pods.orphan, orphanReplica],
    ] as const)
      await r.waitForLine((l) => l.msg === 'enqueue' && l.uid === uidOf(p) && l.result === 'added', 30_000);
    // Someone else deletes the finalized pod (kubectl delete): it stays, with a deletionTimestamp.
    cluster().server.pods.delete(NS, nameOf(pods.deleting));
    await leader.waitForLine(
      (l) => l.uid === uidOf(pods.deleting) && l.msg === 'cleanup cancelled: tombstoned',
      30_000,
    );
    // The orphan target loses its only replica: no leader, its job stays delayed.
    await stopAll([orphanReplica]);
    // A job whose deadline passed long ago, as a replica enqueued it before it went: due at once (waiting), overdue.
    const target = targetIn(cluster(), ORPHAN);
    pods.overdue = driver(ORPHAN, 'overdue', 30 * MIN);
    const connection = new Redis(cluster().redis.url, { maxRetriesPerRequest: null });
    const q = createCleanupQueue({
      target,
      connection,
      prefix: PREFIX,
      tombstoneTtlMs: 3_600_000,
      log: createLogger({ level: 'silent' }),
      now: () => Date.now(),
    });
    await q.enqueue({
      context: target.context,
      namespace: ORPHAN,
      pod: nameOf(pods.overdue),
      uid: uidOf(pods.overdue),
      deadlineMs: Date.now() - 20 * MIN,
    });
    await q.close();
    connection.disconnect();
  }, 120_000);

  afterAll(async () => {
    await stopAll([leader]);
  });

  it('status: a healthy target → exit 0, its leader and since when, one delayed job, the next deadline, the last accepted DELETE', async () => {
    const r = await cli(['status', '--json'], env([NS]));
    expect(r.status, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as StatusJson;
    expect(s.healthy).toBe(true);
    const row = s.targets[0];
    expect(row).toMatchObject({
      target: `${cluster().context}:${NS}`,
      cluster: cluster().clusterName,
      refused: null,
      leader: 'why-1',
      overdue: 0,
      problems: [],
    });
    expect(row?.consumingSince).not.toBeNull();
    // Only the pending pod has a job: kept by policy, not matching and being deleted have none.
    expect(row?.jobs).toMatchObject({ delayed: 1, waiting: 0, active: 0, failed: 0 });
    expect(row?.nextDeadline).not.toBeNull();
    expect(row?.lastAccepted).toMatchObject({
      pod: nameOf(pods.accepted),
      uid: uidOf(pods.accepted),
      replica: 'why-1',
    });
    // The balance, from why-1's membership key (its value: the hash of the same targets) and the election.
    expect(row?.assigned).toBe('why-1');
    expect(s.balance).toMatchObject({
      members: ['why-1'],
      targets: 1,
      cap: 1,
      share: { 'why-1': { assigned: 1, leading: 1 } },
    });
    const text = await cli(['status'], env([NS]));
    expect(text.status).toBe(0);
    expect(text.stdout).toContain('leader:        why-1');
    expect(text.stdout).toContain(
      'Leadership balance (the live members serving these targets)\n  members 1, targets 1, cap 1\n  why-1  leads 1  assigned 1\n',
    );
  }, 60_000);

  it('status: a leaderless target with an overdue job → exit 1, both problems named', async () => {
    const r = await cli(['status', '--json'], env([NS, ORPHAN]));
    expect(r.status, r.stdout).toBe(1);
    const s = JSON.parse(r.stdout) as StatusJson;
    expect(s.healthy).toBe(false);
    const orphan = s.targets.find((t) => t.target.endsWith(`:${ORPHAN}`));
    expect(orphan).toMatchObject({
      leader: null,
      overdue: 1,
      jobs: expect.objectContaining({ delayed: 1, waiting: 1 }),
    });
    expect(orphan?.problems).toHaveLength(2);
    expect(orphan?.problems[0]).toMatch(/no leader/);
    expect(s.targets.find((t) => t.target.endsWith(`:${NS}`))?.problems).toEqual([]);
    // No replica serves these two targets: no member to balance over; why-1 leads NS as a member of another set.
    expect(s.balance).toMatchObject({ members: [], cap: 0, share: { 'why-1': { assigned: 0, leading: 1 } } });
    expect(s.balance?.otherMembers).toContain('why-1');
    const text = await cli(['status'], env([NS, ORPHAN]));
    expect(text.status).toBe(1);
    expect(text.stdout).toContain('leader:        NONE');
  }, 60_000);

  it('status: the balance read from etcd — members, cap ⌈3/2⌉ = 2, a replica leading all 3 flagged OVER CAP', async () => {
    // Two members serving three targets, and one of them first in line of every election: written as the
    // replicas write them (membership key and candidate keys on a lease), without replicas to rebalance them.
    const namespaces = ['why-bal-0', 'why-bal-1', 'why-bal-2'];
    const refs = namespaces.map((namespace) => targetIn(cluster(), namespace));
    const labels = refs.map(targetKey);
    const etcd = new Etcd3({ hosts: cluster().etcd.endpoints });
    const lease = etcd.lease(60);
    try {
      const id = await lease.grant();
      for (const m of ['bal-a', 'bal-b'])
        await lease.put(`${membersPrefix(cluster().clusterName)}${m}`).value(targetSetValue(labels));
      for (const ref of refs) await lease.put(`${electionPrefix(ref)}${id}`).value('bal-a');
      const { owners } = assignTargets(labels, ['bal-a', 'bal-b']);
      const assignedTo = (m: string) => [...owners.values()].filter((o) => o === m).length;
      const moving = labels.filter((t) => owners.get(t) !== 'bal-a').length;

      const r = await cli(['status', '--json'], env(namespaces));
      expect(r.status, r.stderr).toBe(0);
      const s = JSON.parse(r.stdout) as StatusJson;
      expect(s.balance).toMatchObject({
        members: ['bal-a', 'bal-b'],
        targets: 3,
        cap: 2,
        share: {
          'bal-a': { assigned: assignedTo('bal-a'), leading: 3 },
          'bal-b': { assigned: assignedTo('bal-b'), leading: 0 },
        },
      });
      expect(s.balance?.otherMembers).toContain('why-1');
      expect(s.targets.map((t) => t.assigned)).toEqual(labels.map((t) => owners.get(t)));

      const text = await cli(['status'], env(namespaces));
      expect(text.status, text.stderr).toBe(0);
      expect(text.stdout).toContain('  members 2, targets 3, cap 2\n');
      expect(text.stdout).toContain(
        `  bal-a  leads 3  assigned ${assignedTo('bal-a')}  OVER CAP: leads more than 2 ` +
          `(${moving} of its targets assigned elsewhere: normal only while it hands them over)\n`,
      );
      expect(text.stdout).toContain(`  bal-b  leads 0  assigned ${assignedTo('bal-b')}\n`);
    } finally {
      await lease.revoke().catch(() => undefined);
      etcd.close();
    }
  }, 60_000);

  it('explain: accepted → "deleted at … by why-1", by name and by UID', async () => {
    const byName = await explainOf(`${cluster().context}:${NS}/${nameOf(pods.accepted)}`);
    expect(byName.kind).toBe('deleted');
    expect(byName.verdict).toMatch(/^deleted at \S+ .* by why-1$/);
    expect(byName.uid).toBe(uidOf(pods.accepted));
    const byUid = await explainOf(uidOf(pods.accepted));
    const absolute = (v: string) => v.replace(/ \([^)]* ago\)/, '');
    expect(byUid.kind).toBe('deleted');
    expect(absolute(byUid.verdict)).toBe(absolute(byName.verdict));
  }, 60_000);

  it('explain: pending → "will be deleted at <deadline> by why-1"', async () => {
    const before = Date.now();
    const e = await explainOf(`${cluster().context}:${NS}/${nameOf(pods.pending)}`);
    const after = Date.now();
    expect(e.kind).toBe('pending');
    const m = /^will be deleted at (\S+) \(in (\d+) min\) by why-1$/.exec(e.verdict);
    expect(m, e.verdict).not.toBeNull();
    // The deadline is the pod's finish + the 10 min retention, to the second (a pod seen the instant it
    // finished may have its deadline counted from when it was first seen, a millisecond later); "in N min" is
    // counted from when explain ran.
    const deadlineMs = judgePod(pods.pending as V1Pod, 10 * 60_000).deadlineMs as number;
    expect(Math.floor(Date.parse(m?.[1] ?? '') / 1000)).toBe(Math.floor(deadlineMs / 1000));
    const inMin = Number(m?.[2]);
    expect(inMin).toBeGreaterThanOrEqual(Math.floor((deadlineMs - after) / 60_000));
    expect(inMin).toBeLessThanOrEqual(Math.ceil((deadlineMs - before) / 60_000));
    expect(e.parts.job).toMatch(/^delayed, attempts 0/);
  }, 60_000);

  it('explain: a failed driver under policy COMPLETED → kept', async () => {
    const e = await explainOf(`${cluster().context}:${NS}/${nameOf(pods.policy)}`);
    expect(e).toMatchObject({
      kind: 'kept',
      verdict: 'kept: policy COMPLETED keeps failed drivers (state FAILED)',
    });
  }, 60_000);

  it('explain: a pod without kyuubi-unique-tag → not a driver pod we select', async () => {
    const e = await explainOf(`${cluster().context}:${NS}/${nameOf(pods.unmatched)}`);
    expect(e).toMatchObject({
      kind: 'not-matching',
      verdict: `not a driver pod: labels do not match ${SELECTOR}`,
    });
  }, 60_000);

  it('explain: deleted by someone else, held by a finalizer → being deleted, tombstoned, no job', async () => {
    const e = await explainOf(`${cluster().context}:${NS}/${nameOf(pods.deleting)}`);
    expect(e.kind).toBe('being-deleted');
    expect(e.verdict).toMatch(/^being deleted by someone else since /);
    expect(e.parts.tombstone).toMatch(/^present for another/);
    expect(e.parts.job).toBe('none');
    expect(cluster().server.requests.deletesByUid().get(uidOf(pods.deleting))).toBeUndefined();
  }, 60_000);

  it('explain: a leaderless target → stuck, with and without a passed deadline', async () => {
    const e = await explainOf(`${cluster().context}:${ORPHAN}/${nameOf(pods.orphan)}`, [NS, ORPHAN]);
    expect(e.kind).toBe('stuck');
    expect(e.verdict).toMatch(
      /^stuck: no leader for this target \(no replica campaigns in etcd\); its deadline is /,
    );
    const o = await explainOf(`${cluster().context}:${ORPHAN}/${nameOf(pods.overdue)}`, [NS, ORPHAN]);
    expect(o.verdict).toMatch(/its deadline passed .* ago\)$/);
  }, 60_000);

  it('explain: a namespace no target names → exit 2 naming it and the configured targets, as the API answers 404', async () => {
    const r = await cli(['explain', `${cluster().context}:elsewhere/x`, '--json'], env([NS]));
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${cluster().context}:elsewhere is not a configured target`);
    expect(r.stderr).toContain(`targets: ${cluster().context}:${NS}`);
  }, 60_000);

  it('/api/v1/explain/{namespace}/{pod}: the same answer from a replica, behind the /api/ auth', async () => {
    const url = await httpUrl(leader);
    const path = `/api/v1/explain/${NS}/${nameOf(pods.pending)}`;
    expect((await fetch(`${url}${path}`)).status).toBe(401);
    const auth = `Basic ${Buffer.from(`${AUTH.user}:${AUTH.password}`).toString('base64')}`;
    const res = await fetch(`${url}${path}`, { headers: { authorization: auth } });
    expect(res.status).toBe(200);
    const e = (await res.json()) as ExplainJson;
    expect(e).toMatchObject({ kind: 'pending', uid: uidOf(pods.pending) });
    const policy = await fetch(`${url}/api/v1/explain/${NS}/${nameOf(pods.policy)}`, {
      headers: { authorization: auth },
    });
    expect(((await policy.json()) as ExplainJson).kind).toBe('kept');
    const other = await fetch(`${url}/api/v1/explain/elsewhere/x`, { headers: { authorization: auth } });
    expect(other.status).toBe(404);
  }, 60_000);

  it('state API: a running driver deleted by someone else (held by a finalizer) → KILLED and deleting, not RUNNING; explain says being deleted', async () => {
    const url = await httpUrl(leader);
    const auth = `Basic ${Buffer.from(`${AUTH.user}:${AUTH.password}`).toString('base64')}`;
    const running = driver(NS, 'running-held', 0, { phase: 'Running', finalizer: true });
    const path = `/api/v1/applications/${NS}/${nameOf(running)}`;
    const view = async () => {
      const res = await fetch(`${url}${path}`, { headers: { authorization: auth } });
      return res.status === 200 ? ((await res.json()) as Record<string, unknown>) : undefined;
    };
    expect(await waitFor('the running driver in the informer', view)).toMatchObject({
      state: 'RUNNING',
      deleting: false,
    });
    cluster().server.pods.delete(NS, nameOf(running));
    const deleting = await waitFor('the deletion seen by the informer', async () => {
      const v = await view();
      return v?.deleting === true ? v : undefined;
    });
    expect(deleting).toMatchObject({ state: 'KILLED', deletionTimestamp: expect.any(String) });
    expect(String(deleting.error)).toMatch(/^pod is being deleted/);
    const e = await explainOf(`${cluster().context}:${NS}/${nameOf(running)}`);
    expect(e.kind).toBe('being-deleted');
    expect(cluster().server.requests.deletesByUid().get(uidOf(running))).toBeUndefined();
  }, 60_000);

  it('bad input: exit 2 naming the field or the pod reference, exit 3 naming the store that does not answer', async () => {
    const base = { SDC_TARGETS: 'why:why-here', KUBECONFIG: cluster().server.kubeconfigPath };
    const [badConfig, badRef, noRedis, noEtcd] = await Promise.all([
      cli(['status'], { ...base, SDC_REDIS_URL: cluster().redis.url, SDC_RETENTION: 'soon' }),
      cli(['explain', 'just-a-name'], { ...base, SDC_REDIS_URL: cluster().redis.url }),
      cli(['status'], { ...base, SDC_REDIS_URL: 'redis://:secret@127.0.0.1:1' }),
      cli(['explain', '--offline', 'why:why-here/p'], {
        ...base,
        SDC_REDIS_URL: cluster().redis.url,
        SDC_ETCD_ENDPOINTS: 'http://127.0.0.1:1',
      }),
    ]);
    expect(badConfig.status).toBe(2);
    expect(badConfig.stderr).toContain('SDC_RETENTION');
    expect(badRef.status).toBe(2);
    expect(badRef.stderr).toContain('expected context:namespace/pod');
    expect(noRedis.status).toBe(3);
    expect(noRedis.stderr).toMatch(/redisUrl .* redis:\/\/:\*\*\*@127\.0\.0\.1:1: Redis does not answer/);
    expect(noRedis.stderr).not.toContain('secret');
    expect(noEtcd.status).toBe(3);
    expect(noEtcd.stderr).toContain(
      'etcdEndpoints (--etcd-endpoints, SDC_ETCD_ENDPOINTS) http://127.0.0.1:1',
    );
  }, 60_000);

  it('without etcd (single-server mode): the leader is the replica whose worker consumes; none → no leader', async () => {
    const ns = 'why-single';
    const single = { ...env([ns]), SDC_ETCD_ENDPOINTS: '', SDC_QUEUE_PREFIX: 'why-single' };
    const r = cluster().startReplica('why-single-1', single);
    try {
      // Local leadership logs no election: its first reconcile says it leads.
      await r.waitForLine((l) => l.msg === 'reconciled' && l.namespace === ns, 30_000);
      const p = driver(ns, 'single', 0);
      await r.waitForLine((l) => l.msg === 'enqueue' && l.uid === uidOf(p) && l.result === 'added', 30_000);
      const ok = await cli(['status', '--json'], single);
      expect(ok.status, ok.stderr).toBe(0);
      expect((JSON.parse(ok.stdout) as StatusJson).targets[0]).toMatchObject({
        leader: 'why-single-1',
        leaderFrom: 'redis-workers',
        jobs: expect.objectContaining({ delayed: 1 }),
      });
      const single2 = await cli(['explain', '--json', `${cluster().context}:${ns}/${nameOf(p)}`], single);
      expect((JSON.parse(single2.stdout) as ExplainJson).verdict).toMatch(
        /^will be deleted at .* by why-single-1$/,
      );
      await stopAll([r]);
      const none = await cli(['status', '--json'], single);
      expect(none.status).toBe(1);
      expect((JSON.parse(none.stdout) as StatusJson).targets[0]?.problems).toEqual([
        'no leader: no worker consumes',
      ]);
    } finally {
      await stopAll([r]);
    }
  }, 90_000);
});
