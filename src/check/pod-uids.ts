/**
 * The UIDs of the pods a target's selector selects in this cluster, paged as the informers list them: what
 * the fleet check compares the queued jobs with (a job for a pod this cluster does not have belongs to
 * another cluster sharing the queues). One paged LIST per target that has old pending jobs.
 */
import type { OpenedContext } from './context-checks.ts';

/** Items per page, as client-go's pager. */
const PAGE = 500;

/**
 * Lists the UIDs of the pods of `namespace` matching `labelSelector`.
 * @throws when a page is refused or the API server does not answer within `timeoutMs` per page.
 */
export async function listPodUids(
  ctx: OpenedContext,
  namespace: string,
  labelSelector: string,
  timeoutMs: number,
): Promise<Set<string>> {
  const uids = new Set<string>();
  let next = '';
  do {
    await ctx.limiter.take();
    const signal = AbortSignal.timeout(timeoutMs);
    const query = `labelSelector=${encodeURIComponent(labelSelector)}&limit=${PAGE}${next ? `&continue=${encodeURIComponent(next)}` : ''}`;
    const res = await ctx.http.request(
      'GET',
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods?${query}`,
      {
        signal,
      },
    );
    if (res.statusCode !== 200) throw new Error(`listing pods in ${namespace} answered ${res.statusCode}`);
    const body = res.body as { metadata?: { continue?: string }; items?: { metadata?: { uid?: string } }[] };
    for (const item of body.items ?? []) if (item.metadata?.uid) uids.add(item.metadata.uid);
    next = body.metadata?.continue ?? '';
  } while (next);
  return uids;
}
