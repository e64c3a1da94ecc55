import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalEtcd, startEtcd } from '../../harness/sandbox/local-services.ts';
import { monotonicClock } from '../../src/clock.ts';
import { assignTargets } from '../../src/leadership/assignment.ts';
import { createEtcdLeadershipGroup, type EtcdLeadershipGroup } from '../../src/leadership/etcd/backend.ts';
import type { EtcdLeadership } from '../../src/leadership/etcd/election.ts';
import { electionPrefix, membersPrefix, targetKey } from '../../src/queue/job-identity.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let etcd: LocalEtcd;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

const TTL_SECONDS = 2;

interface TestReplica {
  id: string;
  client: Etcd3;
  group: EtcdLeadershipGroup;
  elections: EtcdLeadership[];
  /** Reasons of the terms that ended. */
  ended: string[];
  /** Terms won, per election (by index). */
  elected: number[];
}

/** The targets `ctx:bal-<name>-0` … of a test. */
const targetsOf = (name: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ cluster: 'test', context: 'ctx', namespace: `bal-${name}-${i}` }));

/** Starts a replica; `ready` is its readiness probe for every target (default: always ready). */
function startReplica(id: string, targets: ReturnType<typeof targetsOf>, ready?: () => boolean): TestReplica {
  const client = new Etcd3({ hosts: etcd.endpoints });
  const log = memoryLogger().log;
  const group = createEtcdLeadershipGroup({
    membersPrefix: membersPrefix('test'),
    client,
    replicaId: id,
    ttlSeconds: TTL_SECONDS,
    log,
    monotonicNow: monotonicClock,
  });
  const ended: string[] = [];
  const elected = targets.map(() => 0);
  const elections = targets.map((t, i) => {
    const e = group.election(targetKey(t), electionPrefix(t), log);
    e.addEventHandler({
      onElected: () => {
        elected[i] = (elected[i] ?? 0) + 1;
      },
      onLost: (r) => ended.push(r),
    });
    if (ready) e.readyWhen(ready);
    e.start();
    return e;
  });
  group.start();
  return { id, client, group, elections, ended, elected };
}

async function stopReplica(r: TestReplica): Promise<void> {
  await r.group.close();
  r.client.close();
}

/** Leaderships per replica id (its elections that lead). */
const leading = (rs: readonly TestReplica[]) =>
  Object.fromEntries(rs.map((r) => [r.id, r.elections.filter((e) => e.isLeader).length]));

/** Targets led by exactly one replica (as the replicas themselves say). */
const ledOnce = (rs: readonly TestReplica[], t: number) =>
  Array.from({ length: t }, (_, i) => rs.filter((r) => r.elections[i]?.isLeader).length).every(
    (n) => n === 1,
  );

/** The leases etcd holds now (all of them: each test's replicas are the only clients of this etcd). */
async function _leaseCount(client: Etcd3): Promise<number> {
  return (await client.leaseClient.leaseLeases()).leases.length;
}

/**
 * Runs rounds of `fence()` on every replica for every target until stopped: in each round, for each target,
 * every replica fences at once; a round where two succeed for one target is recorded as a double leader.
 */
function _fenceRounds(rs: () => readonly TestReplica[], t: number) {
  const doubles: string[] = [];
  let rounds = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      const replicas = rs();
      await Promise.all(
        Array.from({ length: t }, async (_, i) => {
          const ok = await Promise.all(
            replicas.map((r) =>
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
  return {
    doubles,
    get rounds() {
      return rounds;
    },
    async stop() {
      running = false;
      await done;
    },
  };
}

describe('balanced leadership (real etcd)', () => {
  it('replicas serving different targets (two deployments on one etcd) are balanced apart, each with its peers', async () => {
    const xs = targetsOf('apart-x', 4);
    const ys = targetsOf('apart-y', 6);
    const rs = [startReplica('x1', xs), startReplica('x2', xs), startReplica('y1', ys)];
    try {
      await waitFor('x1 and x2 lead 2 each, y1 leads its 6', () => {
        const l = leading(rs);
        return l.x1 === 2 && l.x2 === 2 && l.y1 === 6;
      });
      expect(rs[0]?.group.balance()).toMatchObject({ members: ['x1', 'x2'], targets: 4, cap: 2 });
      expect(rs[2]?.group.balance()).toMatchObject({ members: ['y1'], targets: 6, cap: 6 });
    } finally {
      for (const r of rs) await stopReplica(r);
    }
  });

  it("a candidate key of a replica's lease that no term holds (a put applied after its campaign gave up) is deleted", async () => {
    const T = 4;
    const targets = targetsOf('stray', T);
    const rs = [startReplica('s1', targets), startReplica('s2', targets)];
    const probe = new Etcd3({ hosts: etcd.endpoints });
    try {
      await waitFor('2 each', () => Object.values(leading(rs)).every((n) => n === 2) && ledOnce(rs, T));
      const [s1, s2] = rs as [TestReplica, TestReplica];
      const i = s1.elections.findIndex((e) => e.isLeader);
      const target = targets[i];
      const lease = s2.group.session.lease;
      if (!target || !lease) throw new Error('no target led by s1, or no lease of s2');
      // As the answer of s2's put lost after its campaign for this target gave up: its key, on its lease.
      const stray = `${electionPrefix(target)}${lease.id}`;
      const endedBefore = rs.map((r) => r.ended.length);
      await probe.put(stray).value('s2').lease(lease.id).exec();
      await waitFor('the stray key deleted', async () => (await probe.get(stray).string()) === null);
      expect(s1.elections[i]?.isLeader).toBe(true);
      expect(rs.flatMap((r, n) => r.ended.slice(endedBefore[n]))).toEqual([]);
    } finally {
      for (const r of rs) await stopReplica(r);
      probe.close();
    }
  });

  it('a leader that steps down not ready for its target (the self-check) is not elected again: the next owner leads; it campaigns again once ready', async () => {
    const [target] = targetsOf('stuck', 1);
    if (!target) throw new Error('no target');
    const label = targetKey(target);
    const ids = ['k1', 'k2', 'k3'];
    const notReady = new Set<string>();
    const rs = ids.map((id) => startReplica(id, [target], () => !notReady.has(id)));
    const byId = (id: string | undefined) => rs.find((r) => r.id === id);
    try {
      const owner = byId(assignTargets([label], ids).owners.get(label));
      const next = byId(
        assignTargets(
          [label],
          ids.filter((id) => id !== owner?.id),
        ).owners.get(label),
      );
      if (!owner || !next) throw new Error('no owner');
      await waitFor(
        'the owner leads, every replica a member',
        () => owner.elections[0]?.isLeader && rs.every((r) => r.group.balance().members.length === 3),
      );
      const electedBefore = owner.elected[0];
      const nextEndedBefore = next.ended.length;
      // What the target cleaner does when its self-check finds it stuck: not ready, then step down.
      notReady.add(owner.id);
      owner.elections[0]?.stepDown('self-check: leader made no progress');
      await waitFor('the next owner leads', () => next.elections[0]?.isLeader);
      await waitFor('every replica sees the old owner not ready', () =>
        rs.every((r) => r.group.balance().notReady[label]?.includes(owner.id)),
      );
      // Not elected again meanwhile, and not in the line.
      expect(owner.elected[0]).toBe(electedBefore);
      expect(owner.elections[0]?.wanted).toBe(false);
      notReady.delete(owner.id);
      await waitFor('the owner leads again once ready', () => owner.elections[0]?.isLeader);
      expect(next.ended.slice(nextEndedBefore)).toEqual([
        `stepped down: handing over to ${owner.id}, its assigned replica`,
      ]);
    } finally {
      for (const r of rs) await stopReplica(r);
    }
  });
});
