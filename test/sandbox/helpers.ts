/** Shared helpers of the sandbox tests: condition polling and small pod builders. */
import type { V1Pod } from '@kubernetes/client-node';
import { waitFor as waitUntil } from '../helpers/wait.ts';

/**
 * Polls `cond` every 10 ms until it returns a truthy value; throws after `timeoutMs` (default 5,000). The
 * sandbox tests' argument order over the one waiter, test/helpers/wait.ts.
 */
export function waitFor<T>(
  cond: () => T | Promise<T>,
  what: string,
  timeoutMs = 5000,
): Promise<NonNullable<T>> {
  return waitUntil(what, cond, timeoutMs, 10);
}

/** A minimal valid pod. */
export function pod(
  namespace: string,
  name: string,
  extra: Partial<V1Pod> & { labels?: Record<string, string> } = {},
): V1Pod {
  const { labels, ...rest } = extra;
  return {
    metadata: { name, namespace, labels: labels ?? {} },
    spec: { containers: [{ name: 'c', image: 'busybox' }], ...(rest.spec ?? {}) },
    ...(rest.status ? { status: rest.status } : {}),
  };
}
