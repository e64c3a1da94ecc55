import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CleanupJobData, createCleanupQueue } from '../../src/queue/cleanup-queue.ts';
import { type LocalService, startRedis } from '../../src/sandbox/local-services.ts';
import { memoryLogger } from '../helpers/log.ts';

let redis: LocalService;
const conns: Redis[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const c of conns) c.disconnect();
  await redis?.stop();
});

function replicaQueue(prefix: string) {
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  conns.push(connection);
  return createCleanupQueue({
    target: { context: 'arn:aws:eks:x:1:cluster/a', namespace: 'spark' },
    connection,
    prefix,
    tombstoneTtlMs: 60_000,
    log: memoryLogger().log,
    now: Date.now,
  });
}

const data = (uid: string): CleanupJobData => ({
  context: 'arn:aws:eks:x:1:cluster/a',
  namespace: 'spark',
  pod: `p-${uid.slice(0, 4)}`,
  uid,
  deadlineMs: Date.now() + 60_000,
  finishedAtMs: Date.now(),
  enqueuedBy: 'r',
});

describe('cleanup queue (real Redis)', () => {
  it('N replicas adding the same pod → exactly one delayed job', async () => {
    const replicas = [replicaQueue('t1'), replicaQueue('t1'), replicaQueue('t1')];
    const uid = '0b1c1a52-2c4e-4c55-9a0e-000000000001';
    await Promise.all(replicas.flatMap((q) => [q.enqueue(data(uid)), q.enqueue(data(uid))]));
    const q = replicas[0]?.queue;
    expect(await q?.getDelayedCount()).toBe(1);
    expect((await q?.getJob(uid))?.data.uid).toBe(uid);
    // Sequential adds after the first answer 'exists' without writing.
    expect(await replicas[1]?.enqueue(data(uid))).toBe('exists');
    // The queue name is a Redis Cluster hash tag: every key of the queue shares one slot.
    const keys = await conns[0]?.keys('t1:*');
    expect(keys?.length).toBeGreaterThan(0);
    for (const k of keys ?? []) expect(k).toMatch(/^t1:\{arn%3Aaws%3Aeks%3Ax%3A1%3Acluster%2Fa\.spark\}:/);
  });

  it('cancel removes the pending job and tombstones the UID for every replica', async () => {
    const [a, b] = [replicaQueue('t2'), replicaQueue('t2')];
    const uid = '0b1c1a52-2c4e-4c55-9a0e-000000000002';
    expect(await a?.enqueue(data(uid))).toBe('added');
    expect(await b?.cancel(uid)).toBe('removed');
    expect(await a?.queue.getJob(uid)).toBeUndefined();
    expect(await a?.enqueue(data(uid))).toBe('tombstoned');
    expect(await b?.enqueue(data(uid))).toBe('tombstoned');
    expect(await a?.queue.getDelayedCount()).toBe(0);
    const ttl = await conns[0]?.pttl(`t2:${a?.name}:tombstone:${uid}`);
    expect(ttl).toBeGreaterThan(55_000);
  });

  it('a cancel racing with adds never leaves a pending job', async () => {
    const qs = [replicaQueue('t3'), replicaQueue('t3'), replicaQueue('t3')];
    for (let i = 0; i < 20; i++) {
      const uid = `0b1c1a52-2c4e-4c55-9a0e-1000000000${String(i).padStart(2, '0')}`;
      await Promise.all([qs[0]?.enqueue(data(uid)), qs[1]?.cancel(uid), qs[2]?.enqueue(data(uid))]);
    }
    expect(await qs[0]?.queue.getDelayedCount()).toBe(0);
  });
});
