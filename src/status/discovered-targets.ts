/**
 * The discovered namespaces `status` shows (for `context:*` targets): those some replica campaigns for now,
 * read from the election keys in etcd (`spark-driver-cleaner/election/<context>/<namespace>/…`,
 * src/queue/job-identity.ts), since `status` does not ask the API server. Without etcd nothing is known.
 */
import type { Etcd3 } from 'etcd3';
import type { TargetRef } from '../queue/job-identity.ts';
import { withTimeout } from '../with-timeout.ts';

/**
 * The (context, namespace) pairs with an election key under each of `contexts` (resolved names), sorted,
 * less those in `fixed`.
 * @param timeoutMs longest wait for each etcd read, ms.
 * @throws the etcd client's error, or a timeout, when etcd does not answer.
 */
export async function discoveredTargets(
  etcd: Etcd3,
  contexts: readonly string[],
  fixed: readonly TargetRef[],
  timeoutMs: number,
): Promise<TargetRef[]> {
  const known = new Set(fixed.map((t) => `${t.context}\u0000${t.namespace}`));
  const found: TargetRef[] = [];
  for (const context of contexts) {
    const prefix = `spark-driver-cleaner/election/${encodeURIComponent(context)}/`;
    const keys = await withTimeout(etcd.getAll().prefix(prefix).keys(), timeoutMs, 'a read');
    const namespaces = new Set(keys.map((k) => k.slice(prefix.length).split('/')[0] ?? '').filter(Boolean));
    for (const namespace of [...namespaces].sort())
      if (!known.has(`${context}\u0000${namespace}`)) found.push({ context, namespace });
  }
  return found;
}
