/**
 * The one sleep of the project: waits a number of ms, or less when an AbortSignal aborts (a lost term, a
 * stopping informer, a cancelled request). It never rejects: the caller decides what an early end means
 * (the rate limiter throws the abort reason; a term's loop just returns).
 */

/** Options of {@link sleep}. */
export interface SleepOptions {
  /** Unref the timer, so that the sleep alone does not keep the process alive (default false). */
  unref?: boolean;
}

/**
 * Resolves after `ms` (ms) with true, or as soon as `signal` aborts with false (at once when it already has).
 * The timer and the abort listener are removed either way.
 */
export function sleep(ms: number, signal?: AbortSignal, opts: SleepOptions = {}): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    if (signal?.aborted) return resolve(false);
    const finish = (slept: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(slept);
    };
    const onAbort = () => finish(false);
    const timer = setTimeout(() => finish(true), ms);
    if (opts.unref) timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
