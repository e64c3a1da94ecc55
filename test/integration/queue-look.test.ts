/**
 * The self-check's look at a target's queue (src/queue/queue-look.ts) on real Redis and BullMQ: a delayed job
 * not yet due, the same job due and not promoted (no worker), a due job waiting, a UID without a job.
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type LocalService, startRedis } from '../../harness/sandbox/local-services.ts';
import { createCleanupQueue } from '../../src/queue/cleanup-queue.ts';
import { lookAtQueue } from '../../src/queue/queue-look.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let redis: LocalService;
let connection: Redis;
beforeAll(async () => {
  redis = await startRedis();
  connection = new Redis(redis.url, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  connection?.disconnect();
  await redis?.stop();
});

it('delayed and not due → nothing to take; past due → how long; promoted → waiting; no job → missing', async () => {
  const queue = createCleanupQueue({
    target: { cluster: 'c1', context: 'look', namespace: 'spark' },
    connection,
    prefix: 'look',
    tombstoneTtlMs: 60_000,
    log: memoryLogger().log,
    now: Date.now,
  });
  try {
    const uid = '0b1c1a52-2c4e-4c55-9a0e-00000000aaaa';
    const absent = '0b1c1a52-2c4e-4c55-9a0e-00000000bbbb';
    const now = Date.now();
    await queue.enqueue({
      context: 'look',
      namespace: 'spark',
      pod: 'p',
      uid,
      deadlineMs: now + 60_000,
      finishedAtMs: now,
      enqueuedBy: 'r',
    });
    const q = queue.bullQueue;
    const notDue = await lookAtQueue(q, connection, [uid, absent], now);
    expect(notDue.waiting).toBe(0);
    expect(notDue.missing).toBe(1);
    // Due in about 60 s (the delay is from the enqueue, within a second of `now`).
    expect(notDue.earliestDelayedPastDueMs).toBeLessThanOrEqual(-59_000);
    expect(notDue.earliestDelayedPastDueMs).toBeGreaterThan(-61_000);
    // Two minutes later by the wall clock, no worker has promoted it: 60 s past due.
    const late = await lookAtQueue(q, connection, [uid], now + 120_000);
    expect(late.earliestDelayedPastDueMs).toBeGreaterThanOrEqual(59_000);
    expect(late.missing).toBe(0);
    await q.promoteJobs();
    expect(await lookAtQueue(q, connection, [uid], now)).toEqual({
      waiting: 1,
      earliestDelayedPastDueMs: undefined,
      missing: 0,
    });
  } finally {
    await queue.close();
  }
});

it('a job that completed without deleting (skipped: the pod was not eligible then, is overdue now) counts as missing; one that deleted does not', async () => {
  const target = { cluster: 'look', context: 'look', namespace: 'skip' };
  const queue = createCleanupQueue({
    target,
    connection,
    prefix: 'look2',
    tombstoneTtlMs: 60_000,
    log: memoryLogger().log,
    now: Date.now,
  });
  const skipped = '0b1c1a52-2c4e-4c55-9a0e-00000000cccc';
  const deleted = '0b1c1a52-2c4e-4c55-9a0e-00000000dddd';
  const workerConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const worker = new Worker(
    queue.name,
    async (job) =>
      job.id === skipped
        ? { outcome: 'skipped', reason: 'not-selected' }
        : { outcome: 'accepted', latenessMs: 0 },
    { connection: workerConnection, prefix: 'look2' },
  );
  try {
    for (const uid of [skipped, deleted])
      await queue.enqueue({ ...target, pod: `p-${uid.slice(-4)}`, uid, deadlineMs: Date.now() - 1 });
    await waitFor('both completed', async () => (await queue.bullQueue.getCompletedCount()) === 2);
    const look = await lookAtQueue(queue.bullQueue, connection, [skipped, deleted], Date.now());
    expect(look.missing).toBe(1);
    expect((await lookAtQueue(queue.bullQueue, connection, [deleted], Date.now())).missing).toBe(0);
  } finally {
    await worker.close();
    workerConnection.disconnect();
    await queue.close();
  }
});
