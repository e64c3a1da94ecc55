/**
 * A token bucket for API requests, as client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`
 * that kube-controller-manager uses (default 20 QPS, burst 30). One bucket per context, shared by all of
 * that cluster's targets. Refills on the monotonic clock: on the wall clock a step back of 10 minutes
 * owed 10 minutes of tokens and held every API call that long.
 */
import type { MonotonicClock } from '../clock.ts';
import { sleep } from '../sleep.ts';

/** Rate limiter options. */
export interface RateLimiterOptions {
  /** Sustained requests per second (> 0). */
  qps: number;
  /** Bucket size: requests allowed at once after a quiet period (≥ 1). */
  burst: number;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
}

/** Waits for a token. Rejects with the signal's reason when aborted while waiting. */
export interface RateLimiter {
  take(signal?: AbortSignal): Promise<void>;
}

/** Creates a token bucket. Tokens are reserved in order, so waiters are served first come, first served. */
export function createRateLimiter(opts: RateLimiterOptions): RateLimiter {
  const intervalMs = 1000 / opts.qps;
  let tokens = opts.burst;
  let last = opts.monotonicNow();
  return {
    async take(signal) {
      signal?.throwIfAborted();
      const now = opts.monotonicNow();
      // Never negative (a monotonic clock does not go back; a clock given by a test might).
      tokens = Math.min(opts.burst, tokens + Math.max(0, now - last) / intervalMs);
      last = now;
      tokens -= 1; // reserve, possibly going negative: the debt is the queue ahead of us
      if (tokens >= 0) return;
      const waitMs = -tokens * intervalMs;
      if (!(await sleep(waitMs, signal))) {
        tokens += 1; // aborted while waiting: give the reservation back
        throw signal?.reason;
      }
    },
  };
}
