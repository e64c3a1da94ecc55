/**
 * An in-memory leadership store and a backend over it (src/leadership/backend.ts `LeadershipBackend`), for
 * driving the shared leadership code — the campaign loop (src/leadership/candidate-state.ts) and the balancer
 * (src/leadership/leadership-group.ts) — with several replicas in one process, without etcd or ZooKeeper. It
 * is also the smallest example of what a backend provides; the real ones are src/leadership/etcd/ and
 * src/leadership/zookeeper/, and they are held to test/integration/leadership-contract.test.ts.
 *
 * What the store models:
 * - **sessions**, one per replica, live until closed or expired: closing or expiry deletes every entry of the
 *   session at once (an etcd lease's keys, a ZooKeeper session's ephemeral nodes);
 * - **membership entries**, replica id → membership value (src/leadership/assignment.ts), one per session;
 * - per election prefix, a **line of candidate entries** in creation order (etcd's create revision, ZooKeeper's
 *   sequence): the first leads;
 * - a **revision** bumped by every change, and change notifications to every view (a watch);
 * - every backend call (`call`) counted in `ops`, applied at once and answered on a later turn of the event
 *   loop, as a network call is: a term may end while its create is in flight.
 *
 * What it leaves out: lost answers and the stray entries they leave (so `tidy` never finds one), connection
 * loss within a session (ZooKeeper's suspended state), a new session after expiry (an expired replica stays
 * without one, as a killed process does), views that lag the store (each view reads it directly), coalesced
 * fencing reads (src/leadership/fresh-read.ts), rate limits on membership writes, and a session freshness
 * measure (`SessionHealth` has one variant per real backend: `session` is undefined here).
 */
import type {
  BackendContext,
  BackendElection,
  Candidate,
  LeadershipBackend,
} from '../../src/leadership/backend.ts';
import { createCandidateState } from '../../src/leadership/candidate-state.ts';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import { createWaitList } from '../../src/leadership/wait-list.ts';
import type { Logger } from '../../src/log.ts';

/** A replica's session in the store. */
export interface FakeSession {
  readonly id: number;
  readonly replicaId: string;
  /** Aborted when the session ends (closed or expired): its entries are gone. */
  readonly ended: AbortSignal;
}

/** A candidate entry: its key (`<prefix><sequence>`), its replica and its session. */
export interface FakeEntry extends Candidate {
  readonly session: number;
}

/** The store shared by the replicas of a test. */
export interface FakeLeadershipStore {
  /** Backend calls so far (session opens, membership writes, creates, deletes, reads). */
  readonly ops: number;
  /** Bumped by every change. */
  readonly revision: number;
  /** Opens a session for `replicaId` with its membership entry (replacing an older session's). */
  open(replicaId: string, memberValue: string): FakeSession;
  /** Ends a session (a replica leaving): its entries go at once. */
  close(s: FakeSession): void;
  /**
   * Test hook: `replicaId`'s session expires without a resign (a SIGKILL, a partition past the TTL). Its
   * terms end first — a real leader stops once its session may have expired, before the store expires it
   * (src/failover-timers.ts `sessionValidMs`) — then its entries go.
   */
  expire(replicaId: string): void;
  /** Live sessions now. */
  sessions(): number;
  /** Live member ids, sorted (a view's read: not counted). */
  members(): string[];
  memberValue(id: string): string | undefined;
  /** An election's line, the leader first (a view's read: not counted). */
  line(prefix: string): readonly FakeEntry[];
  /** Calls `cb` after every change (what a watch delivers). */
  onChange(cb: () => void): void;
  /** Resolves once the revision is past `since`, or `signal` aborts. */
  changedSince(since: number, signal: AbortSignal): Promise<void>;
  // Backend calls: counted, answered on a later turn of the event loop.
  setMember(s: FakeSession, value: string): Promise<void>;
  /** Appends a candidate entry of `s` to the line of `prefix`; rejects when `s` has ended. */
  create(s: FakeSession, prefix: string): Promise<FakeEntry>;
  /** Deletes the entry `key` if it is still of session `s`. */
  remove(s: FakeSession, key: string): Promise<void>;
  /** The line of `prefix` and the revision it was read at. */
  read(prefix: string): Promise<{ line: readonly FakeEntry[]; revision: number }>;
}

/** Creates an empty store. */
export function createFakeLeadershipStore(): FakeLeadershipStore {
  let ops = 0;
  let revision = 0;
  let sequence = 0;
  let sessionIds = 0;
  const live = new Map<number, { session: FakeSession; end: AbortController }>();
  const members = new Map<string, { value: string; session: number }>();
  const lines = new Map<string, FakeEntry[]>();
  const listeners: (() => void)[] = [];
  const waiters = new Set<() => void>();

  const changed = () => {
    revision += 1;
    for (const w of [...waiters]) w();
    for (const cb of listeners) cb();
  };
  /** A backend call: counted, applied now, answered on a later turn of the event loop. */
  const call = async <T>(apply: () => T): Promise<T> => {
    ops += 1;
    const result = apply();
    await new Promise((resolve) => setImmediate(resolve));
    return result;
  };
  const isLive = (s: FakeSession) => live.has(s.id);

  function end(s: FakeSession): void {
    const entry = live.get(s.id);
    if (!entry) return;
    live.delete(s.id);
    // Its terms end before its entries go (see `expire`): no other replica can be elected in between.
    entry.end.abort(new Error('session ended'));
    if (members.get(s.replicaId)?.session === s.id) members.delete(s.replicaId);
    for (const [prefix, line] of lines)
      lines.set(
        prefix,
        line.filter((e) => e.session !== s.id),
      );
    changed();
  }

  return {
    get ops() {
      return ops;
    },
    get revision() {
      return revision;
    },
    open(replicaId, memberValue) {
      ops += 1;
      const end = new AbortController();
      const session: FakeSession = { id: ++sessionIds, replicaId, ended: end.signal };
      live.set(session.id, { session, end });
      members.set(replicaId, { value: memberValue, session: session.id });
      changed();
      return session;
    },
    close: end,
    expire(replicaId) {
      const found = [...live.values()].find((x) => x.session.replicaId === replicaId);
      if (!found) throw new Error(`no live session of ${replicaId}`);
      end(found.session);
    },
    sessions: () => live.size,
    members: () => [...members.keys()].sort(),
    memberValue: (id) => members.get(id)?.value,
    line: (prefix) => lines.get(prefix) ?? [],
    onChange(cb) {
      listeners.push(cb);
    },
    changedSince(since, signal) {
      return new Promise<void>((resolve) => {
        const done = () => {
          waiters.delete(done);
          signal.removeEventListener('abort', done);
          resolve();
        };
        if (revision > since || signal.aborted) return resolve();
        waiters.add(done);
        signal.addEventListener('abort', done, { once: true });
      });
    },
    setMember: (s, value) =>
      call(() => {
        if (!isLive(s) || members.get(s.replicaId)?.session !== s.id) return;
        members.set(s.replicaId, { value, session: s.id });
        changed();
      }),
    create: (s, prefix) =>
      call(() => {
        if (!isLive(s)) throw new Error('session ended');
        const entry: FakeEntry = {
          key: `${prefix}${String(++sequence).padStart(10, '0')}`,
          replicaId: s.replicaId,
          session: s.id,
        };
        lines.set(prefix, [...(lines.get(prefix) ?? []), entry]);
        changed();
        return entry;
      }),
    remove: (s, key) =>
      call(() => {
        for (const [prefix, line] of lines) {
          const rest = line.filter((e) => e.key !== key || e.session !== s.id);
          if (rest.length === line.length) continue;
          lines.set(prefix, rest);
          changed();
        }
      }),
    read: (prefix) => call(() => ({ line: [...(lines.get(prefix) ?? [])], revision })),
  };
}

/**
 * A replica's backend on `store`, for `createLeadershipGroup({ backend: (ctx) => createFakeBackend(store,
 * id, ctx), ... })`. One session per replica, opened by `start()`; each election built with
 * `createCandidateState` as the real backends build theirs.
 */
export function createFakeBackend(
  store: FakeLeadershipStore,
  replicaId: string,
  ctx: BackendContext,
): LeadershipBackend {
  let session: FakeSession | undefined;
  let started = false;
  let closed = false;
  /** The membership value last written. */
  let written: string | undefined;
  const onLive: (() => void)[] = [];
  const sessionWaiters = createWaitList<FakeSession>();
  /** Stray entries being deleted (`tidy`). */
  const deleting = new Set<string>();
  const liveSession = () => (session && !session.ended.aborted ? session : undefined);

  function election(prefix: string, log: Logger): BackendElection {
    const state = createCandidateState({ log, logInterruptions: true });
    /** This term's entry, from its create until `afterTerm`. */
    let own: FakeEntry | undefined;
    /** The session of the term now, if any. */
    let termSession: FakeSession | undefined;

    /** One term on `s`: creates our entry, waits until it is first in line, leads until `end` aborts. */
    async function term(s: FakeSession, end: AbortSignal): Promise<void> {
      termSession = s;
      // The session ending ends the term: a planned end when this replica closes it, else a loss.
      const onSessionEnd = () =>
        closed
          ? state.endTerm('resigned: the session is closing', 'ended')
          : state.endTerm('session expired', 'lost');
      s.ended.addEventListener('abort', onSessionEnd, { once: true });
      try {
        if (s.ended.aborted) return onSessionEnd();
        // Not abortable: once created, the entry is ours to delete (afterTerm does), even if the term ended.
        const entry = await ctx.limit(() => store.create(s, prefix));
        own = entry;
        for (;;) {
          end.throwIfAborted();
          const { line, revision } = await ctx.limit(() => store.read(prefix));
          const at = line.findIndex((c) => c.key === entry.key);
          if (at < 0) throw new Error(`candidate entry ${entry.key} vanished`);
          if (at === 0) {
            end.throwIfAborted();
            if (!state.running) return;
            await state.lead(end, { key: entry.key });
            return;
          }
          // A predecessor: wait for any change since the read (a watch set with it), then read again.
          await store.changedSince(revision, end);
        }
      } finally {
        s.ended.removeEventListener('abort', onSessionEnd);
      }
    }

    return state.election({
      prefix,
      campaign: {
        next(signal) {
          if (closed) return Promise.reject(new Error('closed'));
          const s = liveSession();
          return s ? Promise.resolve(s) : sessionWaiters.wait(signal);
        },
        closed: () => closed,
        term,
        lost: (s) => s.ended,
        async afterTerm(s) {
          const entry = own;
          own = undefined;
          termSession = undefined;
          // The session lives on (shared by every election): our entry must go, so the next candidate leads.
          if (entry && !s.ended.aborted) await ctx.limit(() => store.remove(s, entry.key));
        },
        backoffUntil: (s) => s.ended,
      },
      onResign() {
        const entry = own;
        const s = termSession;
        return async () => {
          if (entry && s && !s.ended.aborted) await store.remove(s, entry.key);
        };
      },
      // No freshness measure: SessionHealth has one variant per real backend (src/leadership/leadership.ts).
      session: () => undefined,
      stillLeader: () => state.leader && termSession !== undefined && !termSession.ended.aborted,
      async fence(signal) {
        if (!state.leader) throw new FencedError('not the leader');
        const entry = own;
        const s = termSession;
        if (!entry || !s || s.ended.aborted) throw new FencedError('session ended');
        signal.throwIfAborted();
        const { line } = await store.read(prefix);
        signal.throwIfAborted();
        if (line[0]?.key !== entry.key) {
          if (own === entry) state.endTerm('leader entry gone', 'lost');
          throw new FencedError('leader entry gone');
        }
        if (!state.leader) throw new FencedError('leadership lost during the fencing read');
      },
      async currentLeader() {
        if (state.leader) return replicaId;
        return store.line(prefix)[0]?.replicaId;
      },
    });
  }

  return {
    view: {
      get synced() {
        return started;
      },
      candidates: (prefix) => store.line(prefix),
      members: () => store.members(),
      memberValue: (id) => store.memberValue(id),
      onChange: (cb) => store.onChange(cb),
    },
    get live() {
      return liveSession() !== undefined;
    },
    onLive(cb) {
      onLive.push(cb);
    },
    refreshMemberValue() {
      const s = liveSession();
      const value = ctx.memberValue();
      if (!s || value === written) return;
      written = value;
      void store.setMember(s, value);
    },
    election,
    tidy(e, done) {
      const s = liveSession();
      if (s && !e.wanted && e.idle)
        for (const c of store.line(e.prefix))
          if (c.session === s.id && !deleting.has(c.key)) {
            deleting.add(c.key);
            void ctx
              .limit(() => store.remove(s, c.key))
              .finally(() => {
                deleting.delete(c.key);
                done();
              });
          }
      return [...deleting].some((k) => k.startsWith(e.prefix));
    },
    start() {
      if (started || closed) return;
      started = true;
      written = ctx.memberValue();
      session = store.open(replicaId, written);
      sessionWaiters.resolveAll(session);
      for (const cb of onLive) cb();
    },
    async close(elections) {
      closed = true;
      sessionWaiters.rejectAll(new Error('closed'));
      if (session) store.close(session);
      await Promise.all(elections.map((e) => e.resign()));
    },
    closeTimeoutMs: 1000,
  };
}
