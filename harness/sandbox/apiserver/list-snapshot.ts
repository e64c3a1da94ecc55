/**
 * The pods as they were at a past resourceVersion, as etcd serves a range read at a revision.
 * kube-apiserver reads every page of a paged list at the revision of the first page (`WithRev(continueRV)`
 * in etcd3/store.go GetList), so a pod deleted after the first page still shows on a later page and a pod
 * created after it does not: the pages add up to one consistent list, and a watch from its resourceVersion
 * brings every later change. The store keeps only the current pods; the state at R is the current one with
 * each pod changed since R put back as it was before its first change after R (the retained events carry
 * it) — which is why a compaction, dropping those events, expires the continue tokens of older lists.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { itemJson } from './pod-object.ts';
import { type PodStore, podKey, type StoreEntry } from './store.ts';

/**
 * The store's entries as they were at `rv`, in key order, of namespace `ns` (or all), from the key `fromKey`
 * on (inclusive; see {@link PodStore.entries}). Objects are shared: do not mutate.
 * @throws KubeStatusError 410 Expired when `rv` is older than the compacted resourceVersion.
 */
export function entriesAt(
  store: PodStore,
  rv: number,
  ns: string | undefined,
  fromKey: string | undefined,
): Iterable<StoreEntry> {
  // Each changed pod's state at `rv`: before its first change after `rv` (undefined: it did not exist).
  const past = new Map<string, V1Pod | undefined>();
  for (const ev of store.eventsSince(rv)) {
    const key = podKey(ev.pod);
    if (!past.has(key)) past.set(key, ev.type === 'ADDED' ? undefined : ev.prev);
  }
  const current = store.entries(ns, fromKey);
  if (past.size === 0) return current;
  const prefix = ns === undefined ? '' : `${ns}/`;
  const from = fromKey ?? prefix;
  const changed = [...past.keys()].filter((k) => k.startsWith(prefix) && k >= from).sort();
  return merge(current, changed, past);
}

/** The current entries, with the `changed` keys (sorted) taken from `past` instead, in key order. */
function* merge(
  current: Iterable<StoreEntry>,
  changed: readonly string[],
  past: ReadonlyMap<string, V1Pod | undefined>,
): Generator<StoreEntry> {
  let c = 0;
  function* then(key: string): Generator<StoreEntry> {
    const pod = past.get(key);
    if (pod) yield { key, pod, json: itemJson(pod) };
  }
  for (const e of current) {
    while (c < changed.length && (changed[c] as string) < e.key) yield* then(changed[c++] as string);
    if (changed[c] === e.key) {
      yield* then(changed[c++] as string);
      continue;
    }
    yield e;
  }
  while (c < changed.length) yield* then(changed[c++] as string);
}
