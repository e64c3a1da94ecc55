/**
 * The discovered namespaces `status` shows (for `context:*` targets): those some replica campaigns for now,
 * read from the leadership backend's elections ({@link ElectionReader.campaigning}), since `status` does not
 * ask the API server. Without a leadership backend nothing is known.
 */
import type { TargetRef } from '../queue/job-identity.ts';
import { withTimeout } from '../with-timeout.ts';
import type { ElectionReader } from './election-read.ts';

/**
 * The (context, namespace) pairs with a candidate under each of `contexts` (resolved names), sorted, less
 * those in `fixed`.
 * @param timeoutMs longest wait for each read, ms.
 * @throws the backend client's error, or a timeout, when the backend does not answer.
 */
export async function discoveredTargets(
  elections: ElectionReader,
  contexts: readonly string[],
  fixed: readonly TargetRef[],
  timeoutMs: number,
): Promise<TargetRef[]> {
  const known = new Set(fixed.map((t) => `${t.context}\u0000${t.namespace}`));
  const found: TargetRef[] = [];
  for (const context of contexts) {
    const namespaces = await withTimeout(elections.campaigning(context), timeoutMs, 'a read');
    for (const namespace of namespaces)
      if (!known.has(`${context}\u0000${namespace}`)) found.push({ context, namespace });
  }
  return found;
}
