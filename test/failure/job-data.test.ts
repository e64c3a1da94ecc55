/**
 * Failure modes of what the cleaner reads and trusts: a job hash lost from Redis, a DELETE answered by an auth
 * proxy's login page, pods whose UID cannot be a job id. Real replica processes, Redis, etcd and the sandbox
 * API server (docs/failure-modes.md).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { jobKey, queueName } from '../../src/queue/job-identity.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  nameOf,
  remember,
  replicaEnv,
  stopAll,
  targetIn,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster({ context: 'jd' });
const conns: Redis[] = [];
afterAll(() => {
  for (const c of conns) c.disconnect();
});
function redis(): Redis {
  const c = new Redis(cluster().redis.url);
  conns.push(c);
  return c;
}

const deletesOf = (uid: string) => cluster().server.requests.deletesByUid().get(uid) ?? [];

describe('job data and answers the cleaner must not trust', () => {
  it('a delayed job whose Redis hash is deleted → refused when due (no GET of /pods/undefined), the pod enqueued again and deleted once', async () => {
    const ns = 'job-hash-lost';
    const prefix = 'jd1';
    const target = targetIn(cluster(), ns);
    // Reconcile only at election (default interval 10 min): nothing but the fix may bring the job back.
    const r = cluster().startReplica('hl1', replicaEnv(cluster(), ns, prefix, { SDC_RETENTION: '4s' }));
    try {
      await firstLeader([r], ns);
      const pod = createDrivers(cluster().server, ns, 1, 'lost')[0] as V1Pod;
      const uid = uidOf(pod);
      await r.waitForLine((l) => l.msg === 'enqueue' && l.uid === uid && l.result === 'added', 30_000);
      const db = redis();
      // Deleted by hand while the id waits in the delayed set, as the issue reproduces it.
      expect(await db.del(jobKey(prefix, target, uid))).toBe(1);
      expect(await db.zscore(`${prefix}:${queueName(target)}:delayed`, uid)).not.toBeNull();
      await r.waitForLine(
        (l) => l.uid === uid && (l.outcome === 'refused' || l.outcome === 'already-absent'),
      );
      await waitGone(cluster().server, [pod], 'the pod deleted after its job was refused', 30_000);
      expect(deletesOf(uid)).toEqual([200]);
      const refused = r.lines.filter((l) => l.outcome === 'refused');
      expect(refused).toEqual([
        expect.objectContaining({ level: 'warn', uid, field: 'pod', context: 'jd', namespace: ns }),
      ]);
      expect(r.lines.filter((l) => l.outcome === 'already-absent')).toEqual([]);
      const undefinedGets = cluster()
        .server.requests.recent()
        .filter((q) => q.path.endsWith('/pods/undefined'));
      expect(undefinedGets).toEqual([]);
      expect(checkInvariants(cluster().server, ns, [uid], { retentionMs: 4000 })).toEqual(CLEAN);
    } finally {
      await stopAll([r]);
    }
  }, 120_000);

  it('DELETEs answered 200 with an auth proxy login page → failed InvalidResponse (warn), retried, the pod deleted', async () => {
    const ns = 'job-login-page';
    const r = cluster().startReplica('lp1', replicaEnv(cluster(), ns, 'jd2'));
    try {
      await firstLeader([r], ns);
      const fault = cluster().server.faults.inject({
        verb: 'delete',
        path: `/namespaces/${ns}/pods/`,
        loginPage: true,
        count: 2,
      });
      const pod = createDrivers(cluster().server, ns, 1, 'login')[0] as V1Pod;
      const uid = uidOf(pod);
      await waitGone(cluster().server, [pod], 'the pod deleted by the retry', 60_000);
      cluster().server.faults.clear(fault);
      // The pod can be gone before the replica has written its outcome line.
      await r.waitForLine((l) => l.uid === uid && l.outcome === 'accepted', 30_000);
      // Three DELETE requests, all answered 200: two by the "proxy", one by the API server.
      expect(deletesOf(uid)).toEqual([200, 200, 200]);
      const failed = r.lines.filter((l) => l.uid === uid && l.outcome === 'failed');
      expect(failed).toHaveLength(2);
      for (const l of failed)
        expect(l).toMatchObject({ level: 'warn', step: 'delete', code: 200, reason: 'InvalidResponse' });
      expect(r.lines.filter((l) => l.uid === uid && l.outcome === 'accepted')).toHaveLength(1);
      expect(checkInvariants(cluster().server, ns, [], { retentionMs: 1000 }).leftovers).toEqual([]);
    } finally {
      await stopAll([r]);
    }
  }, 120_000);

  it('pods whose UID is all digits or has ":" → left alone, warned once per UID; every reconcile still restores the good pods', async () => {
    const ns = 'job-odd-uids';
    const prefix = 'jd3';
    const target = targetIn(cluster(), ns);
    const now = () => cluster().server.clock.now();
    // Named to come first in the informer's list, so a reconcile that throws on them enqueues nothing.
    const odd = (name: string, uid: string): V1Pod => {
      const p = sparkDriverPod({ namespace: ns, appName: name, phase: 'Succeeded', nowMs: now() - 60_000 });
      p.metadata = { ...p.metadata, name: `aa-${name}-driver`, uid };
      return p;
    };
    const listed = [odd('digits', '1234567890'), odd('colon', 'e1a2:b3c4')].map((p) =>
      remember(cluster().server.pods.create(p)),
    );
    const r = cluster().startReplica(
      'ou1',
      replicaEnv(cluster(), ns, prefix, { SDC_RETENTION: '6s', SDC_RECONCILE_INTERVAL: '1s' }),
    );
    try {
      await firstLeader([r], ns);
      const watched = [odd('digits2', '20261201'), odd('colon2', 'x:y')].map((p) =>
        remember(cluster().server.pods.create(p)),
      );
      const good = createDrivers(cluster().server, ns, 4, 'fine');
      await waitFor('the good pods enqueued', () =>
        good.every((p) => r.lines.some((l) => l.msg === 'enqueue' && l.uid === uidOf(p))),
      );
      // Their jobs lost (Redis data loss): only a reconcile can bring them back before the deadline passes.
      const db = redis();
      await db.del(
        `${prefix}:${queueName(target)}:delayed`,
        ...good.map((p) => jobKey(prefix, target, uidOf(p))),
      );
      await waitGone(cluster().server, good, 'the good pods deleted', 60_000);
      const since = Date.now();
      await waitFor(
        'two more reconciles',
        () =>
          r.lines.filter((l) => l.msg === 'reconciled' && Date.parse(String(l.time)) >= since).length >= 2,
      );
      expect(
        r.lines.filter((l) => /reconcile failed|cancel failed|enqueue failed/.test(String(l.msg))),
      ).toEqual([]);
      const oddUids = [...listed, ...watched].map(uidOf);
      const warned = r.lines.filter((l) => l.msg === 'malformed pod object: left alone');
      expect(warned.map((l) => l.uid).sort()).toEqual([...oddUids].sort());
      for (const l of warned) expect(l).toMatchObject({ level: 'warn' });
      for (const p of [...listed, ...watched]) {
        expect(cluster().server.pods.get(ns, nameOf(p))?.metadata?.uid).toBe(uidOf(p));
        expect(deletesOf(uidOf(p))).toEqual([]);
      }
      expect(good.map((p) => deletesOf(uidOf(p)))).toEqual(good.map(() => [200]));
    } finally {
      await stopAll([r]);
    }
  }, 150_000);
});
