/**
 * `check --canary` end to end: three real replica processes, real Redis and etcd, the sandbox API server with
 * its kubelet stand-in finishing the canary pods. The canary proves that the fleet deletes each canary once,
 * after its retention and not before (checked again here from the sandbox's request log), and touches nothing
 * else; with the fleet down it fails, naming why, and deletes the canaries it left.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PermissionTable } from '../../harness/sandbox/apiserver/authorization.ts';
import { type SandboxKubelet, startKubelet } from '../../harness/sandbox/kubelet.ts';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { CANARY_LABEL } from '../../src/check/canary-pod.ts';
import { firstLeader, replicaEnv, stopAll, useFailureCluster } from '../failure/helpers.ts';
import { serviceEnv } from '../helpers/cluster.ts';
import { pod } from '../sandbox/helpers.ts';
import { dump, runCheck, withId } from './check-cli.ts';

const NS = 'spark-canary';
const SA = 'system:serviceaccount:spark-driver-cleaner:spark-driver-cleaner';
/**
 * The cleaner's ServiceAccount as the example overlay grants it in the canary's namespace, plus `create` on pods
 * there as the temporary Role of docs/operations.md ("Canary") adds it; and the same without that Role.
 */
const PERMISSIONS: PermissionTable = {
  'cleaner-with-canary-role': {
    name: SA,
    rules: [
      { verbs: ['get', 'list', 'watch', 'delete'], resources: ['pods'], namespaces: [NS] },
      { verbs: ['create'], resources: ['pods'], namespaces: [NS] },
    ],
  },
  'cleaner-token': {
    name: SA,
    rules: [{ verbs: ['get', 'list', 'watch', 'delete'], resources: ['pods'], namespaces: [NS] }],
  },
};
const cluster = useFailureCluster({
  context: 'canary',
  rbac: { permissions: PERMISSIONS, token: 'cleaner-with-canary-role' },
});
const PREFIX = 'can';
const RETENTION_MS = 3000;
let kubelet: SandboxKubelet;

beforeAll(async () => {
  const admin = new Redis(cluster().redis.url);
  await admin.config('SET', 'appendonly', 'yes');
  admin.disconnect();
  kubelet = startKubelet(cluster().server, { pendingMs: 100, runMs: 200 });
});
afterAll(() => kubelet?.stop());

/**
 * The replicas' configuration, which `check` is run with too. The overdue grace bounds how long the canary waits
 * after a deadline: generous where the fleet must make it on a loaded machine, short where it is down.
 */
const env = (overdueGrace = '15s') => ({
  ...serviceEnv(cluster().server.kubeconfigPath, cluster().redis, cluster().etcd),
  ...replicaEnv(cluster(), NS, PREFIX, {
    SDC_RETENTION: `${RETENTION_MS}ms`,
    SDC_OVERDUE_GRACE: overdueGrace,
  }),
});
const canaries = () =>
  cluster()
    .server.pods.list(NS)
    .filter((p) => p.metadata?.labels?.[CANARY_LABEL] !== undefined);

describe('check --canary', () => {
  it('three replicas: each canary deleted once, after its retention and not before, nothing else touched, exit 0', async () => {
    // Something else in the namespace that must not be touched: a running driver and an unrelated pod.
    const bystanders = [
      cluster().server.pods.create({
        ...pod(NS, 'bystander'),
        spec: { containers: [{ name: 'c' }], nodeName: 'n1' },
      }),
    ];
    const replicas: ReplicaProcess[] = ['c1', 'c2', 'c3'].map((id) => cluster().startReplica(id, env()));
    try {
      await firstLeader(replicas, NS);
      cluster().server.requests.reset();
      const run = await runCheck(
        ['--canary', NS, '--output', 'json', '--canary-start-timeout', '30s'],
        env(),
      );
      expect(run.status, dump(run)).toBe(0);
      const deleted = withId(run, 'canary.deleted');
      expect(deleted.map((c) => c.status)).toEqual(['pass', 'pass', 'pass']);
      for (const c of deleted) {
        expect(c.message).toMatch(
          /^sdc-canary-[0-9a-f]{8}-\d: deleted once by c[123] \(outcome accepted\), \d+(\.\d)? s after its deadline$/,
        );
        expect(c.details).toMatchObject({ outcome: 'accepted' });
        expect(c.details?.latenessMs).toBeGreaterThanOrEqual(0);
      }
      expect(withId(run, 'canary.create')[0]?.status).toBe('pass');
      expect(withId(run, 'canary.lateness')[0]?.message).toMatch(
        /^lateness after the deadline \(1 s timestamps\): min /,
      );
      expect(withId(run, 'canary.cleanup')[0]?.message).toBe('cleanup: no canary left behind');
      expect(withId(run, 'fleet.leader')[0]?.message).toBe(
        'leaders: each of the 1 target has one leader, and only it consumes the queue',
      );
      expect(withId(run, 'fleet.members')[0]?.message).toBe(
        'members: 3 replicas serve these targets (c1, c2, c3)',
      );

      // The request log agrees: one DELETE per canary, none before its deadline, nothing else deleted.
      const uids = deleted.map((c) => String(c.details?.uid));
      const deletes = cluster().server.requests.deletes();
      expect(deletes.map((d) => d.uid).sort()).toEqual([...uids].sort());
      expect(deletes.map((d) => d.code)).toEqual([200, 200, 200]);
      for (const c of deleted) {
        const d = deletes.find((x) => x.uid === c.details?.uid);
        expect(d?.atMs).toBeGreaterThanOrEqual(Number(c.details?.deadlineMs));
      }
      expect(canaries()).toEqual([]);
      expect(cluster().server.pods.get(NS, 'bystander')?.metadata?.uid).toBe(bystanders[0]?.metadata?.uid);
      expect(kubelet.finished.filter((n) => n.startsWith(`${NS}/sdc-canary-`))).toHaveLength(3);
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);

  it('the fleet in dry run: each canary judged due once, not before its deadline, no DELETE from the fleet; the command deletes them', async () => {
    const dry = { ...env(), SDC_DRY_RUN: 'true' };
    const replicas: ReplicaProcess[] = ['d1', 'd2', 'd3'].map((id) => cluster().startReplica(id, dry));
    try {
      await firstLeader(replicas, NS);
      cluster().server.requests.reset();
      const run = await runCheck(['--canary', NS, '--output', 'json', '--canary-count', '2'], dry);
      expect(run.status, dump(run)).toBe(0);
      const deleted = withId(run, 'canary.deleted');
      expect(deleted.map((c) => c.status)).toEqual(['pass', 'pass']);
      for (const c of deleted) {
        expect(c.message).toMatch(
          /^sdc-canary-[0-9a-f]{8}-\d: would be deleted once by d[123] \(dry run: outcome would-delete\), \d+(\.\d)? s after its deadline$/,
        );
        expect(c.details?.latenessMs).toBeGreaterThanOrEqual(-1000);
      }
      expect(withId(run, 'canary.dry-run')[0]).toMatchObject({ status: 'warn' });
      expect(withId(run, 'canary.cleanup')[0]?.message).toBe('cleanup: deleted 2 canary pods left behind');
      // The only DELETEs are the command's own, after the fleet judged the pods due.
      expect(
        cluster()
          .server.requests.deletes()
          .map((d) => d.uid)
          .sort(),
      ).toEqual(deleted.map((c) => String(c.details?.uid)).sort());
      expect(canaries()).toEqual([]);
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);

  it('the fleet down: ✗ for each canary naming why, the canaries deleted by the command, exit 1', async () => {
    cluster().server.requests.reset();
    const run = await runCheck(['--canary', NS, '--output', 'json', '--canary-count', '2'], env('3s'));
    expect(run.status, dump(run)).toBe(1);
    const deleted = withId(run, 'canary.deleted');
    expect(deleted.map((c) => c.status)).toEqual(['fail', 'fail']);
    for (const c of deleted)
      expect(c.message).toMatch(
        /^sdc-canary-[0-9a-f]{8}-\d: not deleted 3 s after its deadline: no replica leads canary:spark-canary \(is the fleet running\?\)$/,
      );
    expect(withId(run, 'canary.cleanup')[0]?.message).toBe('cleanup: deleted 2 canary pods left behind');
    expect(canaries()).toEqual([]);
    // Only the command's own cleanup deleted them: one DELETE each, with the UID precondition.
    expect(
      cluster()
        .server.requests.deletes()
        .map((d) => d.code),
    ).toEqual([200, 200]);
    expect(withId(run, 'fleet.running')[0]?.status).toBe('skip');
  }, 120_000);

  it('without create on pods in the namespace (the shipped RBAC) → ✗ naming the temporary Role to add, nothing created, exit 1', async () => {
    cluster().server.requests.reset();
    const run = await runCheck(['--canary', NS, '--output', 'json'], {
      ...env(),
      KUBECONFIG: cluster().server.kubeconfigFor('cleaner-token'),
    });
    expect(run.status, dump(run)).toBe(1);
    expect(withId(run, 'canary.permissions')).toEqual([
      expect.objectContaining({
        status: 'fail',
        message: `canary: create on pods in ${NS} refused: the canary cannot create its pods`,
        fix: expect.stringContaining(
          `kubectl -n ${NS} create role spark-driver-cleaner-canary --verb=create --resource=pods`,
        ),
      }),
    ]);
    expect(
      cluster()
        .server.requests.recent()
        .filter((q) => q.method === 'POST' && q.path.endsWith('/pods')),
    ).toEqual([]);
  });

  it('someone else deleting the canaries as they finish (Kyuubi’s own cleanup still on) → ✗ deleted BEFORE the deadline, exit 1', async () => {
    // A rogue cleaner: deletes every canary the moment it has finished.
    const unsubscribe = cluster().server.pods.subscribe((type, p) => {
      const m = p.metadata;
      if (type !== 'MODIFIED' || p.status?.phase !== 'Succeeded' || m?.deletionTimestamp) return;
      if (m?.labels?.[CANARY_LABEL] === undefined || !m.name) return;
      const name = m.name;
      setImmediate(() => cluster().server.pods.delete(NS, name));
    });
    try {
      const run = await runCheck(['--canary', NS, '--output', 'json', '--canary-count', '1'], env('3s'));
      expect(run.status, dump(run)).toBe(1);
      expect(withId(run, 'canary.deleted')).toEqual([
        expect.objectContaining({
          status: 'fail',
          message: expect.stringMatching(
            /^sdc-canary-[0-9a-f]{8}-1: deleted [23] s BEFORE its deadline \(finishedAt \+ 3 s\)$/,
          ),
          fix: expect.stringContaining('another cleaner'),
        }),
      ]);
      expect(canaries()).toEqual([]);
    } finally {
      unsubscribe();
    }
  }, 120_000);
});
