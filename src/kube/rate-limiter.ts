/**
 * A token bucket for API requests, as client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`
 * that kube-controller-manager uses (default 20 QPS, burst 30). One bucket per context, shared by every
 * request to that cluster: the cleanup handler's GETs and DELETEs and the informers' LISTs (each page) and
 * WATCHes, as client-go's reflector lists and watches through its clientset's rate limiter. So at most
 * `burst + qps × t` requests leave in any `t` seconds, and the informers of many targets starting at once
 * queue here instead of hitting the API server together.
 *
 * **Two priorities, one budget.** A relist storm (every informer of a context answered 410, or a restart
 * with hundreds of targets) queues hundreds of LISTs and WATCHes; served first come, first served, a DELETE
 * due now would wait behind all of them (300 targets at 20 QPS: 30 s). So waiting `cleanup` requests (GET,
 * DELETE) are served before waiting `informer` ones (LIST, WATCH), but never more than
 * {@link CLEANUP_GRANTS_IN_A_ROW} in a row while an informer request waits: a steady stream of DELETEs at
 * the full rate slows the informers to a fifth of it, never stops them. Why not a second budget for the
 * informers: the configured QPS is what the cluster's operators agreed to take from this client (and what
 * API Priority and Fairness sees); two budgets would double it.
 *
 * Refills on the monotonic clock: on the wall clock a step back of 10 minutes owed 10 minutes of tokens and
 * held every API call that long.
 */
import type { MonotonicClock } from '../clock.ts';

/** Rate limiter options. */
export interface RateLimiterOptions {
  /** Sustained requests per second (> 0). */
  qps: number;
  /** Bucket size: requests allowed at once after a quiet period (≥ 1). */
  burst: number;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
}

/**
 * Whose request waits for a token: `cleanup` (the handler's GET and DELETE, served first) or `informer`
 * (LIST pages and WATCHes).
 */
export type RequestPriority = 'cleanup' | 'informer';

/**
 * Cleanup requests served in a row while an informer request waits, before that one gets the next token
 * (4: informers keep at least a fifth of the rate under a flood of DELETEs).
 */
export const CLEANUP_GRANTS_IN_A_ROW = 4;

/** Waits for a token. Rejects with the signal's reason when aborted while waiting. */
export interface RateLimiter {
  /** @param priority default `cleanup`. */
  take(signal?: AbortSignal, priority?: RequestPriority): Promise<void>;
}

interface Waiter {
  readonly grant: () => void;
}

/**
 * Creates a token bucket. Waiters of one priority are served first come, first served; `cleanup` ones
 * before `informer` ones (see the module's doc).
 */
export function createRateLimiter(opts: RateLimiterOptions): RateLimiter {
  const intervalMs = 1000 / opts.qps;
  let tokens = opts.burst;
  let last = opts.monotonicNow();
  const queues: Record<RequestPriority, Waiter[]> = { cleanup: [], informer: [] };
  let cleanupInARow = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const waiting = () => queues.cleanup.length + queues.informer.length;
  function refill(): void {
    const now = opts.monotonicNow();
    // Never negative (a monotonic clock does not go back; a clock given by a test might).
    tokens = Math.min(opts.burst, tokens + Math.max(0, now - last) / intervalMs);
    last = now;
  }
  function next(): Waiter | undefined {
    const { cleanup, informer } = queues;
    if (cleanup.length > 0 && (informer.length === 0 || cleanupInARow < CLEANUP_GRANTS_IN_A_ROW)) {
      if (informer.length > 0) cleanupInARow += 1;
      return cleanup.shift();
    }
    cleanupInARow = 0;
    return informer.shift();
  }
  function schedule(): void {
    if (timer || waiting() === 0) return;
    timer = setTimeout(pump, Math.max(1, Math.ceil((1 - tokens) * intervalMs)));
  }
  function pump(): void {
    timer = undefined;
    refill();
    for (let w = tokens >= 1 ? next() : undefined; w; w = tokens >= 1 ? next() : undefined) {
      tokens -= 1;
      w.grant();
    }
    schedule();
  }

  return {
    take(signal, priority = 'cleanup') {
      if (signal?.aborted) return Promise.reject(signal.reason);
      refill();
      if (waiting() === 0 && tokens >= 1) {
        tokens -= 1;
        return Promise.resolve();
      }
      return new Promise<void>((resolve, reject) => {
        const queue = queues[priority];
        const onAbort = () => {
          const i = queue.indexOf(waiter);
          if (i >= 0) queue.splice(i, 1);
          if (waiting() === 0 && timer) {
            clearTimeout(timer);
            timer = undefined;
          }
          reject(signal?.reason);
        };
        const waiter: Waiter = {
          grant: () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        queue.push(waiter);
        schedule();
      });
    },
  };
}
