/**
 * The cleanup queue of one target: enqueue a pod's delayed cleanup job (one per UID, whatever the number
 * of replicas adding it), cancel it with a tombstone, and the reconcile helpers.
 *
 * Races between replicas are closed by ordering, not locks: `cancel` writes the tombstone *then* removes
 * the job; `enqueue` adds the job *then* checks the tombstone and removes what it added. Whatever the
 * interleaving, a tombstoned pod ends with no pending job. The handler's re-check covers the rest.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { type JobsOptions, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../telemetry/log.ts';
import { cleanupJobId, jobKey, queueName, type TargetRef, tombstoneKey } from './job-identity.ts';

/** Data of a cleanup job (stored in Redis as JSON). Times are epoch ms. */
export interface CleanupJobData {
  readonly context: string;
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  /** finishedAt + retention: the job must not DELETE before this. */
  readonly deadlineMs: number;
  readonly finishedAtMs: number;
  /** Replica that added the job. */
  readonly enqueuedBy: string;
  /** W3C trace context of the enqueue span, so processing continues the same trace. */
  readonly traceparent?: string;
}

/** What `enqueue` did: added the job, found one (any state), or refused because the pod is tombstoned. */
export type EnqueueResult = 'added' | 'exists' | 'tombstoned';

/** Options of {@link createCleanupQueue}. */
export interface CleanupQueueOptions {
  target: TargetRef;
  /** A connection with `maxRetriesPerRequest: null` (BullMQ requirement). */
  connection: Redis;
  /** Redis key prefix (no `:`). */
  prefix: string;
  /** How long tombstones and finished jobs are kept, ms. */
  tombstoneTtlMs: number;
  /** Retries of a failed DELETE before the job is failed (the periodic reconcile retries failed jobs). */
  attempts?: number;
  log: Logger;
  now: () => number;
}

/** A target's cleanup queue. */
export interface CleanupQueue {
  readonly queue: Queue<CleanupJobData>;
  readonly name: string;
  enqueue(data: CleanupJobData): Promise<EnqueueResult>;
  /** Tombstones the UID, then removes its job if it is still pending (delayed or waiting). */
  cancel(uid: string): Promise<'removed' | 'none'>;
  isTombstoned(uid: string): Promise<boolean>;
  /** Re-queues failed jobs whose pod `stillEligible` says should still be cleaned; returns how many. */
  retryFailed(stillEligible: (uid: string) => boolean): Promise<number>;
  close(): Promise<void>;
}

/** Creates the queue of one target. */
export function createCleanupQueue(opts: CleanupQueueOptions): CleanupQueue {
  const name = queueName(opts.target);
  const queue = new Queue<CleanupJobData>(name, {
    connection: opts.connection,
    prefix: opts.prefix,
    // BullMQ's event stream keeps 10,000 entries by default, a few hundred bytes each: with thousands of
    // pending jobs it costs more than the jobs. Nothing here reads old events (no QueueEvents consumer).
    streams: { events: { maxLen: 1000 } },
  });
  // Without a listener BullMQ prints every connection error to stderr; the replica logs Redis outages once.
  queue.on('error', () => undefined);
  const keepSeconds = Math.ceil(opts.tombstoneTtlMs / 1000);
  const redis = opts.connection;

  const isTombstoned = async (uid: string) =>
    (await redis.exists(tombstoneKey(opts.prefix, opts.target, uid))) === 1;

  return {
    queue,
    name,
    isTombstoned,
    async enqueue(data) {
      const id = cleanupJobId(data.uid);
      // One round trip answers most calls: N-1 replicas find the job, tombstoned pods stop here.
      const [tomb, job] = (await redis
        .pipeline()
        .exists(tombstoneKey(opts.prefix, opts.target, id))
        .exists(jobKey(opts.prefix, opts.target, id))
        .exec()) as [Error | null, number][];
      if (tomb?.[1] === 1) return 'tombstoned';
      if (job?.[1] === 1) return 'exists';
      const jobOpts: JobsOptions = {
        jobId: id,
        delay: Math.max(0, data.deadlineMs - opts.now()),
        attempts: opts.attempts ?? 15,
        backoff: { type: 'cleanup' },
        // Finished jobs stay as long as tombstones: re-adding a completed UID is then a no-op.
        removeOnComplete: { age: keepSeconds },
        removeOnFail: { age: keepSeconds },
      };
      await queue.add('cleanup-driver-pod', data, jobOpts);
      if (await isTombstoned(id)) {
        // A cancel raced with us; it may have run before our add: remove what we added.
        await queue.remove(id).catch(() => 0);
        return 'tombstoned';
      }
      return 'added';
    },
    async cancel(uid) {
      const id = cleanupJobId(uid);
      await redis.set(tombstoneKey(opts.prefix, opts.target, id), '1', 'PX', opts.tombstoneTtlMs);
      const job = await queue.getJob(id);
      if (!job) return 'none';
      const state = await job.getState();
      if (state !== 'delayed' && state !== 'waiting' && state !== 'prioritized') return 'none';
      // remove() refuses a job that became active meanwhile (locked): the handler's re-check then sees the deletion.
      const removed = await queue.remove(id).catch(() => 0);
      return removed === 1 ? 'removed' : 'none';
    },
    async retryFailed(stillEligible) {
      let n = 0;
      for (const job of await queue.getFailed(0, -1)) {
        if (job?.id && stillEligible(job.id)) {
          await job.retry('failed', { resetAttemptsMade: true }).catch((err: unknown) => {
            opts.log.debug({ err, uid: job.id }, 'retry of a failed job refused');
          });
          n += 1;
        }
      }
      return n;
    },
    async close() {
      await queue.close();
    },
  };
}

/** Fields of a job's data from a pod and its deadline. */
export function jobDataFor(
  pod: V1Pod,
  target: TargetRef,
  times: { deadlineMs: number; finishedAtMs: number },
  enqueuedBy: string,
): CleanupJobData {
  return {
    context: target.context,
    namespace: target.namespace,
    pod: pod.metadata?.name ?? '',
    uid: cleanupJobId(pod.metadata?.uid),
    deadlineMs: times.deadlineMs,
    finishedAtMs: times.finishedAtMs,
    enqueuedBy,
  };
}
