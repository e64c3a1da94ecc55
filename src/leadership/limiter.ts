/**
 * A bound on concurrent calls: the replica's campaign calls to etcd (candidate puts, predecessor reads,
 * candidate deletes) go through one, so that 1,000 targets campaigning at start reach etcd a few at a time
 * instead of in one burst that trips the etcd client's circuit breaker (src/leadership/etcd-client.ts).
 */

/** Runs `call` once fewer than the bound are running; calls start in the order they were made. */
export type Limit = <T>(call: () => Promise<T>) => Promise<T>;

/**
 * Creates a limit of `concurrency` calls at a time (≥ 1).
 * @throws RangeError when `concurrency` is below 1.
 */
export function createLimit(concurrency: number): Limit {
  if (!(concurrency >= 1)) throw new RangeError(`concurrency must be at least 1, got ${concurrency}`);
  let running = 0;
  const queue: (() => void)[] = [];
  const release = () => {
    running -= 1;
    const next = queue.shift();
    if (next) {
      running += 1;
      next();
    }
  };
  return async <T>(call: () => Promise<T>): Promise<T> => {
    if (running < concurrency) running += 1;
    else await new Promise<void>((resolve) => queue.push(resolve));
    try {
      return await call();
    } finally {
      release();
    }
  };
}
