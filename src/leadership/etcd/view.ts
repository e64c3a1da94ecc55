/**
 * A replica's in-memory view of every election and of the live members of its scope, kept by **one watch**
 * over the leadership root (src/leadership/etcd/session.ts `ETCD_ROOT`) instead of a watch per target: one
 * range read, then the watch from the next revision (etcd3 resumes it from its last revision after a reconnect; a watch
 * etcd cancels — compacted history — is replaced by a fresh read and watch).
 *
 * The view only tells the elections and the balancer **when to look**: who leads is decided by etcd (the
 * candidate key with the lowest create revision, confirmed by a read before taking a term), and every DELETE
 * is fenced by a read of the leader key. A view that lags or stalls costs time, never safety.
 */
import type { Etcd3, IKeyValue, Watcher } from 'etcd3';
import { backoffMs } from '../../backoff.ts';
import type { Logger } from '../../log.ts';
import { sleep } from '../../sleep.ts';
import { withTimeout } from '../../with-timeout.ts';
import { ETCD_ROOT } from './session.ts';

/** One candidate key of an election. */
export interface CandidateKey {
  /** The full key, `<election prefix><lease id>`. */
  readonly key: string;
  /** Its value: the candidate's replica id. */
  readonly replicaId: string;
  readonly createRevision: bigint;
  /** The lease the key is attached to (decimal). */
  readonly lease: string;
}

/** Options of {@link createElectionView}. */
export interface ElectionViewOptions {
  client: Etcd3;
  log: Logger;
  /** The watched root (default `ETCD_ROOT`). */
  root?: string;
  /** Prefix of the membership keys of the replica's scope (`<root>clusters/<scope>/members/`). */
  membersPrefix: string;
}

/** The view; `start()` reads and watches. */
export interface ElectionView {
  /** True once the first read is applied. */
  readonly synced: boolean;
  /** The revision the view reflects (0 before the first read). */
  readonly revision: bigint;
  /** The candidates of an election prefix, lowest create revision (the leader) first. */
  candidates(prefix: string): readonly CandidateKey[];
  /** The live member ids (replicas whose membership key exists), sorted. */
  members(): readonly string[];
  /** The value of a live member's key (its target set, src/leadership/etcd/backend.ts). */
  memberValue(id: string): string | undefined;
  /**
   * The ids of the live members of release 0.1.0 (`<root>members/<id>`), sorted: a rolling update from it
   * waits for them (src/leadership/previous-release-gate.ts).
   */
  previousReleaseMembers(): readonly string[];
  /**
   * Calls `cb` after each applied change with the election prefixes it touched (all of them after a fresh
   * read) and whether the members changed.
   */
  onChange(cb: (prefixes: ReadonlySet<string>, membersChanged: boolean) => void): void;
  /**
   * Resolves when the view next changes `prefix` (or is read afresh), when `signal` aborts, or after
   * `timeoutMs`, whichever comes first, saying which. Never rejects.
   */
  changed(prefix: string, signal: AbortSignal, timeoutMs: number): Promise<'changed' | 'timeout' | 'aborted'>;
  /** Watch streams opened so far (1 while nothing went wrong). */
  readonly watchesOpened: number;
  start(): void;
  /** Stops the watch; never rejects, takes at most {@link WATCH_CANCEL_TIMEOUT_MS}. */
  close(): Promise<void>;
}

/** The election prefix of a candidate key: everything up to its last `/`. */
function prefixOf(key: string): string {
  return key.slice(0, key.lastIndexOf('/') + 1);
}

/** A candidate key under `clusters/` (after the root): `clusters/<cluster>/election/<namespace>/<lease>`. */
const CLUSTER_CANDIDATE = /^clusters\/[^/]+\/election\/[^/]+\/[^/]+$/;

/** How long closing the view waits for etcd to confirm the watch's cancellation, ms. */
export const WATCH_CANCEL_TIMEOUT_MS = 1000;

/** Creates the view of a replica. */
export function createElectionView(opts: ElectionViewOptions): ElectionView {
  const root = opts.root ?? ETCD_ROOT;
  const { membersPrefix } = opts;
  /** Release 0.1.0's elections and membership keys (src/queue/job-identity.ts `previousRelease…`). */
  const oldElectionRoot = `${root}election/`;
  const oldMembersPrefix = `${root}members/`;
  /** Live 0.1.0 member ids; the sorted list is rebuilt only after a change. */
  const oldMembers = new Set<string>();
  let oldMembersSorted: readonly string[] | undefined;
  /** Election prefix → candidate key → candidate. */
  const elections = new Map<string, Map<string, CandidateKey>>();
  /** Member id → its key's value. */
  const memberKeys = new Map<string, string>();
  let revision = 0n;
  let synced = false;
  let running = false;
  let watcher: Watcher | undefined;
  let watches = 0;
  const stop = new AbortController();
  const listeners: ((prefixes: ReadonlySet<string>, membersChanged: boolean) => void)[] = [];
  const waiting = new Map<string, Set<(why: 'changed') => void>>();

  function notify(prefixes: Set<string>, membersChanged: boolean) {
    for (const p of prefixes) {
      const ws = waiting.get(p);
      if (!ws) continue;
      waiting.delete(p);
      for (const w of ws) w('changed');
    }
    if (prefixes.size === 0 && !membersChanged) return;
    for (const cb of listeners) cb(prefixes, membersChanged);
  }

  /** Applies a put (kv) or a delete; returns what it touched. */
  function apply(kv: IKeyValue, deleted: boolean, touched: Set<string>): boolean {
    const key = kv.key.toString();
    if (key.startsWith(membersPrefix)) {
      const id = key.slice(membersPrefix.length);
      if (deleted) return memberKeys.delete(id);
      const had = memberKeys.get(id);
      const value = kv.value.toString();
      memberKeys.set(id, value);
      return had !== value;
    }
    if (key.startsWith(oldMembersPrefix)) {
      const id = key.slice(oldMembersPrefix.length);
      const had = oldMembers.has(id);
      if (deleted) oldMembers.delete(id);
      else oldMembers.add(id);
      if (had === deleted) oldMembersSorted = undefined;
      return had === deleted;
    }
    if (!key.startsWith(oldElectionRoot) && !CLUSTER_CANDIDATE.test(key.slice(root.length))) return false;
    const prefix = prefixOf(key);
    touched.add(prefix);
    let e = elections.get(prefix);
    if (deleted) {
      e?.delete(key);
      if (e?.size === 0) elections.delete(prefix);
      return false;
    }
    if (!e) {
      e = new Map();
      elections.set(prefix, e);
    }
    e.set(key, {
      key,
      replicaId: kv.value.toString(),
      createRevision: BigInt(kv.create_revision),
      lease: kv.lease,
    });
    return false;
  }

  /** Reads everything and watches from the next revision; on failure retries with backoff. */
  async function sync(): Promise<void> {
    let failures = 0;
    while (running) {
      try {
        const res = await opts.client.getAll().prefix(root).exec();
        if (!running) return;
        elections.clear();
        memberKeys.clear();
        oldMembers.clear();
        oldMembersSorted = undefined;
        const touched = new Set<string>();
        for (const kv of res.kvs) apply(kv, false, touched);
        const all = new Set<string>([...touched, ...waiting.keys()]);
        revision = BigInt(res.header.revision);
        synced = true;
        const w = await opts.client
          .watch()
          .prefix(root)
          .startRevision((revision + 1n).toString())
          .create();
        if (!running) {
          await w.cancel().catch(() => undefined);
          return;
        }
        watches += 1;
        watcher = w;
        // etcd3 resumes a dropped watch from the revision of its last *created* answer (etcd3 1.1.2,
        // lib/watch.js: Watcher on 'connected' → updateRevision), which is the store's revision when the watch
        // was created, not the last event delivered: the history still to be sent then (the keys written
        // between our read and the watch's creation) would be skipped for good, and this view would miss
        // members and candidates until the next full read. So at each drop the resume starts after the last
        // revision this view applied.
        w.on('disconnected', () => {
          if (watcher === w) w.request.start_revision = (revision + 1n).toString();
        });
        w.on('data', (res) => {
          if (watcher !== w) return;
          const touched = new Set<string>();
          let membersChanged = false;
          for (const ev of res.events) if (apply(ev.kv, ev.type === 'Delete', touched)) membersChanged = true;
          const r = BigInt(res.header.revision);
          if (r > revision) revision = r;
          notify(touched, membersChanged);
        });
        w.on('error', (err) => {
          if (watcher !== w) return;
          opts.log.warn({ err: { message: err.message } }, 'election watch cancelled; reading again');
          watcher = undefined;
          void w.cancel().catch(() => undefined);
          void sync();
        });
        notify(all, true);
        if (failures > 0) opts.log.info({ failures }, 'election view: read again after failures');
        return;
      } catch (err) {
        failures += 1;
        opts.log.warn({ err: { message: (err as Error).message } }, 'election view: read failed; retrying');
        await sleep(backoffMs(failures, { baseMs: 200, maxMs: 5000, jitter: true }), stop.signal);
      }
    }
  }

  return {
    get synced() {
      return synced;
    },
    get revision() {
      return revision;
    },
    candidates(prefix) {
      const e = elections.get(prefix);
      if (!e) return [];
      return [...e.values()].sort((a, b) =>
        a.createRevision < b.createRevision ? -1 : a.createRevision > b.createRevision ? 1 : 0,
      );
    },
    members: () => [...memberKeys.keys()].sort(),
    memberValue: (id) => memberKeys.get(id),
    previousReleaseMembers() {
      oldMembersSorted ??= [...oldMembers].sort();
      return oldMembersSorted;
    },
    onChange(cb) {
      listeners.push(cb);
    },
    changed(prefix, signal, timeoutMs) {
      return new Promise((resolve) => {
        let ws = waiting.get(prefix);
        if (!ws) {
          ws = new Set();
          waiting.set(prefix, ws);
        }
        const done = (why: 'changed' | 'timeout' | 'aborted') => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          const set = waiting.get(prefix);
          set?.delete(done);
          if (set?.size === 0) waiting.delete(prefix);
          resolve(why);
        };
        const onAbort = () => done('aborted');
        const timer = setTimeout(() => done('timeout'), timeoutMs);
        signal.addEventListener('abort', onAbort, { once: true });
        ws.add(done);
        if (signal.aborted) onAbort();
      });
    },
    get watchesOpened() {
      return watches;
    },
    start() {
      if (running) return;
      running = true;
      void sync();
    },
    async close() {
      running = false;
      stop.abort();
      const w = watcher;
      watcher = undefined;
      // etcd3 waits for the server to confirm the cancellation; a frozen etcd never does. The watch stream
      // goes with the client anyway (the replica closes it next).
      if (w) await withTimeout(w.cancel(), WATCH_CANCEL_TIMEOUT_MS, 'watch cancel').catch(() => undefined);
    },
  };
}
