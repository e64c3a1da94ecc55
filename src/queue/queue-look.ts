/**
 * A look at a target's queue for the self-check (src/cleaner/self-check.ts): is there work its worker should
 * be taking and is not? Jobs due and waiting, the earliest delayed job past its due time (a consuming worker
 * promotes it at once), overdue pods without a job. Jobs in their retry backoff (delayed, not yet due) and jobs
 * out of attempts (failed) are not such work: they tell a failing leader from a stuck one.
 *
 * A few reads: the waiting counts, the first member of the delayed set (BullMQ scores it by due time × 0x1000
 * plus a counter, its `getDelayedScore`), and one state read per UID asked about (at most a handful), plus the
 * return value of each of those jobs that completed.
 */
import type { Queue } from 'bullmq';
import { finishedWithoutDeleting } from './cleanup-queue.ts';
import { cleanupJobId, isCleanupJobId } from './job-identity.ts';
import type { RedisClient } from './redis-client.ts';

/** What the leader's queue shows. */
export interface QueueLook {
  /** Jobs due and waiting for a worker (BullMQ `wait` and `prioritized`). */
  readonly waiting: number;
  /** How long past its due time the earliest delayed job is, ms (≤ 0: not due yet); undefined: none delayed. */
  readonly earliestDelayedPastDueMs: number | undefined;
  /**
   * How many of the given UIDs have no job that stands for them: none at all (lost, never enqueued), or one that
   * completed without deleting (`skipped`: the pod was not eligible when it ran, and is overdue now, so it is
   * again — see `finishedWithoutDeleting`, src/queue/cleanup-queue.ts).
   */
  readonly missing: number;
}

/**
 * Looks at `queue`.
 * @param queue the target's BullMQ queue
 * @param redis a connection to the same Redis (for the delayed set's first member)
 * @param uids the UIDs whose jobs to find (the oldest overdue pods)
 * @param nowMs the wall clock, epoch ms (BullMQ's delayed scores are epoch ms)
 * @throws the Redis client's error when Redis cannot be read
 */
export async function lookAtQueue(
  queue: Queue,
  redis: RedisClient,
  uids: readonly string[],
  nowMs: number,
): Promise<QueueLook> {
  const asked = uids.filter(isCleanupJobId).map((uid) => cleanupJobId(uid));
  const [counts, first, states] = await Promise.all([
    queue.getJobCounts('waiting', 'prioritized'),
    redis.zrange(queue.toKey('delayed'), '0', '0', 'WITHSCORES'),
    Promise.all(asked.map((id) => queue.getJobState(id))),
  ]);
  const score = first[1] === undefined ? undefined : Number(first[1]);
  // A completed job stands for its UID only if it deleted (or saw the pod go): read the return values.
  const completed = asked.filter((_, i) => states[i] === 'completed');
  const returned = await Promise.all(completed.map((id) => redis.hget(queue.toKey(id), 'returnvalue')));
  return {
    waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
    earliestDelayedPastDueMs: score === undefined ? undefined : nowMs - Math.floor(score / 0x1000),
    missing:
      states.filter((s: string) => s === 'unknown').length +
      returned.filter((r) => finishedWithoutDeleting(r, false)).length,
  };
}
