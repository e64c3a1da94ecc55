/**
 * A candidate entry of this replica's live session that no term holds — a create applied whose answer was
 * lost after the campaign gave up — would stand in line for a target nobody here campaigns for. Both backends
 * delete such entries the same way (src/leadership/etcd/backend.ts, src/leadership/zookeeper/backend.ts): one
 * deletion per entry at a time, through the replica's campaign-call limit, best effort (the balancer's next
 * evaluation tries again); while one of an election's entries is being deleted the balancer does not campaign
 * there (a campaign would adopt the entry being deleted).
 */
import type { LimitFunction } from 'p-limit';
import type { Logger } from '../log.ts';

/** The deletions of stray candidate entries of one replica's session. */
export interface StrayCandidates {
  /**
   * Deletes the entry `path` with `remove` (which checks, on the store, that the entry is still the stray one),
   * unless its deletion is already under way; `done` is called once it settles.
   */
  delete(path: string, remove: () => Promise<void>, done: () => void): void;
  /** True while an entry under `prefix` is being deleted. */
  deletingUnder(prefix: string): boolean;
}

/**
 * Creates the stray-entry deletions of one session.
 * @param entry what an entry is called in log lines: `key` (etcd), `node` (ZooKeeper)
 * @param gone true for a store error that means the entry is gone already (not worth a warning)
 */
export function createStrayCandidates(opts: {
  limit: LimitFunction;
  log: Logger;
  entry: 'key' | 'node';
  gone?: (err: unknown) => boolean;
}): StrayCandidates {
  const deleting = new Set<string>();
  return {
    delete(path, remove, done) {
      if (deleting.has(path)) return;
      deleting.add(path);
      void opts
        .limit(remove)
        .catch((err: unknown) => {
          if (!opts.gone?.(err))
            opts.log.warn(
              { err: { message: (err as Error).message }, [opts.entry]: path },
              `cannot delete a stray candidate ${opts.entry}`,
            );
        })
        .finally(() => {
          deleting.delete(path);
          done();
        });
    },
    deletingUnder: (prefix) => [...deleting].some((k) => k.startsWith(prefix)),
  };
}
