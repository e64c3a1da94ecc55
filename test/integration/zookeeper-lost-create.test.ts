/**
 * A campaign's create applied by the quorum whose answer was lost, on a real three-server ensemble whose
 * servers reach each other through relays (harness/sandbox/zookeeper-peer-links.ts) and whose clients go
 * through answer-losing relays (test/nemesis/zookeeper-proxy.ts): the replica reconnects within its session to
 * a follower that has not applied the create yet (its leader's proposals and commits held back, its session
 * revalidations let through). It must still find its node — a `sync` before the lookup — not create a second
 * one and wait behind the first for the session's life. And a node of this replica and of its live session
 * that no term holds, ahead of its own in the line, is deleted rather than waited for.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { monotonicClock } from '../../src/clock.ts';
import { createZooKeeperLeadershipGroup } from '../../src/leadership/zookeeper/backend.ts';
import { createNode, ZK_MODE } from '../../src/leadership/zookeeper/client.ts';
import { targetKey, zookeeperElectionPrefix, zookeeperMembersDir } from '../../src/queue/job-identity.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';
import { startZooKeeperProxy } from '../nemesis/zookeeper-proxy.ts';

const ROOT = '/sdc-lost-create';
const zk = useZooKeeper({ members: 3, peerLinks: true });

/** ZooKeeper's opcodes: create, create2, createContainer, createTTL; and sync. */
const CREATES = new Set([1, 15, 19, 21]);
const SYNC = 9;

/** A replica with one election (a plain one: it campaigns as soon as it starts), not started. */
function replica(id: string, connect: string, namespace: string) {
  const { log, lines } = memoryLogger();
  const group = createZooKeeperLeadershipGroup({
    membersDir: zookeeperMembersDir(ROOT, 'c1'),
    settings: { connect, root: ROOT, sessionTimeoutMs: 6000 },
    replicaId: id,
    log,
    monotonicNow: monotonicClock,
    balanced: false,
  });
  const target = { cluster: 'c1', context: 'ctx', namespace };
  const prefix = zookeeperElectionPrefix(ROOT, target);
  const election = group.election(targetKey(target), prefix, log);
  group.start();
  return { group, election, lines, dir: prefix.replace(/\/$/, '') };
}

describe('zookeeper: a create applied, its answer lost', () => {
  it('reconnected within the session to a follower that has not applied it → it finds its node after a sync, creates no second one, and leads', async () => {
    const links = zk().links;
    if (!links) throw new Error('the ensemble has no peer links');
    const leader = await waitFor('a leading server', () => zk().leader());
    const [f1, f2] = [0, 1, 2].filter((i) => i !== leader) as [number, number];
    let release = () => {};
    /** Requests the replica sends to the lagging follower, by opcode. */
    const toF2: number[] = [];
    const p1 = await startZooKeeperProxy(zk().members[f1]?.port);
    // Refused at first, so that the replica starts on the first follower.
    const p2 = await startZooKeeperProxy(undefined, {
      onRequest: (op) => {
        toF2.push(op);
        // Once the replica asks the lagging follower for a sync or a create, it catches up: a sync waits for
        // the held commits anyway, and a second create would (ZooKeeper answers a session in order).
        if (op === SYNC || CREATES.has(op)) release();
      },
    });
    const r = replica('lc', `${p1.connect},${p2.connect}`, 'lost-create');
    try {
      await waitFor('connected through the first follower', () => r.group.session.connection, 30_000);
      p2.repoint(zk().members[f2]?.port);
      const lag = links.lag(f2, leader);
      release = () => lag.release();
      // The safety net: the leader gives up on a follower that has not acknowledged for syncLimit ticks (5 s).
      const safety = setTimeout(() => lag.release(), 4000);
      const lost = p1.dropAnswers({ count: 1, durationMs: 20_000, holdMs: 300, thenRefuse: true });
      r.election.start();
      expect(await lost.done).toBe(1);
      const cutAt = performance.now();
      await waitFor('elected', () => r.election.isLeader, 30_000);
      const electedMs = Math.round(performance.now() - cutAt);
      clearTimeout(safety);
      // The follower lagged (its leader's proposals and commits held back), the same leader all along.
      expect(
        { leader: await zk().leader(), held: lag.stats.held > 0 },
        `lag ${JSON.stringify(lag.stats)}, opcodes to the second follower ${toF2.join(' ')}`,
      ).toEqual({ leader, held: true });
      // The same session, reconnected to the second follower, one node: the one whose answer was lost.
      expect(r.group.session.sessionsOpened).toBe(1);
      const c = r.group.session.connection;
      if (!c) throw new Error('not connected');
      await c.handle.sync(r.dir);
      expect(await c.handle.get_children(r.dir, false)).toHaveLength(1);
      expect(toF2.filter((op) => CREATES.has(op))).toEqual([]);
      console.info(
        `[zookeeper] a create's answer lost, reconnected to a follower ${lag.stats.held} proposals and commits behind: found after a sync, elected ${electedMs} ms after the connection was cut`,
      );
    } finally {
      await r.group.close();
      await Promise.all([p1.close(), p2.close()]);
    }
  }, 120_000);

  it('a node of this replica and of its live session ahead of its own (a lost create not found) → deleted, and the replica leads', async () => {
    const r = replica('orphan', zk().connect, 'orphan');
    try {
      const c = await waitFor('connected', () => r.group.session.connection, 30_000);
      // A create of this session whose answer never came: the lookup of a later attempt did not find it.
      const orphan = await createNode(
        c.handle,
        `${r.dir}/_c_${randomUUID()}-orphan-latch-`,
        'orphan',
        ZK_MODE.ephemeralSequential,
        r.group.session.acl,
      );
      r.election.start();
      await waitFor('elected', () => r.election.isLeader, 20_000);
      const names = await c.handle.get_children(r.dir, false);
      expect(names).toHaveLength(1);
      expect(names).not.toContain(orphan.split('/').pop());
      expect(r.lines.filter((l) => l.msg === 'deleting a candidate node no term holds')).toHaveLength(1);
    } finally {
      await r.group.close();
    }
  }, 60_000);
});
