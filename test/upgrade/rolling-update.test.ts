/**
 * A rolling update and its rollback with pending cleanups: a replica of the previous release and one of this
 * version on one Redis and one etcd, the leadership handed from one to the other by SIGTERM (as a rollout
 * replaces pods). The jobs the one enqueued are deleted by the other, once each, none refused for its data.
 * Real processes, Redis, etcd and the sandbox API server.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { JOB_FORMAT } from '../../src/queue/cleanup-queue.ts';
import { jobKey } from '../../src/queue/job-identity.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  replicaEnv,
  targetIn,
  uidOf,
  useFailureCluster,
  waitGone,
} from '../failure/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { extractPreviousRelease, PREVIOUS_RELEASE } from './previous-release.ts';

const cluster = useFailureCluster({ context: 'up' });
/**
 * Long enough that the jobs are still pending when the leadership changes hands: the second replica's start
 * (a Node process loading the cleaner: seconds alone, tens of seconds when the whole suite loads both cores)
 * and the first one's stop come before it. Each case checks that they did ({@link handOver}).
 */
const RETENTION_MS = 40_000;
/** A case waits for the retention, plus two replicas' starts and the DELETEs. */
const CASE_TIMEOUT_MS = RETENTION_MS + 90_000;
const previousCli = extractPreviousRelease();
const conns: Redis[] = [];
afterAll(() => {
  for (const c of conns) c.disconnect();
});

/**
 * The outcomes that end a job's run for good, not put back nor retried (src/cleanup/outcome.ts, and the
 * worker's `refused` for data it cannot read).
 */
const FINAL = new Set(['accepted', 'already-absent', 'replaced', 'already-deleting', 'skipped', 'refused']);

/** Stored `data` of each pod's job, parsed. */
async function storedData(prefix: string, namespace: string, pods: V1Pod[]): Promise<unknown[]> {
  const db = new Redis(cluster().redis.url);
  conns.push(db);
  const target = targetIn(cluster(), namespace);
  return Promise.all(
    pods.map(async (p) => JSON.parse((await db.hget(jobKey(prefix, target, uidOf(p)), 'data')) ?? 'null')),
  );
}

/**
 * `from` leads `namespace` and has enqueued `pods`; `to` starts, then `from` is stopped as a rollout stops
 * it. Resolves once every pod is gone; returns the lines `to` logged about the pods.
 */
async function handOver(from: ReplicaProcess, to: () => ReplicaProcess, namespace: string, pods: V1Pod[]) {
  const next = to();
  await next.waitForLine((l) => l.msg === 'replica started', 60_000);
  // The handover must come before the deadline, or `from` deletes the pods itself and the case proves nothing.
  const alreadyGone = pods.filter((p) => !cluster().server.pods.get(namespace, p.metadata?.name ?? ''));
  expect(alreadyGone.length, 'pods deleted before the handover: raise RETENTION_MS').toBe(0);
  from.kill('SIGTERM');
  expect(await from.exited).toBe(0);
  await waitGone(cluster().server, pods, `the ${namespace} pods deleted after the handover`, 60_000);
  expect(
    checkInvariants(cluster().server, namespace, pods.map(uidOf), { retentionMs: RETENTION_MS }),
  ).toEqual(CLEAN);
  // A pod is gone when its DELETE is answered; the replica's line about it is read from its stdout after.
  const uids = new Set(pods.map(uidOf));
  const outcomes = () => next.lines.filter((l) => uids.has(String(l.uid)) && FINAL.has(String(l.outcome)));
  await waitFor(
    `the new leader logged an outcome for each of the ${namespace} pods`,
    () => uids.size === new Set(outcomes().map((l) => String(l.uid))).size,
  );
  return { next, lines: next.lines.filter((l) => uids.has(String(l.uid))) };
}

describe(`a rolling update between release ${PREVIOUS_RELEASE.version} and this version`, () => {
  const env = (ns: string, prefix: string) =>
    replicaEnv(cluster(), ns, prefix, { SDC_RETENTION: `${RETENTION_MS}ms` });

  it(
    `rollout: jobs ${PREVIOUS_RELEASE.version} enqueued are deleted once by this version`,
    async () => {
      const ns = 'rollout';
      const previous = spawnPrevious('old-a', env(ns, 'up1'));
      await firstLeader([previous], ns);
      const pods = createDrivers(cluster().server, ns, 6, 'ro');
      await waitFor('the previous release enqueued every pod', async () =>
        (await storedData('up1', ns, pods)).every((d) => d !== null),
      );
      // Its format: no version field. This version must read it.
      for (const d of await storedData('up1', ns, pods)) expect(d).not.toHaveProperty('v');
      const { lines } = await handOver(
        previous,
        () => cluster().startReplica('new-a', env(ns, 'up1')),
        ns,
        pods,
      );
      expect(lines.filter((l) => l.outcome === 'refused')).toEqual([]);
      expect(lines.filter((l) => l.msg === 'driver pod deleted').length).toBe(pods.length);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    `rollback: jobs this version enqueued are deleted once by ${PREVIOUS_RELEASE.version}`,
    async () => {
      const ns = 'rollback';
      const current = cluster().startReplica('new-b', env(ns, 'up2'));
      await firstLeader([current], ns);
      const pods = createDrivers(cluster().server, ns, 6, 'rb');
      await waitFor('this version enqueued every pod', async () =>
        (await storedData('up2', ns, pods)).every((d) => d !== null),
      );
      for (const d of await storedData('up2', ns, pods)) expect(d).toMatchObject({ v: JOB_FORMAT });
      const { lines } = await handOver(current, () => spawnPrevious('old-b', env(ns, 'up2')), ns, pods);
      expect(lines.filter((l) => l.outcome === 'refused')).toEqual([]);
      expect(lines.filter((l) => l.msg === 'driver pod deleted').length).toBe(pods.length);
    },
    CASE_TIMEOUT_MS,
  );
});

/** A replica of the previous release, with the cluster's services. */
function spawnPrevious(id: string, env: Record<string, string>): ReplicaProcess {
  return cluster().startReplica(id, env, previousCli);
}
