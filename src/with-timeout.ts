/**
 * Bounds a wait on a service that may not answer. etcd3 gives its calls no deadline of their own: against a
 * member that is frozen (SIGSTOP, a partition) a request — a grant, a revoke, a watch cancellation — waits for
 * ever. A BullMQ Worker's `close()` waits for its active jobs, and they for Redis to take them back.
 */

/**
 * Resolves or rejects as `p` does, or rejects with `Error("<what> timed out after <ms> ms")` after `ms` (ms).
 * `p` itself goes on (etcd3 calls and BullMQ closes cannot be cancelled); its outcome is then ignored. The timer is cleared.
 */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
