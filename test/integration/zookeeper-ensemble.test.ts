/**
 * The ZooKeeper backend on a real three-server ensemble: a server killed under the replicas' sessions (those on
 * it are suspended, then connect to another server), never two leaders
 * whose `fence()` succeeds for one target in the same round; and what one replica costs the ensemble (one
 * session, its watches), counted.
 */
import { describe, expect, it } from 'vitest';
import { fourLetters } from '../../harness/sandbox/local-zookeeper.ts';
import { monotonicClock } from '../../src/clock.ts';
import type { BackendElection } from '../../src/leadership/backend.ts';
import {
  createZooKeeperLeadershipGroup,
  type ZooKeeperLeadershipGroup,
} from '../../src/leadership/zookeeper-leadership-group.ts';
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

function replica(id: string): Replica {
  const { log, lines } = memoryLogger();
  const group = createZooKeeperLeadershipGroup({
    membersDir: zookeeperMembersDir(ROOT, 'test'),
    settings: { connect: zk().connect, root: ROOT, sessionTimeoutMs: 4000 },
    replicaId: id,
    log,
    monotonicNow: monotonicClock,
  });
  const elections = targets.map((t) => {
    const e = group.election(targetKey(t), zookeeperElectionPrefix(ROOT, t), log);
    e.start();
    return e;
  });
  group.start();
  return { id, group, elections, lines };
}

const ledOnce = (rs: readonly Replica[]) =>
  targets.every((_, i) => rs.filter((r) => r.elections[i]?.isLeader).length === 1);

describe('zookeeper ensemble (three real servers)', () => {
  it('a server killed under the sessions → the replicas on it come back on another server; never two leaders', async () => {
    const rs = ['e1', 'e2', 'e3'].map(replica);
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
    }
  }, 240_000);
});
