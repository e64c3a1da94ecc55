/**
 * The data of a cleanup job, as the enqueue side builds it and the handler reads it. Declared here, below the
 * queue, the telemetry and the handler, which all use it; how it is stored in Redis is the queue's business
 * (src/queue/cleanup-queue.ts).
 */

/**
 * A cleanup job as the handler sees it. Times are epoch ms. Redis stores only part of it
 * ({@link StoredJobData}); the worker rebuilds the rest from the job's id, name and target.
 */
export interface CleanupJobData {
  readonly context: string;
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  /** finishedAt + retention: the job must not DELETE before this. */
  readonly deadlineMs: number;
  /** Enqueue side only: not stored in Redis, so absent on a job the worker processes. */
  readonly finishedAtMs?: number;
  /** Replica that added the job. Enqueue side only: not stored in Redis. */
  readonly enqueuedBy?: string;
  /** W3C trace context of the enqueue span, so processing continues the same trace. */
  readonly traceparent?: string;
  /**
   * A run of this job may have had a DELETE leave without its answer being read: given up after the DELETE was
   * sent (leadership lost, shutdown), or the job was taken over from a leader that froze. The informer's cache
   * may not show that deletion yet, so the re-check GETs the pod live whatever the `recheck` mode.
   */
  readonly liveRecheck?: true;
}
