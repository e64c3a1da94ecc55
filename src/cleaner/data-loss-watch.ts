/**
 * The leader's watch on its target's Redis data: when the queue loses its data (a flush, a server restarted
 * empty, a failover to a replica that lags or never had it), the pending jobs are gone and only the informer
 * still knows the pods. The watch reads the target's data marker (src/queue/data-marker.ts) and, when it is
 * gone or names another server, logs it, counts it and has the leader reconcile at once, instead of at the
 * next periodic reconcile (after a master change the leader also starts a new BullMQ Worker: the old one's
 * blocking connection may still wait on the old master).
 *
 * Ordering: a term reads the marker once (its baseline) *before* its own reconcile. A loss before the baseline
 * is healed by that reconcile; a loss after it is seen by a later read. A first read that finds no marker (a
 * fresh install, or a loss before this term) is therefore never reported.
 *
 * Cost: a read is one script on the master of the queue's slot. The watch reads every `intervalMs` while a pod
 * of the target is due within `intervalMs` (or overdue and still present) — a loss then makes no pod later
 * than about `intervalMs` + a reconcile — and otherwise every `idleIntervalMs`: a pod due later is enqueued
 * again before its deadline by a read made when it is about due. After the connection comes back or the
 * Cluster's nodes change, it reads every second for `burstMs` (a failover completes within that).
 */
import type { MonotonicClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { DataLossReason, DataMarker } from '../queue/data-marker.ts';
import { sleep } from '../sleep.ts';
import { waitInTerm } from './leader-terms.ts';

/** The watch's default intervals, ms. */
export const DATA_LOSS_CHECKS = {
  intervalMs: 5_000,
  idleIntervalMs: 60_000,
  burstMs: 30_000,
  burstIntervalMs: 1_000,
} as const;

/** Options of {@link createDataLossWatch}. */
export interface DataLossWatchOptions {
  marker: DataMarker;
  /** True when a pod of the target is due within `intervalMs` or overdue and still present (the informer's view). */
  dueSoon(withinMs: number): boolean;
  /** Reacts to a loss: the leader's reconcile. Its errors are logged by the caller. */
  onLoss(reason: DataLossReason): Promise<void>;
  log: Logger;
  monotonicNow: MonotonicClock;
  /** See {@link DATA_LOSS_CHECKS}; ms. */
  intervalMs?: number;
  idleIntervalMs?: number;
  burstMs?: number;
  burstIntervalMs?: number;
}

/** One target's watch; one per target, used by its terms one after another. */
export interface DataLossWatch {
  /** A term's first read, before its reconcile; resolves when it is done (or failed: logged at debug). */
  baseline(): Promise<void>;
  /** Reads on the schedule above until `signal` aborts (the term's end). */
  run(signal: AbortSignal): Promise<void>;
}

/** Creates the watch of one target. */
export function createDataLossWatch(opts: DataLossWatchOptions): DataLossWatch {
  const intervalMs = opts.intervalMs ?? DATA_LOSS_CHECKS.intervalMs;
  const idleIntervalMs = opts.idleIntervalMs ?? DATA_LOSS_CHECKS.idleIntervalMs;
  const burstMs = opts.burstMs ?? DATA_LOSS_CHECKS.burstMs;
  const burstIntervalMs = opts.burstIntervalMs ?? DATA_LOSS_CHECKS.burstIntervalMs;
  const { log, monotonicNow } = opts;
  /** The marker's value after the last read of this term; undefined before the term's baseline. */
  let known: string | undefined;

  async function look(): Promise<DataLossReason | undefined> {
    const { seen, current } = await opts.marker.read();
    const before = known;
    known = current;
    if (before === undefined) return undefined;
    if (seen === undefined) return 'marker-missing';
    if (seen !== before || current !== before) return 'master-changed';
    return undefined;
  }

  const failed = (err: unknown) => {
    log.debug({ err: { message: (err as Error).message } }, 'redis data marker not read');
    return undefined;
  };

  return {
    async baseline() {
      known = undefined;
      await look().catch(failed);
    },
    async run(signal) {
      let lastReadMs = monotonicNow();
      let burstUntilMs = Number.NEGATIVE_INFINITY;
      let wake = new AbortController();
      const off = opts.marker.onTopologyChange(() => {
        burstUntilMs = monotonicNow() + burstMs;
        wake.abort();
      });
      try {
        while (!signal.aborted) {
          const bursting = monotonicNow() < burstUntilMs;
          await sleep(bursting ? burstIntervalMs : intervalMs, AbortSignal.any([signal, wake.signal]), {
            unref: true,
          });
          if (wake.signal.aborted) wake = new AbortController();
          if (signal.aborted) return;
          const now = monotonicNow();
          const due = now < burstUntilMs || now - lastReadMs >= idleIntervalMs || opts.dueSoon(intervalMs);
          if (!due) continue;
          lastReadMs = now;
          let reason: DataLossReason | undefined;
          const reading = look().then((r) => {
            reason = r;
          }, failed);
          if ((await waitInTerm(reading, signal)) !== 'done' || !reason) continue;
          log.warn(
            { reason },
            reason === 'marker-missing'
              ? 'redis data lost (the target’s marker is gone): reconciling from the informer now'
              : 'redis master changed (failover or restart; writes not yet replicated are lost): new worker, reconciling from the informer now',
          );
          await waitInTerm(opts.onLoss(reason), signal);
        }
      } finally {
        off();
      }
    },
  };
}
