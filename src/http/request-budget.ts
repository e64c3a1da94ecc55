/**
 * A small budget for requests that a client can send at will and that cost the cleanup something: each
 * `GET /api/v1/explain` makes a live GET of the pod through the context's rate limiter — the one the
 * cleanup's GETs and DELETEs wait in — plus Redis and etcd reads. Unbounded, a loop of explains (a script,
 * a dashboard refreshing) would queue ahead of due DELETEs. So each replica admits at most `burst` at once
 * after a quiet period, `perSecond` sustained, and `concurrency` in flight; a request over the budget is
 * refused at once (`429` with `Retry-After`), before it reaches the API server. Refills on the monotonic clock.
 */
import type { MonotonicClock } from '../clock.ts';

/** Options of {@link createRequestBudget}. */
export interface RequestBudgetOptions {
  /** Sustained admissions per second (> 0). */
  perSecond: number;
  /** Admissions allowed at once after a quiet period (≥ 1). */
  burst: number;
  /** Admitted requests in flight at most (≥ 1). */
  concurrency: number;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
}

/** The outcome of {@link RequestBudget.tryAdmit}. */
export type Admission =
  | { readonly admitted: true; readonly release: () => void }
  | {
      readonly admitted: false;
      /** When to try again, whole seconds (≥ 1): for `Retry-After`. */
      readonly retryAfterSeconds: number;
    };

/** A token bucket with a bound on requests in flight; never waits. */
export interface RequestBudget {
  /** Admits a request (call `release()` when it is done, once) or refuses it. */
  tryAdmit(): Admission;
}

/** Creates a budget; it starts full. */
export function createRequestBudget(opts: RequestBudgetOptions): RequestBudget {
  const intervalMs = 1000 / opts.perSecond;
  let tokens = opts.burst;
  let last = opts.monotonicNow();
  let inFlight = 0;
  return {
    tryAdmit() {
      const now = opts.monotonicNow();
      tokens = Math.min(opts.burst, tokens + Math.max(0, now - last) / intervalMs);
      last = now;
      if (tokens < 1 || inFlight >= opts.concurrency) {
        const waitMs = tokens < 1 ? (1 - tokens) * intervalMs : intervalMs;
        return { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
      }
      tokens -= 1;
      inFlight += 1;
      let released = false;
      return {
        admitted: true,
        release: () => {
          if (released) return;
          released = true;
          inFlight -= 1;
        },
      };
    },
  };
}
