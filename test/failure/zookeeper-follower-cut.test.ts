/**
 * A ZooKeeper follower cut off from its peers while its clients still reach it, on a real three-server
 * ensemble whose servers reach each other through relays (harness/sandbox/zookeeper-peer-links.ts). The
 * cut-off follower goes on answering reads from what it has until it gives up on its leader (`syncLimit ×
 * tickTime`, 10 s here), while the quorum expires the sessions of the clients on it after their timeout (3 s)
 * and elects other leaders. A fence is a `sync` then a read: the sync goes through the leader, so a replica on
 * the cut-off follower cannot confirm its node from the cut on.
 *
 * In-process elections first (never two replicas whose fences succeed in one round), then replica processes
 * deleting pods due all along the cut (no DELETE from the cut-off leader once another is elected).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { fourLetters } from '../../harness/sandbox/local-zookeeper.ts';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { monotonicClock } from '../../src/clock.ts';
import { assignTargets } from '../../src/leadership/assignment.ts';
import type { BackendElection } from '../../src/leadership/backend.ts';
import {
  createZooKeeperLeadershipGroup,
  type ZooKeeperLeadershipGroup,
} from '../../src/leadership/zookeeper/backend.ts';
import { targetKey, zookeeperElectionPrefix, zookeeperMembersDir } from '../../src/queue/job-identity.ts';
import { deletesPer } from '../helpers/cluster.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  replicaEnv,
  startApiProxy,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();
/** A follower gives up on its leader after 20 ticks of 500 ms: 10 s, well past the sessions' 3 s. */
const zk = useZooKeeper({ members: 3, peerLinks: true, syncLimit: 20 });

const serverAddress = (i: number) => `127.0.0.1:${zk().members[i]?.port}`;
const serving = async (i: number) =>
  /Mode: (leader|follower)/.test(await fourLetters(zk().members[i]?.port ?? 0, 'srvr'));

/** Picks a follower of the ensemble; the other two servers hold the quorum once it is cut off. */
async function pickFollower(): Promise<{ follower: number; others: number[] }> {
  await waitFor('every server serving', async () =>
    (await Promise.all([0, 1, 2].map(serving))).every(Boolean),
  );
  const leader = await waitFor('a leading server', () => zk().leader());
  const follower = [0, 1, 2].find((i) => i !== leader) as number;
  return { follower, others: [0, 1, 2].filter((i) => i !== follower) };
}

/** Cuts `follower` off, runs `during`, then heals and waits until it serves again. */
async function cutOff<T>(follower: number, during: () => Promise<T>): Promise<T> {
  const links = zk().links;
  if (!links) throw new Error('the ensemble has no peer links');
  links.isolate(follower);
  try {
    return await during();
  } finally {
    links.heal();
    await waitFor('the follower back in the ensemble', () => serving(follower), 60_000);
  }
}

/** The cut-off follower answers its clients until it gives up on its leader (10 s after the cut). */
const gaveUp = (follower: number) =>
  waitFor(
    'the cut-off follower gave up on its leader (no longer serving)',
    async () => !(await serving(follower)),
    30_000,
  );

interface Replica {
  id: string;
  group: ZooKeeperLeadershipGroup;
  elections: BackendElection[];
}

describe('zookeeper: a follower cut off from its peers, its clients still on it', () => {
  it('the leader pinned to that follower → its fences fail from the cut on; never two replicas whose fences succeed in one round', async () => {
    const ROOT = '/sdc-follower-cut';
    const targets = Array.from({ length: 3 }, (_, i) => ({
      cluster: 'c1',
      context: 'ctx',
      namespace: `cut-${i}`,
    }));
    /** A replica campaigning for every target (a plain election: the first candidate leads) through `servers`. */
    const replica = (id: string, servers: readonly number[]): Replica => {
      const { log } = memoryLogger();
      const group = createZooKeeperLeadershipGroup({
        membersDir: zookeeperMembersDir(ROOT, 'c1'),
        settings: { connect: servers.map(serverAddress).join(','), root: ROOT, sessionTimeoutMs: 3000 },
        replicaId: id,
        log,
        monotonicNow: monotonicClock,
        balanced: false,
      });
      const elections = targets.map((t) => {
        const e = group.election(targetKey(t), zookeeperElectionPrefix(ROOT, t), log);
        e.start();
        return e;
      });
      group.start();
      return { id, group, elections };
    };
    const { follower, others } = await pickFollower();
    const a = replica('pinned', [follower]);
    const rs: Replica[] = [a];
    /** Rounds where two replicas passed their fences for one target (the first few). */
    const doubles: string[] = [];
    /** Fences of the pinned replica that started after the other replica was elected for that target. */
    const lateFences: string[] = [];
    const electedAt = new Map<number, number>();
    let rounds = 0;
    let running = true;
    const fencing = (async () => {
      while (running) {
        const round = rounds;
        await Promise.all(
          targets.map(async (_, i) => {
            const startedAt = performance.now();
            const ok = await Promise.all(
              rs.map((r) =>
                r.elections[i]
                  ?.fence(AbortSignal.timeout(2000))
                  .then(() => r.id)
                  .catch(() => undefined),
              ),
            );
            const winners = ok.filter((x) => x !== undefined);
            if (winners.length > 1 && doubles.length < 10)
              doubles.push(`round ${round}, target ${i}: ${winners.join(' and ')}`);
            const other = electedAt.get(i);
            if (winners.includes(a.id) && other !== undefined && startedAt > other && lateFences.length < 10)
              lateFences.push(`round ${round}, target ${i}`);
          }),
        );
        rounds += 1;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    try {
      await waitFor(
        'the pinned replica leads every target',
        () => a.elections.every((e) => e.isLeader),
        30_000,
      );
      const b = replica('quorum-side', others);
      rs.push(b);
      b.elections.forEach((e, i) => {
        e.addEventHandler({ onElected: () => electedAt.set(i, performance.now()), onLost: () => undefined });
      });
      await waitFor(
        'the other replica in line for every target',
        () => targets.every((t) => b.group.view.candidates(zookeeperElectionPrefix(ROOT, t)).length === 2),
        30_000,
      );
      const before = rounds;
      await waitFor('a few fence rounds with both replicas', () => rounds > before + 5, 20_000);
      await cutOff(follower, async () => {
        await waitFor(
          'the other replica elected for every target (the quorum expired the pinned one)',
          () => b.elections.every((e) => e.isLeader),
          30_000,
        );
        // The fences go on through the whole window in which the follower still answers.
        await gaveUp(follower);
        const after = rounds;
        await waitFor('a few more fence rounds', () => rounds > after + 5, 20_000);
      });
      running = false;
      await fencing;
      console.info(
        `[zookeeper] a follower cut off: ${rounds} fence rounds, ${doubles.length} with two fences passed, ${lateFences.length} fences of the cut-off leader passed after the other's election`,
      );
      expect(doubles).toEqual([]);
      expect(lateFences).toEqual([]);
    } finally {
      running = false;
      await fencing;
      for (const r of rs) await r.group.close();
    }
  }, 180_000);

  it('replica processes, the leader on the cut-off follower, pods due all along → no DELETE from it once the other is elected; each pod deleted once', async () => {
    const ns = 'zk-cut';
    const server = cluster().server;
    const { follower, others } = await pickFollower();
    // The replica assigned the target (the balance's rule, by replica id) is the one pinned to the follower.
    const ids = ['zc1', 'zc2'];
    const owner = assignTargets(
      [targetKey({ cluster: cluster().clusterName, namespace: ns })],
      ids,
    ).owners.get(targetKey({ cluster: cluster().clusterName, namespace: ns }));
    const [pinnedId, otherId] = owner === ids[0] ? ids : [ids[1], ids[0]];
    const [p1, p2] = await Promise.all([startApiProxy(server), startApiProxy(server)]);
    const base = replicaEnv(cluster(), ns, 'zkcut', { SDC_ETCD_ENDPOINTS: '' });
    const pinned = cluster().startReplica(pinnedId as string, {
      ...base,
      SDC_ZOOKEEPER: serverAddress(follower),
      ...p1.env,
    });
    const other = cluster().startReplica(otherId as string, {
      ...base,
      SDC_ZOOKEEPER: others.map(serverAddress).join(','),
      ...p2.env,
    });
    const replicas: ReplicaProcess[] = [pinned, other];
    const pods: V1Pod[] = [];
    let creating = true;
    try {
      expect((await firstLeader(replicas, ns)).id).toBe(pinned.id);
      // A driver pod finishes every 200 ms, due at once: the leader has DELETEs to send all along the cut.
      const created = (async () => {
        for (let n = 0; creating; n++) {
          pods.push(...createDrivers(server, ns, 1, `cut-${n}`, 10_000));
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      })();
      await waitFor('the pinned leader deleting', () => p1.deletes().length >= 3, 30_000);
      const cutAt = Date.now();
      const electedAt = await cutOff(follower, async () => {
        const line = await other.waitForLine(
          (l) => l.msg === 'elected leader' && l.namespace === ns && timeOf(l) >= cutAt,
          30_000,
        );
        await gaveUp(follower);
        return timeOf(line);
      });
      creating = false;
      await created;
      const uids = pods.map(uidOf);
      await waitGone(server, pods, 'every pod deleted', 60_000);
      const late = p1.deletes(electedAt);
      console.info(
        `[failure] zookeeper follower cut: ${uids.length} pods, the other replica elected ${electedAt - cutAt} ms after the cut; ` +
          `${p1.deletes(cutAt).length} DELETEs from the pinned leader after the cut, ${late.length} after the election`,
      );
      expect(late).toEqual([]);
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 1));
      expect(checkInvariants(server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
    } finally {
      creating = false;
      await stopAll(replicas);
      await Promise.all([p1.close(), p2.close()]);
    }
  }, 240_000);
});
