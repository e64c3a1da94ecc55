/**
 * One warning per burst of lost job locks, instead of one per job.
 *
 * A BullMQ worker holds a lock per active job and renews them together (lock-manager.js `extendLocks`):
 * when the renewal fails — the process was frozen (SIGSTOP, a long GC, a VM pause) or Redis did not answer —
 * it emits `lockRenewalFailed` with every failed id, then one `error` event per job ("could not renew lock
 * for job <id>"). The jobs then end with one more error each when BullMQ moves them on ("Missing lock for
 * job <id>. moveToDelayed", "Lock mismatch for job <id>…"). A leader woken from a freeze held up to
 * `concurrency` jobs: that was a hundred warnings for one event. Nothing is lost: the next leader has taken
 * such jobs over (src/queue/take-over.ts) or stall detection hands them back to the queue, and fencing keeps
 * their DELETEs from leaving.
 */
import type { Logger } from '../log.ts';

/** BullMQ's per-job lock errors (bullmq/dist/esm/classes: lock-manager.js, finished-errors.js). */
const LOCK_ERROR = /^(?:could not renew lock|Missing lock|Lock mismatch) for job (\S+?)\.?(?:\s|$)/;

/** Most job ids listed in a summary line. */
const MAX_IDS = 20;

/** Collects the lock errors of one worker into one warning per burst. */
export interface LockLossLog {
  /** Counts the ids of a `lockRenewalFailed` event. */
  renewalFailed(jobIds: readonly string[]): void;
  /** Counts a worker `error` event when it is a per-job lock error; false for any other error (log it). */
  take(err: Error): boolean;
  /** Writes the pending summary now (the worker is closing). */
  flush(): void;
}

/**
 * Creates the collector. The first lock error opens a burst; `windowMs` later (default 1000) one warning
 * gives the number of jobs and the first {@link MAX_IDS} ids. Errors of one job count once per burst.
 */
export function createLockLossLog(log: Logger, windowMs = 1000): LockLossLog {
  let ids = new Set<string>();
  let timer: NodeJS.Timeout | undefined;

  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (ids.size === 0) return;
    const uids = [...ids];
    ids = new Set();
    log.warn(
      { jobs: uids.length, uids: uids.slice(0, MAX_IDS) },
      `lost the locks of ${uids.length} jobs (process frozen or Redis slow): the next leader takes them over (or stall detection re-queues them); fencing keeps their DELETEs from leaving`,
    );
  };
  const add = (id: string) => {
    ids.add(id);
    if (!timer) timer = setTimeout(flush, windowMs).unref();
  };

  return {
    renewalFailed(jobIds) {
      for (const id of jobIds) add(id);
    },
    take(err) {
      const m = LOCK_ERROR.exec(err.message ?? '');
      if (!m) return false;
      add(m[1] ?? '?');
      return true;
    },
    flush,
  };
}
