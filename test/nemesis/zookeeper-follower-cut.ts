/**
 * The nemesis's `zookeeper-follower-cut` fault: a follower of the ZooKeeper ensemble cut off from its peers
 * (its quorum and election links silent) while its clients still reach it. First one target's leader is moved
 * onto that follower and the other replicas off it, so that the cut bites: the follower goes on answering that
 * leader's reads until it gives up on its own leader (10 s), while the quorum expires the leader's session
 * (3 s) and elects another. All along the cut, the harness samples every target's leader from the quorum's
 * side, for the stale-leader-delete invariant (invariants.ts).
 */

import type { LeaderSample } from '../helpers/invariants.ts';
import type { FrontedZooKeeper } from './fronts.ts';
import type { NemesisEvent } from './schedule.ts';
import type { NemesisWorld } from './world.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What the cut did: a note, why it could not be applied, and the leaders sampled during it. */
export interface FollowerCut {
  note?: string;
  notApplied?: string;
  leaders?: LeaderSample[];
}

/** Runs one follower cut to its end (healed). @throws when the world is not on ZooKeeper. */
export async function cutFollower(
  world: NemesisWorld,
  e: Extract<NemesisEvent, { kind: 'zookeeper-follower-cut' }>,
): Promise<FollowerCut> {
  const front = world.zookeeperFront;
  if (!front) throw new Error(`zookeeper-follower-cut needs ZooKeeper, not ${world.leadership}`);
  return front.serially(() => cut(world, front, e));
}

async function cut(
  world: NemesisWorld,
  front: FrontedZooKeeper,
  e: Extract<NemesisEvent, { kind: 'zookeeper-follower-cut' }>,
): Promise<FollowerCut> {
  // A restart of the ensemble (a kill just before) may still be under way: wait for it.
  const ready = performance.now() + 60_000;
  let followers = await front.followers();
  while ((!front.up || followers.length === 0) && performance.now() < ready) {
    await sleep(250);
    followers = await front.followers();
  }
  const server = followers[e.follower % Math.max(1, followers.length)];
  if (server === undefined) return { notApplied: 'no follower serving' };
  // Who leads each target, read on one session of the harness's own from the quorum's side.
  const reader = await world.zookeeperLeaders();
  if (!reader) return { notApplied: 'ZooKeeper did not answer the harness' };
  try {
    // The move is a reconnection (within the leader's session, or a new one after a kill just before); the cut
    // waits (10 s at most) until the leader has a session there and leads the namespace again.
    // After a kill the replicas campaign again: wait (15 s at most) for the namespace to have a leader.
    const led = performance.now() + 15_000;
    let leaderId = await reader.read(e.namespace).catch(() => undefined);
    while (leaderId === undefined && performance.now() < led) {
      await sleep(250);
      leaderId = await reader.read(e.namespace).catch(() => undefined);
    }
    const k = world.slots.findIndex((x) => x.id === leaderId);
    const proc = world.slots[k]?.current;
    const pinnedAt = Date.now();
    const wasOn = k >= 0 && front.connectionsOf(k, server) > 0;
    const others = [0, 1, 2].filter((x) => x !== server);
    world.slots.forEach((_, slot) => {
      front.pin(slot, slot === k ? [server] : others);
    });
    const since = (match: (l: Record<string, unknown>) => boolean) =>
      proc?.lines.some((l) => match(l) && Date.parse(String(l.time)) >= pinnedAt) ?? false;
    const settled = () =>
      front.connectionsOf(k, server) > 0 &&
      (wasOn ||
        (since((l) => l.msg === 'zookeeper session connected') &&
          since((l) => l.msg === 'elected leader' && l.namespace === e.namespace)));
    const until = performance.now() + 10_000;
    while (k >= 0 && !settled() && performance.now() < until) await sleep(100);
    const onIt = k >= 0 && settled();
    world.slots.forEach((_, slot) => {
      front.pin(slot, undefined);
    });
    front.isolate(server);
    const note = `server ${server + 1} cut off; ${onIt ? `${leaderId}, the leader of ${e.namespace}, leading on it` : `the leader of ${e.namespace} (${leaderId ?? 'none'}) not leading on it`}`;
    // Who leads, as the quorum's side says, all along the cut.
    const leaders: LeaderSample[] = [];
    const cutEnds = performance.now() + e.durationMs;
    while (performance.now() < cutEnds) {
      await Promise.all(
        world.namespaces.map(async (namespace) => {
          const fromMs = Date.now();
          try {
            const leader = await reader.read(namespace);
            leaders.push({ fromMs, toMs: Date.now(), namespace, leader });
          } catch {
            // no answer within a second: no sample
          }
        }),
      );
      await sleep(Math.min(250, Math.max(0, cutEnds - performance.now())));
    }
    return { note, leaders };
  } finally {
    reader.close();
    front.heal();
  }
}
