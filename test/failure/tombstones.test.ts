/**
 * A tombstone may only mean "this UID is being or has been deleted": cases where one used to outlive its
 * reason — a pod relabelled out of the selector and back in, pods marked `would-delete` in dry run when dry run
 * is switched off. Real replica processes, Redis, etcd and the sandbox API server (docs/failure-modes.md).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { jobKey, tombstoneKey } from '../../src/queue/job-identity.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  nameOf,
  replicaEnv,
  stopAll,
  targetIn,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster({ context: 'tb' });
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

/** A JSON merge patch of a pod's labels, as `kubectl label` sends it (null removes a label). */
async function patchLabels(ns: string, name: string, labels: Record<string, string | null>): Promise<void> {
  const res = await fetch(`${cluster().server.url}/api/v1/namespaces/${ns}/pods/${name}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ metadata: { labels } }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

describe('tombstones only on evidence of deletion', () => {
  it('a pod relabelled out of the selector (PATCH) and back in → its job removed without a tombstone, then deleted once', async () => {
    const ns = 'tomb-relabel';
    const prefix = 'tb1';
    const target = targetIn(cluster(), ns);
    const r = cluster().startReplica('rl1', replicaEnv(cluster(), ns, prefix, { SDC_RETENTION: '5s' }));
    try {
      await firstLeader([r], ns);
      const pod = createDrivers(cluster().server, ns, 1, 'relabel')[0] as V1Pod;
      const uid = uidOf(pod);
      const tag = pod.metadata?.labels?.['kyuubi-unique-tag'] ?? '';
      await r.waitForLine((l) => l.msg === 'enqueue' && l.uid === uid && l.result === 'added', 30_000);
      // Out of the selector: the label-selected watch sends DELETED (no deletionTimestamp: nobody deletes it).
      await patchLabels(ns, nameOf(pod), { 'kyuubi-unique-tag': null });
      const db = redis();
      await waitFor(
        'the pending job removed',
        async () => (await db.exists(jobKey(prefix, target, uid))) === 0,
      );
      expect(await db.exists(tombstoneKey(prefix, target, uid))).toBe(0);
      // Back in: ADDED, a new job, deleted at its deadline.
      await patchLabels(ns, nameOf(pod), { 'kyuubi-unique-tag': tag });
      await waitGone(cluster().server, [pod], 'the relabelled-back pod deleted', 30_000);
      expect(deletesOf(uid)).toEqual([200]);
      // Added twice: before the relabel and after it. The new term's reconcile runs beside the informer and may
      // enqueue the new pod at the same moment: one of the two then finds the job (`exists`, a no-op).
      const results = r.lines.filter((l) => l.uid === uid && l.msg === 'enqueue').map((l) => l.result);
      expect(results.filter((x) => x !== 'exists')).toEqual(['added', 'added']);
      expect(checkInvariants(cluster().server, ns, [uid], { retentionMs: 5000 })).toEqual(CLEAN);
    } finally {
      await stopAll([r]);
    }
  }, 120_000);

  it('pods marked would-delete in dry run → deleted once by a replica restarted with dry run off', async () => {
    const ns = 'tomb-dry-run';
    const env = replicaEnv(cluster(), ns, 'tb2');
    const dry = cluster().startReplica('dr1', { ...env, SDC_DRY_RUN: 'true' });
    const pods = createDrivers(cluster().server, ns, 3, 'dry');
    const uids = pods.map(uidOf);
    try {
      await firstLeader([dry], ns);
      await waitFor('every pod marked would-delete', () =>
        uids.every((u) => dry.lines.some((l) => l.uid === u && l.outcome === 'would-delete')),
      );
      expect(uids.map(deletesOf)).toEqual(uids.map(() => []));
    } finally {
      await stopAll([dry]);
    }
    const live = cluster().startReplica('dr2', env);
    try {
      await waitGone(cluster().server, pods, 'the pods deleted once dry run is off', 60_000);
      expect(uids.map(deletesOf)).toEqual(uids.map(() => [200]));
      // Each would-delete job replaced once (by the informer's enqueue or the election's reconcile, whichever
      // came first; the other found the new job).
      const replaced = (u: string) =>
        live.lines.filter((l) => l.msg === 'enqueue' && l.uid === u && l.result === 'replaced').length;
      expect(uids.map(replaced)).toEqual(uids.map(() => 1));
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
    } finally {
      await stopAll([live]);
    }
  }, 120_000);
});
