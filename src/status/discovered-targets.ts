/**
 * The discovered namespaces `status` shows (for `context:*` targets): those some replica campaigns for now,
 * read from the leadership backend's elections ({@link ElectionReader.campaigning}), since `status` does not
 * ask the API server. Without a leadership backend nothing is known.
 */

import type { ElectionReader } from '../leadership/election-reader.ts';
import { type TargetRef, targetKey } from '../queue/job-identity.ts';
import { withTimeout } from '../with-timeout.ts';

/**
 * The targets with a candidate in each of `discovered` (a `context:*` target's resolved context and its
 * cluster's name), sorted by namespace, less those in `fixed` (the same cluster and namespace).
 * @param timeoutMs longest wait for each read, ms.
 * @throws the backend client's error, or a timeout, when the backend does not answer.
 */
export async function discoveredTargets(
  elections: ElectionReader,
  discovered: readonly { readonly context: string; readonly cluster: string }[],
  fixed: readonly TargetRef[],
  timeoutMs: number,
): Promise<TargetRef[]> {
  const known = new Set(fixed.map(targetKey));
  const found: TargetRef[] = [];
  for (const { context, cluster } of discovered) {
    const namespaces = await withTimeout(elections.campaigning(cluster), timeoutMs, 'a read');
    for (const namespace of namespaces) {
      const t = { cluster, context, namespace };
      if (!known.has(targetKey(t))) {
        known.add(targetKey(t));
        found.push(t);
      }
    }
  }
  return found;
}
