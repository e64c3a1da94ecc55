/**
 * The pod UIDs whose DELETE this replica saw accepted, kept in the process: the handler's re-check asks it
 * before the fence and the DELETE (`CleanupDeps.acceptedBefore`), so one replica never DELETEs the same
 * pod twice — the invariant is one DELETE per pod.
 *
 * Why Redis alone cannot be this memory: Redis can lose its data (restarted empty, failed over to a replica
 * that had not caught up; docs/failure-modes.md). The finished job and the tombstone that remembered the
 * accepted DELETE are then gone, the leader's reconcile enqueues the pod again from its informer cache, and
 * that cache may still show the pod without a `deletionTimestamp` — the watch events of the deletion can be
 * late (a slow API server) while the informer is not "down", so the cache is trusted
 * (src/cleaner/cache-trust.ts). The re-check then passed and a second DELETE went out, answered 404 (found
 * by the nemesis). This record lives as long as the process, across leadership terms: a new term
 * of the same replica must not DELETE again either. Another replica taking over does not have it; its
 * informer has seen the deletion or it GETs/409s as any re-check does.
 *
 * Bounded in time and size: an entry is kept for `horizonMs` after the DELETE was accepted (the tombstone
 * TTL: as long as Redis would have remembered it) and at most `maxEntries` are kept, oldest evicted. A
 * target that deletes 10,000 pods within the horizon costs ~1 MB; an idle one nothing.
 */

/** Options of {@link createAcceptedDeletes}. */
export interface AcceptedDeletesOptions {
  /** How long an accepted DELETE is remembered, ms (by the monotonic clock). */
  horizonMs: number;
  /** How many UIDs are kept at most; the oldest is evicted first. */
  maxEntries: number;
  /** Monotonic clock, ms (`performance.now()`). */
  monotonicNow: () => number;
}

/** The record of one target's accepted DELETEs. */
export interface AcceptedDeletes {
  /** Notes that the API server accepted the DELETE of `uid` now. */
  record(uid: string): void;
  /** True when this replica saw a DELETE of `uid` accepted within the horizon. */
  acceptedBefore(uid: string): boolean;
  /**
   * Sends a DELETE of `uid` through `send`, one at a time per UID: while one is in flight, a second caller
   * (the same job run again after BullMQ lost its lock, before the first DELETE was answered) waits for it,
   * and when that one was accepted gets `not-found` without sending — the pod is already being deleted by our
   * accepted DELETE. A caller that comes after a DELETE of `uid` was accepted (within the horizon) gets
   * `not-found` without sending as well: the handler's early `acceptedBefore` check is followed by the fence,
   * an awaited read during which another run's DELETE can be accepted. Records an `accepted` answer. A first
   * DELETE that was not accepted (or threw) lets the waiting caller send its own.
   */
  deleteOnce<R extends string>(uid: string, send: () => Promise<R>): Promise<R | 'not-found'>;
  /** How many UIDs are remembered (expired ones may still count until the next `record`/lookup). */
  readonly size: number;
}

/** Defaults of a target cleaner: 10,000 UIDs per target. */
export const ACCEPTED_DELETES_MAX = 10_000;

/** Creates an empty record. Throws a RangeError for a horizon or bound that is not positive. */
export function createAcceptedDeletes(opts: AcceptedDeletesOptions): AcceptedDeletes {
  if (!(opts.horizonMs > 0)) throw new RangeError(`horizonMs must be > 0, got ${opts.horizonMs}`);
  if (!(opts.maxEntries >= 1)) throw new RangeError(`maxEntries must be ≥ 1, got ${opts.maxEntries}`);
  /** UID → monotonic ms accepted. Insertion order is acceptance order (re-recorded UIDs move to the end). */
  const acceptedAt = new Map<string, number>();
  /** UID → the DELETE in flight for it (settles with its answer, or undefined when it threw). */
  const inFlight = new Map<string, Promise<string | undefined>>();

  /** Drops the entries older than the horizon: they are at the front. */
  function expire(nowMs: number): void {
    for (const [uid, at] of acceptedAt) {
      if (nowMs - at <= opts.horizonMs) return;
      acceptedAt.delete(uid);
    }
  }

  function record(uid: string): void {
    const nowMs = opts.monotonicNow();
    acceptedAt.delete(uid);
    acceptedAt.set(uid, nowMs);
    expire(nowMs);
    while (acceptedAt.size > opts.maxEntries) {
      const oldest = acceptedAt.keys().next().value as string;
      acceptedAt.delete(oldest);
    }
  }

  function acceptedBefore(uid: string): boolean {
    const at = acceptedAt.get(uid);
    if (at === undefined) return false;
    const nowMs = opts.monotonicNow();
    expire(nowMs);
    return nowMs - at <= opts.horizonMs;
  }

  return {
    record,
    async deleteOnce(uid, send) {
      const earlier = inFlight.get(uid);
      if (earlier && (await earlier) === 'accepted') return 'not-found';
      if (acceptedBefore(uid)) return 'not-found';
      const mine = send();
      const settled = mine.then(
        (r) => r as string,
        () => undefined,
      );
      inFlight.set(uid, settled);
      try {
        const result = await mine;
        if (result === 'accepted') record(uid);
        return result;
      } finally {
        if (inFlight.get(uid) === settled) inFlight.delete(uid);
      }
    },
    acceptedBefore,
    get size() {
      return acceptedAt.size;
    },
  };
}
