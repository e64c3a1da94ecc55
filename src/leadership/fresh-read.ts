/**
 * Coalesced reads that are never older than their call (single-flight, as etcd's and ZooKeeper's fencing
 * need it): concurrent callers share one read, but a caller is only ever answered by a read that started
 * after it called. A read already in flight is not reused; the callers that arrive during it share the next
 * one, started when it settles. A burst of N DELETEs then costs about two reads per round trip, not N, and
 * each confirmation still says "leader as of this call".
 */

/**
 * A shared read: `(signal) => Promise<T>`. Rejects with `signal.reason` as soon as `signal` aborts (the
 * shared read goes on for the other callers); otherwise settles as the read does.
 */
export type FreshRead<T> = (signal: AbortSignal) => Promise<T>;

/** Settles with `p`, or rejects with the signal's reason as soon as it aborts (leaving `p` running). */
export function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Creates a shared read over `readOnce` (one round trip to the backend). `readOnce` should not reject: a
 * rejection is passed to every caller sharing that read, and the next read still starts.
 */
export function createFreshRead<T>(readOnce: () => Promise<T>): FreshRead<T> {
  let inFlight: Promise<T> | undefined;
  /** Callers that arrived while a read was in flight: they share the next read. */
  let next: PromiseWithResolvers<T> | undefined;

  /** Starts a read now; when it settles, starts the one the callers that arrived meanwhile wait for. */
  function start(): Promise<T> {
    const read = readOnce();
    inFlight = read;
    const settled = () => {
      inFlight = undefined;
      const waiting = next;
      next = undefined;
      if (waiting) start().then(waiting.resolve, waiting.reject);
    };
    read.then(settled, settled);
    return read;
  }

  return (signal) => {
    let shared: Promise<T>;
    if (!inFlight) shared = start();
    else {
      next ??= Promise.withResolvers<T>();
      shared = next.promise;
    }
    return abortable(shared, signal);
  };
}
