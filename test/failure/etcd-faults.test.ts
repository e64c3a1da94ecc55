/**
 * Failure modes: a 3-member etcd cluster losing a member, the member the leader talks to, and quorum; and
 * what a leader logs when it leaves on SIGTERM (a rolling update is not a failure).
 * Real etcd processes (per-member kill/restart), replica processes, the sandbox API server.
 */
import { describe, expect, it } from 'vitest';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { deletesPer } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  bystandersIntact,
  CLEAN,
  checkInvariants,
  createBystanders,
  createDrivers,
  firstLeader,
  linesSince,
  replicaEnv,
  startApiProxy,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster({ etcdMembers: 3 });

const member = (i: number) => {
  const m = cluster().etcd.members[i];
  if (!m) throw new Error(`no etcd member ${i}`);
  return m;
};
/** Members this file killed and has not restarted yet. */
const killed = new Set<number>();
const down = async (i: number) => {
  killed.add(i);
  await member(i).kill();
};
const up = async (i: number) => {
  if (!killed.delete(i)) return;
  await member(i).restart();
};
const allUp = () => Promise.all([...killed].map(up));
describe('etcd cluster faults', () => {
  it('one member killed → elections go on: cleanup continues and a handover still works', async () => {
    const ns = 'etcd-one';
    const env = replicaEnv(cluster(), ns, 'ef1');
    const replicas = [1, 2, 3].map((i) => cluster().startReplica(`o${i}`, env));
    try {
      const leader = await firstLeader(replicas, ns);
      await down(2);
      const a = createDrivers(cluster().server, ns, 20, 'one-a');
      await waitGone(cluster().server, a, 'pods deleted with a member down', 60_000);
      // A new election on the two remaining members.
      const handoverAt = Date.now();
      leader.kill('SIGTERM');
      const others = replicas.filter((r) => r !== leader);
      const next = await Promise.any(
        others.map((r) =>
          r
            .waitForLine((l) => l.msg === 'elected leader' && timeOf(l) >= handoverAt, 15_000)
            .then((l) => ({ r, l })),
        ),
      );
      const b = createDrivers(cluster().server, ns, 20, 'one-b');
      await waitGone(cluster().server, b, 'pods deleted by the leader elected on two members', 60_000);
      const uids = [...a, ...b].map(uidOf);
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      console.info(
        `[failure] etcd one member down: handover on 2 members in ${timeOf(next.l) - handoverAt} ms`,
      );
    } finally {
      await stopAll(replicas);
      await allUp();
    }
  }, 150_000);

  it('the member the leader talks to killed → the leader fences itself, another replica takes over', async () => {
    const ns = 'etcd-mine';
    const proxies = await Promise.all([0, 1, 2].map(() => startApiProxy(cluster().server)));
    // Each replica talks to one member only, so we know which member the leader depends on.
    const replicas = [0, 1, 2].map((i) =>
      cluster().startReplica(
        `m${i}`,
        replicaEnv(cluster(), ns, 'ef2', {
          SDC_ETCD_ENDPOINTS: cluster().etcd.endpoints[i] ?? '',
          ...proxies[i]?.env,
        }),
      ),
    );
    const index = (r: ReplicaProcess) => replicas.indexOf(r);
    try {
      const leader = await firstLeader(replicas, ns);
      const i = index(leader);
      const before = createDrivers(cluster().server, ns, 10, 'mine-a');
      await waitGone(cluster().server, before, 'pods deleted before the fault', 60_000);
      const killedAt = Date.now();
      await down(i);
      const during = createDrivers(cluster().server, ns, 30, 'mine-b');
      const lost = await leader.waitForLine(
        (l) => l.msg === 'leadership lost' && timeOf(l) >= killedAt,
        15_000,
      );
      const next = await Promise.any(
        replicas
          .filter((r) => r !== leader)
          .map((r) =>
            r
              .waitForLine((l) => l.msg === 'elected leader' && timeOf(l) >= killedAt, 60_000)
              .then((l) => ({ r, l })),
          ),
      );
      await waitGone(cluster().server, during, 'pods deleted by the new leader', 60_000);
      // The cut-off leader sent no DELETE once it could have been replaced (it fences at TTL − min(1 s, TTL/5)).
      expect(proxies[i]?.deletes(timeOf(lost))).toEqual([]);
      expect(linesSince(leader, timeOf(lost), (l) => l.outcome === 'accepted')).toEqual([]);
      const uids = [...before, ...during].map(uidOf);
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      console.info(
        `[failure] etcd leader's member killed: fenced after ${timeOf(lost) - killedAt} ms, ` +
          `new leader ${next.r.id} after ${timeOf(next.l) - killedAt} ms (TTL 3 s)`,
      );
      await up(i);
    } finally {
      await stopAll(replicas);
      await Promise.all(proxies.map((p) => p.close()));
      await allUp();
    }
  }, 180_000);

  it('quorum lost → no DELETE at all while it lasts, informers keep enqueueing, cleanup resumes after', async () => {
    const ns = 'etcd-quorum';
    const env = replicaEnv(cluster(), ns, 'ef3');
    const replicas = [1, 2].map((i) => cluster().startReplica(`q${i}`, env));
    try {
      const leader = await firstLeader(replicas, ns);
      const warm = createDrivers(cluster().server, ns, 5, 'q-warm');
      await waitGone(cluster().server, warm, 'pods deleted before the fault', 60_000);
      const lostAt = cluster().server.clock.now();
      await Promise.all([down(0), down(1)]);
      // Due one second later, in the middle of the outage.
      const bystanders = createBystanders(cluster().server, ns);
      const pods = createDrivers(cluster().server, ns, 30, 'q');
      const uids = pods.map(uidOf);
      // Informers keep running: both replicas enqueue the new pods (Redis is fine).
      await waitFor('both replicas enqueued the pods during the outage', () =>
        replicas.every(
          (r) => linesSince(r, lostAt, (l) => l.msg === 'enqueue' && l.namespace === ns).length >= 30,
        ),
      );
      // The leader notices (no keepalive) and every replica keeps failing to campaign.
      await leader.waitForLine((l) => l.msg === 'leadership lost' && timeOf(l) >= lostAt, 15_000);
      await waitFor(
        'both replicas failed to campaign twice without quorum',
        () =>
          replicas.every(
            (r) => linesSince(r, lostAt, (l) => l.msg === 'campaign failed; retrying').length >= 2,
          ),
        60_000,
        200,
      );
      const restoredAt = cluster().server.clock.now();
      // The warm pods were gone before the outage: a DELETE of theirs logged at lostAt arrived in the same
      // millisecond as the poll that saw the last one gone (the log keeps arrival times), before it.
      const warmUids = new Set(warm.map(uidOf));
      const duringOutage = cluster()
        .server.requests.recent()
        .filter(
          (r) =>
            r.verb === 'delete' && r.atMs >= lostAt && r.atMs <= restoredAt && !warmUids.has(r.uid ?? ''),
        );
      expect(duringOutage).toEqual([]);
      await allUp();
      await waitGone(cluster().server, pods, 'pods deleted once quorum is back', 60_000);
      expect(
        checkInvariants(cluster().server, ns, [...warm, ...pods].map(uidOf), { retentionMs: 1000 }),
      ).toEqual(CLEAN);
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      expect(bystandersIntact(cluster().server, bystanders)).toBe(true);
      const firstDelete = Math.min(
        ...cluster()
          .server.requests.recent()
          .filter((r) => r.verb === 'delete' && uids.includes(r.uid ?? ''))
          .map((r) => r.atMs),
      );
      console.info(
        `[failure] etcd quorum lost for ${restoredAt - lostAt} ms: 0 DELETEs; first DELETE ` +
          `${firstDelete - restoredAt} ms after the restart began`,
      );
    } finally {
      await stopAll(replicas);
      await allUp();
    }
  }, 150_000);

  it('a leader SIGTERMed logs its resignation at info, once per target, and no warning', async () => {
    const namespaces = ['term-a', 'term-b'];
    const env = replicaEnv(cluster(), namespaces[0] ?? '', 'ef4', {
      SDC_TARGETS: namespaces.map((ns) => `${cluster().context}:${ns}`).join(','),
    });
    const r = cluster().startReplica('t1', env);
    try {
      for (const ns of namespaces) await firstLeader([r], ns);
      const from = r.lines.length;
      r.kill('SIGTERM');
      expect(await r.exited).toBe(0);
      const after = r.lines.slice(from);
      expect(after.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
      const ended = after.filter((l) => l.msg === 'leadership ended');
      expect(ended.map((l) => [l.namespace, l.level, l.reason]).sort()).toEqual(
        namespaces.map((ns) => [ns, 'info', 'resigned']),
      );
    } finally {
      await stopAll([r]);
    }
  }, 60_000);
});
