import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEtcdLeadership } from '../../src/leadership/etcd-leadership.ts';
import type { Leadership } from '../../src/leadership/leadership.ts';
import { type LocalEtcd, startEtcd } from '../../src/sandbox/local-services.ts';
import { FencedError } from '../../workers/cleanup-driver-pod.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let etcd: LocalEtcd;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

interface Candidate {
  id: string;
  client: Etcd3;
  leadership: Leadership;
  events: string[];
}

function candidate(id: string, prefix: string, ttlSeconds = 2): Candidate {
  const client = new Etcd3({ hosts: etcd.endpoints });
  const events: string[] = [];
  const leadership = createEtcdLeadership({
    client,
    prefix,
    replicaId: id,
    ttlSeconds,
    log: memoryLogger().log,
    now: Date.now,
    onElected: () => events.push('elected'),
    onLost: (r) => events.push(`lost: ${r}`),
  });
  return { id, client, leadership, events };
}

describe('etcd leadership (real etcd)', () => {
  it('three candidates → exactly one leader; resign → another elected within a second', async () => {
    const prefix = 'test/election-a/';
    const cs = ['r1', 'r2', 'r3'].map((id) => candidate(id, prefix));
    for (const c of cs) c.leadership.start();
    const first = await waitFor('a leader', () => cs.find((c) => c.leadership.isLeader));
    // Give the others every chance to (wrongly) become leader too.
    await waitFor(
      'all campaigned',
      async () => (await cs[0]?.client.getAll().prefix(prefix).keys())?.length === 3,
    );
    expect(cs.filter((c) => c.leadership.isLeader)).toHaveLength(1);
    expect(await first.leadership.currentLeader()).toBe(first.id);
    await first.leadership.fence(new AbortController().signal);

    const t0 = Date.now();
    await first.leadership.resign();
    const second = await waitFor('a new leader', () => cs.find((c) => c !== first && c.leadership.isLeader));
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(first.leadership.isLeader).toBe(false);
    expect(first.events).toEqual(['elected', 'lost: resigned']);
    await expect(first.leadership.fence(new AbortController().signal)).rejects.toThrow(FencedError);
    expect(cs.filter((c) => c.leadership.isLeader)).toEqual([second]);
    for (const c of cs) {
      await c.leadership.resign();
      c.client.close();
    }
  });

  it('fencing: with etcd frozen, the leader stops before its TTL runs out and fence() refuses', async () => {
    const prefix = 'test/election-b/';
    const c = candidate('solo', prefix, 2);
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);
    etcd.members[0]?.pause();
    const frozenAt = Date.now();
    try {
      await waitFor('leadership lost', () => !c.leadership.isLeader, 10_000);
      // Lost within the TTL (2 s) plus the watchdog period, long before etcd3's own 2×TTL detection.
      expect(Date.now() - frozenAt).toBeLessThan(2500);
      expect(c.leadership.stillLeader()).toBe(false);
      await expect(c.leadership.fence(new AbortController().signal)).rejects.toThrow(FencedError);
      expect(c.events[1]).toMatch(/^lost: no successful keepalive/);
    } finally {
      etcd.members[0]?.resume();
    }
    // After etcd is back, it campaigns again and is re-elected.
    await waitFor('re-elected', () => c.leadership.isLeader, 20_000);
    await c.leadership.resign();
    c.client.close();
  });
});
