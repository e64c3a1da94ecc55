/**
 * kube-apiserver's etcd compactor (staging/src/k8s.io/apiserver/pkg/storage/etcd3/compact.go), which
 * `--etcd-compaction-interval` (default 5 min) drives: at every tick it writes its own key (one etcd
 * revision, seen by no pod watch) and compacts etcd to the revision of the previous tick. So watch history
 * and list continue tokens live one to two intervals, even on a cluster where no pod changes.
 */
import type { PodStore } from './store.ts';

/** kube-apiserver's default `--etcd-compaction-interval`, ms. */
export const DEFAULT_COMPACTION_INTERVAL_MS = 5 * 60_000;

/**
 * The compaction interval option checked, with its default: ms ≥ 0, 0 meaning off.
 * @throws TypeError when it is negative or not finite.
 */
export function compactionInterval(intervalMs: number | undefined): number {
  const ms = intervalMs ?? DEFAULT_COMPACTION_INTERVAL_MS;
  if (!Number.isFinite(ms) || ms < 0) {
    throw new TypeError(`compactionIntervalMs must be a number of ms ≥ 0 (0: off), got ${ms}`);
  }
  return ms;
}

/**
 * Compacts `store` every `intervalMs` (checked by {@link compactionInterval}; a monotonic timer; 0: never).
 * The first tick only records a revision: the real compactor does not compact on bootstrap. Returns the
 * stop function.
 */
export function startCompactor(store: PodStore, intervalMs: number): () => void {
  if (intervalMs === 0) return () => {};
  let previous: number | undefined;
  const timer = setInterval(() => {
    const current = store.takeRevision();
    if (previous !== undefined) store.compact(previous);
    previous = current;
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
