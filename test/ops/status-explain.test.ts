/**
 * `status` against real processes: replica processes, Redis, etcd and the sandbox API server,
 * and the command run as the operator runs it (`src/cli.ts status`, the replicas' SDC_*
 * configuration). One case per answer the issue asks for: accepted, pending, kept by policy, not matching,
 * being deleted by someone else, leaderless target (with an overdue job); and `/api/v1/explain` behind the
 * same auth as the rest of `/api/`.
 */
import { execFile } from 'node:child_process';
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCleanupQueue } from '../../src/queue/cleanup-queue.ts';
import { CLI_PATH, type ReplicaProcess } from '../../src/sandbox/replica-process.ts';
import { sparkDriverPod } from '../../src/sandbox/workload.ts';
import { createLogger } from '../../src/telemetry/log.ts';
import {
  createDrivers,
  firstLeader,
  nameOf,
  remember,
  replicaEnv,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from '../failure/helpers.ts';
import { serviceEnv } from '../helpers/cluster.ts';

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
    consumingSince: string | null;
    jobs: Record<string, number>;
    nextDeadline: string | null;
    overdue: number;
    lastAccepted: { pod: string; uid: string; replica: string; at: string } | null;
    problems: string[];
  }[];
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
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(cluster().redis.url);
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
    const target = { context: cluster().context, namespace: ORPHAN };
    pods.overdue = driver(ORPHAN, 'overdue', 30 * MIN);
    const q = createCleanupQueue({
      target,
      connection: new Redis(cluster().redis.url, { maxRetriesPerRequest: null }),
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
  }, 120_000);

  afterAll(async () => {
    await stopAll([leader]);
    redis?.disconnect();
  });

  it('status: a healthy target → exit 0, its leader and since when, one delayed job, the next deadline, the last accepted DELETE', async () => {
    const r = await cli(['status', '--json'], env([NS]));
    expect(r.status, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as StatusJson;
    expect(s.healthy).toBe(true);
    const row = s.targets[0];
    expect(row).toMatchObject({
      target: `${cluster().context}:${NS}`,
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
    const text = await cli(['status'], env([NS]));
    expect(text.status).toBe(0);
    expect(text.stdout).toContain('leader:        why-1');
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
    const text = await cli(['status'], env([NS, ORPHAN]));
    expect(text.status).toBe(1);
    expect(text.stdout).toContain('leader:        NONE');
  }, 60_000);
});
