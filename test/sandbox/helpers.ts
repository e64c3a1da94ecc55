/** Shared helpers of the sandbox tests: condition polling and small pod builders. */
import type { V1Pod } from '@kubernetes/client-node';

/** Polls `cond` every 10 ms until it returns a truthy value; throws after `timeoutMs` (default 5,000). */
export async function waitFor<T>(cond: () => T | Promise<T>, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
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
