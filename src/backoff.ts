/**
 * The one exponential backoff of the project (the worker's retries, the informer's restarts, the etcd
 * campaign's retries, the Redis reconnects, the exec credential plugin's reruns, the hold after a self-check
 * step-down), as client-go's `ItemExponentialFailureRateLimiter` and BullMQ's `Backoffs.exponential`: the
 * variants are options, not copies.
 */

/** Options of {@link backoffMs}. */
export interface BackoffOptions {
  /** Delay after the first failure, ms (> 0). */
  baseMs: number;
  /** Longest delay, ms: the doubling stops there (before jitter). */
  maxMs: number;
  /**
   * Multiply by a uniform factor in [0.5, 1) (default false), so that replicas failing together do not retry
   * together.
   */
  jitter?: boolean;
  /** Source of the jitter, uniform in [0, 1) (default `Math.random`); tests pass a constant. */
  random?: () => number;
}

/**
 * The delay before retry number `attempt`, ms: `min(maxMs, baseMs · 2^(attempt − 1))`, times `U(0.5, 1)` with
 * `jitter`. `attempt` counts failures so far, from 1; anything below 1 counts as 1. Never NaN or Infinity for
 * large attempts (the doubling saturates at `maxMs`).
 */
export function backoffMs(attempt: number, opts: BackoffOptions): number {
  const n = Math.max(1, attempt);
  const expo = Math.min(opts.maxMs, opts.baseMs * 2 ** (n - 1));
  return opts.jitter ? expo * (0.5 + (opts.random ?? Math.random)() / 2) : expo;
}
