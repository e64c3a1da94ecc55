/**
 * The ZooKeeper backend on a real three-server ensemble: a server killed under the replicas' sessions (those on
 * it are suspended, then connect to another server), never two leaders whose `fence()` succeeds for one target
 * in the same round; a reconnection within the session keeps every election's node (the view keeps its
 * members until it has read them again, so the balancer withdraws nothing); and what one replica costs the
 * ensemble (one session, its watches), counted.
 */
import { describe, expect, it } from 'vitest';
import { fourLetters } from '../../harness/sandbox/local-zookeeper.ts';
import { monotonicClock } from '../../src/clock.ts';
import type { BackendElection } from '../../src/leadership/backend.ts';
import {
  createZooKeeperLeadershipGroup,
  type ZooKeeperLeadershipGroup,
} from '../../src/leadership/zookeeper/backend.ts';
import { createZkHandle } from '../../src/leadership/zookeeper/client.ts';
import { targetKey, zookeeperElectionPrefix, zookeeperMembersDir } from '../../src/queue/job-identity.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';

const ROOT = '/sdc-ensemble';
const zk = useZooKeeper({ members: 3 });

interface Replica {
  id: string;
  group: ZooKeeperLeadershipGroup;
  elections: BackendElection[];
  lines: Record<string, unknown>[];
}

const targets = Array.from({ length: 6 }, (_, i) => ({
  cluster: 'test',
  context: 'ctx',
  namespace: `ens-${i}`,
}));

function replica(id: string, root = ROOT): Replica {
  const { log, lines } = memoryLogger();
  const group = createZooKeeperLeadershipGroup({
    membersDir: zookeeperMembersDir(root, 'test'),
    settings: { connect: zk().connect, root, sessionTimeoutMs: 4000 },
    replicaId: id,
    log,
    monotonicNow: monotonicClock,
  });
  const elections = targets.map((t) => {
    const e = group.election(targetKey(t), zookeeperElectionPrefix(root, t), log);
    e.start();
    return e;
  });
  group.start();
  return { id, group, elections, lines };
}

/** Every member serving again (a member killed by a case is started again, on its data dir and port). */
async function restartDead(): Promise<void> {
  for (const m of zk().members)
    if (!/Mode: (leader|follower)/.test(await fourLetters(m.port, 'srvr'))) await m.restart();
}

/** Every target's candidate nodes under `root` (names, by sequence), read straight from the ensemble. */
async function electionNodes(root: string): Promise<string[][]> {
  const h = createZkHandle(zk().connect, 4000);
  const ready = new Promise<void>((resolve) => h.on('connect', () => resolve()));
  h.init({});
  try {
    await ready;
    const out: string[][] = [];
    for (const t of targets) {
      const dir = zookeeperElectionPrefix(root, t).replace(/\/$/, '');
      await h.sync(dir);
      const names = await h.get_children(dir, false);
      out.push(names.sort((a, b) => a.slice(-10).localeCompare(b.slice(-10))));
    }
    return out;
  } finally {
    h.close();
  }
}

const ledOnce = (rs: readonly Replica[]) =>
  targets.every((_, i) => rs.filter((r) => r.elections[i]?.isLeader).length === 1);

describe('zookeeper ensemble (three real servers)', () => {
  it('a server killed under the sessions → the replicas on it come back on another server; never two leaders', async () => {
    const rs = ['e1', 'e2', 'e3'].map((id) => replica(id));
    const doubles: string[] = [];
    let rounds = 0;
    let running = true;
    const fencing = (async () => {
      while (running) {
        await Promise.all(
          targets.map(async (_, i) => {
            const ok = await Promise.all(
              rs.map((r) =>
                r.elections[i]
                  ?.fence(AbortSignal.timeout(2000))
                  .then(() => r.id)
                  .catch(() => undefined),
              ),
            );
            const winners = ok.filter((x) => x !== undefined);
            if (winners.length > 1) doubles.push(`target ${i}: ${winners.join(' and ')}`);
          }),
        );
        rounds += 1;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    try {
      await waitFor(
        'balanced: 2 each',
        () => rs.every((r) => r.elections.filter((e) => e.isLeader).length === 2) && ledOnce(rs),
      );
      // The cost of a replica: one session; watches: members (1 child + 3 data) and 6 elections.
      for (const r of rs) {
        expect(r.group.session.sessionsOpened).toBe(1);
        expect(r.group.view.members()).toEqual(['e1', 'e2', 'e3']);
      }
      const watchesBefore = rs.map((r) => r.group.view.watchesSet);
      console.info(
        `[zookeeper] watches set per replica at start: ${watchesBefore.join(', ')} (6 targets, 3 members)`,
      );
      // The server most replicas are connected to (its `cons` lists their sessions) killed, quorum kept: the
      // replicas on it move to another server.
      const sessionsOn = await Promise.all(
        zk().members.map(
          async (m) => (await fourLetters(m.port, 'cons')).match(/sid=0x(?!f{16})[0-9a-f]+/g)?.length ?? 0,
        ),
      );
      const killed = zk().members[sessionsOn.indexOf(Math.max(...sessionsOn))];
      await killed?.kill();
      const before = rounds;
      await waitFor(
        `a server with ${Math.max(...sessionsOn)} sessions down: every session connected, every target led once`,
        () => rs.every((r) => r.group.session.connection !== undefined) && ledOnce(rs),
        45_000,
      );
      await waitFor('a few more fence rounds', () => rounds > before + 10, 20_000);
      running = false;
      await fencing;
      expect(doubles).toEqual([]);
      const lost = rs.map((r) => r.lines.filter((l) => l.msg === 'zookeeper connection lost').length);
      expect(lost.reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(1);
      const count = (r: Replica, newSession: boolean) =>
        r.lines.filter((l) => l.msg === 'zookeeper session connected' && l.newSession === newSession).length;
      console.info(
        `[zookeeper] one server killed: connections lost per replica ${rs.map((r) => r.lines.filter((l) => l.msg === 'zookeeper connection lost').length).join(', ')}, sessions per replica ${rs.map((r) => count(r, true)).join(', ')}, ` +
          `reconnections within the session ${rs.map((r) => count(r, false)).join(', ')}`,
      );
    } finally {
      running = false;
      await fencing;
      for (const r of rs) await r.group.close();
      await restartDead();
    }
  }, 240_000);

  it('the server a replica is connected to killed → it reconnects within its session: every election keeps its node, no other replica is elected', async () => {
    await restartDead();
    const rs = ['k1', 'k2', 'k3'].map((id) => replica(id, '/sdc-ensemble-blip'));
    try {
      await waitFor(
        'balanced: 2 each',
        () => rs.every((r) => r.elections.filter((e) => e.isLeader).length === 2) && ledOnce(rs),
        30_000,
      );
      const before = await electionNodes('/sdc-ensemble-blip');
      // Balanced: each election has one candidate, its leader's node.
      expect(before.every((names) => names.length === 1)).toBe(true);
      const elected = (r: Replica) =>
        r.lines.filter((l) => l.msg === 'elected leader').map((l) => String(l.node));
      const electedBefore = rs.map((r) => elected(r).length);
      const sessionsOn = await Promise.all(
        zk().members.map(
          async (m) => (await fourLetters(m.port, 'cons')).match(/sid=0x(?!f{16})[0-9a-f]+/g)?.length ?? 0,
        ),
      );
      const killed = zk().members[sessionsOn.indexOf(Math.max(...sessionsOn))];
      const killedAt = performance.now();
      await killed?.kill();
      const lost = (r: Replica) => r.lines.some((l) => l.msg === 'zookeeper connection lost');
      await waitFor('a replica lost its connection', () => rs.some(lost), 30_000);
      await waitFor(
        'every replica connected again, every member and target seen, every target led once',
        () =>
          rs.every((r) => r.group.session.connection !== undefined && r.group.view.members().length === 3) &&
          ledOnce(rs) &&
          rs.every((r) => r.elections.filter((e) => e.isLeader).length === 2),
        45_000,
      );
      const backMs = Math.round(performance.now() - killedAt);
      expect(await electionNodes('/sdc-ensemble-blip')).toEqual(before);
      for (const [i, r] of rs.entries()) {
        // The same session: no new one opened. A term that ended with the connection starts again on the
        // same node; no other replica's term starts.
        expect(r.group.session.sessionsOpened).toBe(1);
        const again = elected(r).slice(electedBefore[i]);
        if (!lost(r)) expect(again).toEqual([]);
        for (const node of again)
          expect(before.flat().map((n) => n.split('/').pop())).toContain(node.split('/').pop());
      }
      console.info(
        `[zookeeper] the server of ${Math.max(...sessionsOn)} sessions killed: ${rs.filter(lost).length} replica(s) reconnected within their session, every target led again ${backMs} ms after the kill, every election's node kept`,
      );
    } finally {
      for (const r of rs) await r.group.close();
      await restartDead();
    }
  }, 240_000);
});
