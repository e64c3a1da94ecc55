/**
 * A rolling update and its rollback between the previous release and this version, on one Redis and one etcd
 * (and in single-server mode, on one Redis): real processes, Redis, etcd and the sandbox API server; every
 * DELETE counted at the sandbox.
 *
 * Release 0.1.0 names a target's queue and election by its context, this version by its cluster
 * (src/queue/job-identity.ts), so side by side each version has its own queue of the same pods. While a 0.1.0
 * replica is alive this version's leader waits until it also leads the target's 0.1.0 election (or, in
 * single-server mode, until no 0.1.0 worker consumes the old queue): src/leadership/previous-release-gate.ts.
 * - pending cleanups handed over by SIGTERM: the pods the one enqueued are deleted once by the other;
 * - two replicas of each version replaced one by one while pods fall due all along: one DELETE per pod, none
 *   early, in both directions, on etcd and in single-server mode.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { LogLine, ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import { trimPod } from '../../src/kube/driver-pod.ts';
import { JOB_FORMAT } from '../../src/queue/cleanup-queue.ts';
import { jobKey, previousReleaseQueueName } from '../../src/queue/job-identity.ts';
import { decide } from '../../src/rules/decision.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  replicaEnv,
  SELECTOR,
  stopAll,
  targetIn,
  uidOf,
  useFailureCluster,
  waitGone,
} from '../failure/helpers.ts';
import { deletesPer } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';
import { extractPreviousRelease, PREVIOUS_RELEASE } from './previous-release.ts';

const cluster = useFailureCluster({ context: 'up' });
const zk = useZooKeeper();
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
 * The outcomes that end a job's run for good, not put back nor retried (src/rules/outcome.ts, and the
 * worker's `refused` for data it cannot read).
 */
const FINAL = new Set(['accepted', 'already-absent', 'replaced', 'already-deleting', 'skipped', 'refused']);

/**
 * Stored `data` of each pod's job, parsed: in this version's queue, or (`previous`) in the queue release 0.1.0
 * names by context.
 */
async function storedData(
  prefix: string,
  namespace: string,
  pods: V1Pod[],
  previous = false,
): Promise<unknown[]> {
  const db = new Redis(cluster().redis.url);
  conns.push(db);
  const target = targetIn(cluster(), namespace);
  const key = (uid: string) =>
    previous ? `${prefix}:${previousReleaseQueueName(target)}:${uid}` : jobKey(prefix, target, uid);
  return Promise.all(pods.map(async (p) => JSON.parse((await db.hget(key(uidOf(p)), 'data')) ?? 'null')));
}

/**
 * `from` leads `namespace` and has enqueued `pods`; `to` starts, then `from` is stopped as a rollout stops
 * it. Resolves once every pod is gone; returns the lines `to` logged about the pods.
 */
async function handOver(
  from: ReplicaProcess,
  to: () => ReplicaProcess,
  namespace: string,
  pods: V1Pod[],
  beforeStop: (next: ReplicaProcess) => Promise<unknown> = async () => undefined,
) {
  const next = to();
  await next.waitForLine((l) => l.msg === 'replica started', 60_000);
  await beforeStop(next);
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
    `rollout: pods ${PREVIOUS_RELEASE.version} enqueued are deleted once by this version, which waited for it`,
    async () => {
      const ns = 'rollout';
      const previous = spawnPrevious('old-a', env(ns, 'up1'));
      await firstLeader([previous], ns);
      const pods = createDrivers(cluster().server, ns, 6, 'ro');
      await waitFor('the previous release enqueued every pod', async () =>
        (await storedData('up1', ns, pods, true)).every((d) => d !== null),
      );
      // Its format: no version field, in the queue named by context.
      for (const d of await storedData('up1', ns, pods, true)) expect(d).not.toHaveProperty('v');
      // Elected in its own election while the 0.1.0 leader lives, it says why it does not consume.
      let waiting: LogLine | undefined;
      const { lines } = await handOver(
        previous,
        () => cluster().startReplica('new-a', env(ns, 'up1')),
        ns,
        pods,
        async (next) => {
          waiting = await next.waitForLine((l) => l.msg === 'elected, but not consuming: waiting', 60_000);
        },
      );
      expect(String(waiting?.why)).toMatch(/^replicas of release 0\.1\.0 are alive in etcd \(old-a\)/);
      expect(lines.filter((l) => l.outcome === 'refused')).toEqual([]);
      expect(lines.filter((l) => l.msg === 'driver pod deleted').length).toBe(pods.length);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    `rollback: pods this version enqueued are deleted once by ${PREVIOUS_RELEASE.version}`,
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

const selector = parseLabelSelector(SELECTOR);
/** DELETEs of `namespace`'s pods that reached the sandbox before their deadline (finishedAt + `retentionMs`). */
function earlyDeletes(namespace: string, retentionMs: number): string[] {
  return cluster()
    .server.requests.deletes()
    .flatMap((d) => {
      if (!d.found || d.found.metadata?.namespace !== namespace) return [];
      const s = decide(trimPod(d.found), { selector, policy: 'ALL', appState: KYUUBI_STATE_DEFAULTS });
      const finished = s.action === 'enqueue' ? s.state.finishedAtMs : undefined;
      return finished !== undefined && d.atMs < finished + retentionMs ? [String(d.uid)] : [];
    });
}

/** Retention of the side-by-side cases: pods fall due every few hundred ms all through the update. */
const DUE_MS = 2000;

/**
 * Two replicas started by `first`, then replaced one by one by two started by `second` (each new one up before
 * an old one gets SIGTERM, as a Deployment's rolling update does), while a driver pod finishes every 300 ms,
 * due {@link DUE_MS} later: pods fall due while both versions run. Every pod is deleted once, none early.
 */
async function rollWhilePodsFallDue(
  ns: string,
  first: (id: string) => ReplicaProcess,
  second: (id: string) => ReplicaProcess,
  single = false,
  whileFirstNewStarts: (next: ReplicaProcess, old: ReplicaProcess) => Promise<unknown> = async () =>
    undefined,
  replicas = 2,
): Promise<{ olds: ReplicaProcess[]; news: ReplicaProcess[] }> {
  const server = cluster().server;
  const olds = ['a', 'b'].slice(0, replicas).map((x) => first(`${ns}-1${x}`));
  const news: ReplicaProcess[] = [];
  if (single)
    // Without a backend every replica leads (no `elected leader` line): each consumes once it reconciled.
    await Promise.all(
      olds.map((r) => r.waitForLine((l) => l.msg === 'reconciled' && l.namespace === ns, 60_000)),
    );
  else await firstLeader(olds, ns);
  const pods: V1Pod[] = [];
  let creating = true;
  const creator = (async () => {
    for (let i = 0; creating; i++) {
      pods.push(...createDrivers(server, ns, 1, `p${i}`));
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  const deletedSince = (sinceMs: number) =>
    server.requests.deletes().filter((d) => d.found?.metadata?.namespace === ns && d.atMs >= sinceMs).length;
  try {
    for (const [i, old] of olds.entries()) {
      const next = second(`${ns}-2${'ab'[i]}`);
      news.push(next);
      await next.waitForLine((l) => l.msg === 'replica started', 60_000);
      if (i === 0) await whileFirstNewStarts(next, old);
      // Both versions side by side while pods fall due: wait for a few of them to be deleted meanwhile.
      const overlap = server.clock.now();
      await waitFor(
        `pods deleted while ${old.id} and ${next.id} both run`,
        () => deletedSince(overlap) >= 3,
        60_000,
      );
      old.kill('SIGTERM');
      expect(await old.exited).toBe(0);
    }
    // And after the update, by the new version alone.
    const after = server.clock.now();
    await waitFor('pods deleted after the update', () => deletedSince(after) >= 3, 60_000);
  } finally {
    creating = false;
    await creator;
  }
  await waitGone(server, pods, `every ${ns} pod deleted`, 60_000);
  const uids = pods.map(uidOf);
  expect(deletesPer(server, uids), 'DELETE requests per pod').toEqual(uids.map(() => 1));
  expect(checkInvariants(server, ns, uids, { retentionMs: DUE_MS })).toEqual(CLEAN);
  expect(earlyDeletes(ns, DUE_MS)).toEqual([]);
  return { olds, news };
}

describe(`both versions side by side while pods fall due (${PREVIOUS_RELEASE.version} ⇄ this version)`, () => {
  const env = (ns: string, prefix: string, extra: Record<string, string> = {}) =>
    replicaEnv(cluster(), ns, prefix, { SDC_RETENTION: `${DUE_MS}ms`, ...extra });
  const single = { SDC_ETCD_ENDPOINTS: '' };

  it(
    'on etcd, rolling update: one DELETE per pod, none early; the first new leader waits for the 0.1.0 one',
    async () => {
      const ns = 'side-up';
      const { news } = await rollWhilePodsFallDue(
        ns,
        (id) => spawnPrevious(id, env(ns, 'up3')),
        (id) => cluster().startReplica(id, env(ns, 'up3')),
        false,
        // Elected in its own election while both 0.1.0 replicas live: it waits for their leader.
        (next) =>
          next.waitForLine(
            (l) =>
              l.msg === 'elected, but not consuming: waiting' &&
              /^replicas of release 0\.1\.0/.test(String(l.why)),
            60_000,
          ),
      );
      await stopAll(news);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'on etcd, rollback: one DELETE per pod, none early',
    async () => {
      const ns = 'side-back';
      const { news } = await rollWhilePodsFallDue(
        ns,
        (id) => cluster().startReplica(id, env(ns, 'up4')),
        (id) => spawnPrevious(id, env(ns, 'up4')),
      );
      await stopAll(news);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'single-server mode, rolling update: one DELETE per pod; this version waits for the 0.1.0 workers',
    async () => {
      const ns = 'single-up';
      const { news } = await rollWhilePodsFallDue(
        ns,
        (id) => spawnPrevious(id, env(ns, 'up5', single)),
        (id) => cluster().startReplica(id, env(ns, 'up5', single)),
        true,
      );
      expect(news[0]?.lines.find((l) => l.msg === 'elected, but not consuming: waiting')?.why).toMatch(
        /^a worker of release 0\.1\.0 consumes this target's 0\.1\.0 queue/,
      );
      await stopAll(news);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'on ZooKeeper, rollback scaled to one replica first: the 0.1.0 replica runs in single-server mode and this version waits for its worker; one DELETE per pod, none early',
    async () => {
      const ns = 'zk-back';
      const onZk = { SDC_ETCD_ENDPOINTS: '', SDC_ZOOKEEPER: zk().connect };
      const { news } = await rollWhilePodsFallDue(
        ns,
        (id) => cluster().startReplica(id, env(ns, 'up7', onZk)),
        // 0.1.0 does not know ZooKeeper: without etcd it runs in single-server mode.
        (id) => spawnPrevious(id, env(ns, 'up7', single)),
        false,
        // This version, elected on ZooKeeper, stops consuming once the 0.1.0 worker consumes the old queue.
        (_next, old) =>
          old.waitForLine(
            (l) =>
              l.msg === 'elected, but not consuming: waiting' &&
              /^a worker of release 0\.1\.0 consumes this target's 0\.1\.0 queue/.test(String(l.why)),
            60_000,
          ),
        1,
      );
      await stopAll(news);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'single-server mode, rollback: one DELETE per pod, none early',
    async () => {
      const ns = 'single-back';
      const { news } = await rollWhilePodsFallDue(
        ns,
        (id) => cluster().startReplica(id, env(ns, 'up6', single)),
        (id) => spawnPrevious(id, env(ns, 'up6', single)),
        true,
      );
      await stopAll(news);
    },
    CASE_TIMEOUT_MS,
  );
});

/** A replica of the previous release, with the cluster's services. */
function spawnPrevious(id: string, env: Record<string, string>): ReplicaProcess {
  return cluster().startReplica(id, env, previousCli);
}
