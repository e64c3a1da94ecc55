/**
 * Callers waiting for the next value of something that comes and goes (a session's lease, a ZooKeeper
 * connection): each waits until the value is handed out or its own signal aborts. Shared by the etcd and
 * ZooKeeper sessions (src/leadership/etcd/session.ts, src/leadership/zookeeper/session.ts).
 */

/** A list of waiters for the next `T`. */
export interface WaitList<T> {
  /**
   * Waits for the next {@link WaitList.resolveAll}.
   * @throws (rejects with) `signal.reason` when `signal` aborts first; the error of {@link WaitList.rejectAll}.
   */
  wait(signal: AbortSignal): Promise<T>;
  /** Hands `value` to every waiter and empties the list. */
  resolveAll(value: T): void;
  /** Rejects every waiter with `err` and empties the list. */
  rejectAll(err: Error): void;
}

/** Creates an empty wait list. */
export function createWaitList<T>(): WaitList<T> {
  let waiters: PromiseWithResolvers<T>[] = [];
  const takeAll = () => {
    const all = waiters;
    waiters = [];
    return all;
  };
  return {
    wait(signal) {
      const w = Promise.withResolvers<T>();
      waiters.push(w);
      const onAbort = () => w.reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      return w.promise.finally(() => {
        signal.removeEventListener('abort', onAbort);
        waiters = waiters.filter((x) => x !== w);
      });
    },
    resolveAll(value) {
      for (const w of takeAll()) w.resolve(value);
    },
    rejectAll(err) {
      for (const w of takeAll()) w.reject(err);
    },
  };
}
