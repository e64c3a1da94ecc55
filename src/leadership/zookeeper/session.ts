/**
 * The ZooKeeper session of a replica: **one session** (one handle of the reference C client) that every
 * election of the replica campaigns on, and the replica's membership node `<members dir>/<replica id>`
 * (`<root>/clusters/<scope>/members`, src/queue/job-identity.ts `zookeeperMembersDir`), an
 * ephemeral node of that session whose data is the membership value (src/leadership/assignment.ts).
 *
 * Connection states, as Curator names them:
 * - **connected**: a {@link ZkConnection} is live; elections may lead on it;
 * - **suspended** (the client lost its server and is looking for another): the connection ends at once —
 *   every term on it ends, no DELETE goes out — since the session may already be gone on the server. When
 *   the client reconnects within the session (same session id), a new connection begins and the elections
 *   read their line again: their nodes still exist;
 * - **lost** (the server expired the session, or the client has been suspended for a whole session timeout,
 *   so the server has expired it or is about to): the handle is closed and never used again, a new session
 *   is opened and registered, and the elections campaign again with new nodes.
 * Digest authentication (`user:password`) is added to every handle before it connects; then every node the
 * session creates is created with `CREATOR_ALL_ACL` in the same request (the election and member directories
 * too: ZooKeeper checks a node's deletion and its children's creation against its parent's ACL).
 */
import { backoffMs } from '../../backoff.ts';
import type { MonotonicClock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import { sleep } from '../../sleep.ts';
import { withTimeout } from '../../with-timeout.ts';
import { createMemberValueWriter } from '../member-value.ts';
import { createWaitList } from '../wait-list.ts';
import {
  addDigestAuth,
  CREATOR_ALL_ACL,
  createNode,
  createZkHandle,
  OPEN_ACL_UNSAFE,
  statOf,
  ZK_ERR,
  ZK_EXPIRED_SESSION_STATE,
  ZK_MODE,
  type ZkAcl,
  type ZkHandle,
  zkCode,
} from './client.ts';

/** The default root of every node the cleaner creates (outside Kyuubi's `kyuubi.ha.namespace`). */
export const ZOOKEEPER_DEFAULT_ROOT = '/spark-driver-cleaner';

/** What a replica refused by the ACL of the cleaner's nodes (ZNOAUTH) is told to fix. */
export const NO_AUTH_FIX =
  "the nodes under zookeeperRoot belong to another digest user: set zookeeperAuth (--zookeeper-auth, SDC_ZOOKEEPER_AUTH) or zookeeperAuthFile (--zookeeper-auth-file, SDC_ZOOKEEPER_AUTH_FILE) to the other replicas' user:password; or zookeeperRoot's parent lets this user create no child: create zookeeperRoot in advance with an ACL for the cleaner's user";

/** The fix logged when registering meets "no node" under a chroot: the C client does not create the chroot. */
export const NO_CHROOT_FIX =
  'the chroot of zookeeper (--zookeeper, SDC_ZOOKEEPER) does not exist: create it, or drop it from the connect string';

/** How to reach ZooKeeper. */
export interface ZooKeeperSettings {
  /** `host:port,...`, optionally followed by a chroot (`/path`). */
  connect: string;
  /** The root of the cleaner's nodes (absolute path, no trailing `/`). */
  root: string;
  /** The session timeout asked for, ms (the server bounds it to 2–20 ticks by default). */
  sessionTimeoutMs: number;
  /** Digest authentication, `user:password`; undefined: none (nodes are open). */
  digest?: string;
}

/** One connected stretch of the session: ends (`lost`) on disconnection, expiry or close. */
export interface ZkConnection {
  readonly handle: ZkHandle;
  /** The session id (hex). */
  readonly sessionId: string;
  /** Aborted when this connection ends (the session may live on: a later connection has the same id). */
  readonly lost: AbortSignal;
  /** The session timeout the server granted, ms (it bounds what was asked for). */
  readonly timeoutMs: number;
}

/** Options of {@link createZooKeeperSession}. */
export interface ZooKeeperSessionOptions {
  settings: ZooKeeperSettings;
  replicaId: string;
  log: Logger;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
  /** The membership value now (default: the replica id). */
  memberValue?: () => string;
  /** Directories to create (with the ACL) on every new session before it counts as connected. */
  directories: () => readonly string[];
  /** The directory of the membership nodes of the replica's scope (`<root>/clusters/<scope>/members`). */
  membersDir: string;
}

/** A replica's ZooKeeper session. */
export interface ZooKeeperSession {
  /** The live connection, or undefined while suspended, starting, or closed. */
  readonly connection: ZkConnection | undefined;
  /**
   * The id (hex) of the session that may still live — connected, or suspended and not yet given up — or
   * undefined (none yet, expired, closed). Its candidate nodes may still stand: the balancer keeps its
   * candidacies while it is defined.
   */
  readonly sessionId: string | undefined;
  /**
   * Resolves with the live connection, waiting for the next one if none is.
   * @throws the signal's reason when it aborts first, or an Error when the session closes.
   */
  nextConnection(signal: AbortSignal): Promise<ZkConnection>;
  /** Calls `cb` with each connection (a new session, or the same session reconnected). */
  onConnection(cb: (c: ZkConnection) => void): void;
  /** How long the session has been without a connection, ms (0 while connected; undefined before the first). */
  readonly disconnectedForMs: number | undefined;
  /** Sessions opened so far (1 while nothing went wrong). */
  readonly sessionsOpened: number;
  /** True once `close()` was called. */
  readonly closed: boolean;
  /** The membership node's path. */
  readonly memberPath: string;
  /** The ACL every node of this session is created with: `CREATOR_ALL_ACL` with digest auth, else open. */
  readonly acl: readonly ZkAcl[];
  /** Writes the membership value again if it changed (one write at a time, at most one per 500 ms). */
  refreshMemberValue(): void;
  start(): void;
  /** Ends the connection and closes the handle: every ephemeral node of the session goes at once. */
  close(): Promise<void>;
}

/** Creates `path` and its missing parents as persistent nodes, with `acl`. */
async function ensurePath(handle: ZkHandle, path: string, acl: readonly ZkAcl[]): Promise<void> {
  const parts = path.split('/').filter(Boolean);
  let at = '';
  for (const part of parts) {
    at += `/${part}`;
    try {
      await createNode(handle, at, '', ZK_MODE.persistent, acl);
    } catch (err) {
      if (zkCode(err) !== ZK_ERR.nodeExists) throw err;
    }
  }
}

/** Creates the session of a replica; `start()` opens it. */
export function createZooKeeperSession(opts: ZooKeeperSessionOptions): ZooKeeperSession {
  const { log, settings } = opts;
  const timeoutMs = settings.sessionTimeoutMs;
  const memberPath = `${opts.membersDir}/${opts.replicaId}`;
  const valueNow = () => opts.memberValue?.() ?? opts.replicaId;
  let running = false;
  let closed = false;
  let handle: ZkHandle | undefined;
  let current: (ZkConnection & { end: AbortController }) | undefined;
  let knownSession: string | undefined;
  let disconnectedAt: number | undefined;
  let opened = 0;
  const listeners: ((c: ZkConnection) => void)[] = [];
  const waiters = createWaitList<ZkConnection>();
  const stop = new AbortController();
  const memberValue = createMemberValueWriter({
    valueNow,
    write(value) {
      const c = current;
      if (!running || !c) return undefined;
      return withTimeout(c.handle.set(memberPath, value, -1), timeoutMs, 'membership update').then(
        () => true,
      );
    },
    signal: stop.signal,
    monotonicNow: opts.monotonicNow,
    log,
    entry: 'node',
  });

  const acl = settings.digest ? CREATOR_ALL_ACL : OPEN_ACL_UNSAFE;

  function endConnection(why: string, how: 'lost' | 'ended') {
    const c = current;
    if (!c) return;
    current = undefined;
    if (disconnectedAt === undefined) {
      disconnectedAt = opts.monotonicNow();
      giveUpAt = disconnectedAt + timeoutMs;
    }
    if (how === 'lost') log.warn({ sessionId: c.sessionId, reason: why }, 'zookeeper connection lost');
    c.end.abort(new Error(why));
  }

  /** Registers the membership node of session `sessionId` (replacing a node of an older session). */
  async function register(h: ZkHandle, sessionId: string): Promise<void> {
    const value = valueNow();
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await createNode(h, memberPath, value, ZK_MODE.ephemeral, acl);
        memberValue.registered(value);
        return;
      } catch (err) {
        if (zkCode(err) !== ZK_ERR.nodeExists) throw err;
      }
      const stat = await statOf(h, memberPath);
      if (stat?.ephemeralOwner === sessionId) {
        await h.set(memberPath, value, -1);
        memberValue.registered(value);
        return;
      }
      // A node of an earlier session of this replica (a restart within the session timeout): replace it.
      if (stat) await h.delete_(memberPath, -1).catch(() => undefined);
    }
    throw new Error(`cannot register ${memberPath}`);
  }

  /** The handle connected (a new session, or the same one again): set up, then publish the connection. */
  async function connected(h: ZkHandle, authed: Promise<void>): Promise<void> {
    const sessionId = h.client_id;
    const fresh = sessionId !== knownSession;
    log.debug({ sessionId, newSession: fresh }, 'zookeeper handle connected');
    try {
      if (fresh) {
        await withTimeout(authed, timeoutMs, 'zookeeper authentication');
        for (const dir of [opts.membersDir, ...opts.directories()]) await ensurePath(h, dir, acl);
        await register(h, sessionId);
      }
    } catch (err) {
      // ZNOAUTH: the root's nodes belong to another digest user (the other replicas' `zookeeperAuth`).
      const code = zkCode(err);
      const chroot = /\/[^,]*$/.test(settings.connect);
      const fix =
        code === ZK_ERR.noAuth
          ? { fix: NO_AUTH_FIX }
          : code === ZK_ERR.noNode && chroot
            ? { fix: NO_CHROOT_FIX }
            : {};
      log.warn(
        { err: { message: (err as Error).message }, ...fix },
        'cannot register with zookeeper; reconnecting',
      );
      if (handle === h) reopen();
      return;
    }
    failedOpens = 0;
    if (handle !== h || !running || h.client_id !== sessionId) return;
    knownSession = sessionId;
    disconnectedAt = undefined;
    giveUpAt = undefined;
    const end = new AbortController();
    // Granted by the server within its bounds; what was asked for if the binding does not say.
    const grantedMs = h.timeout > 0 ? h.timeout : timeoutMs;
    everConnected = true;
    current = { handle: h, sessionId, lost: end.signal, timeoutMs: grantedMs, end };
    log.info({ sessionId, newSession: fresh, timeoutMs: grantedMs }, 'zookeeper session connected');
    const live: ZkConnection = { handle: h, sessionId, lost: end.signal, timeoutMs: grantedMs };
    waiters.resolveAll(live);
    for (const cb of listeners) cb(live);
    if (!fresh) refreshMemberValue();
  }

  /** Opens a new session on a new handle (never reusing an expired one). */
  function open(): void {
    if (!running) return;
    const h = createZkHandle(settings.connect, timeoutMs);
    handle = h;
    opened += 1;
    let authed = Promise.resolve();
    h.on('connect', () => {
      if (handle === h) void connected(h, authed);
    });
    h.on('connecting', () => {
      if (handle === h) endConnection('disconnected from zookeeper (suspended)', 'lost');
    });
    h.on('close', (_h, code) => {
      if (handle !== h || !running) return;
      log.info({ code, sessionId: knownSession }, 'zookeeper handle closed');
      endConnection(
        code === ZK_EXPIRED_SESSION_STATE ? 'zookeeper session expired' : `zookeeper handle closed (${code})`,
        'lost',
      );
      reopen();
    });
    h.init({});
    if (settings.digest) authed = addDigestAuth(h, settings.digest);
  }

  let reopening = false;
  /** Sessions replaced in a row without registering: the backoff before the next. */
  let failedOpens = 0;
  /** Closes the handle and opens a new session after a short backoff. */
  function reopen(): void {
    if (reopening || !running) return;
    reopening = true;
    endConnection('zookeeper session ended', 'lost');
    const old = handle;
    handle = undefined;
    knownSession = undefined;
    giveUpAt = opts.monotonicNow() + (servers + 1) * timeoutMs;
    try {
      old?.close();
    } catch {
      // already closed
    }
    void sleep(backoffMs(++failedOpens, { baseMs: 200, maxMs: 5000, jitter: true }), stop.signal).then(() => {
      reopening = false;
      open();
    });
  }

  // Suspended for a whole session timeout: the server has expired the session (or will before we could use
  // it), and the client learns it only once it reaches a server. Treat it as lost now. A new handle tries the
  // servers one after another, waiting up to a session timeout on each that accepts and does not answer:
  // it gets that long per server before it is replaced in turn.
  let watchdog: NodeJS.Timeout | undefined;
  const servers = settings.connect.replace(/\/.*$/, '').split(',').length;
  let giveUpAt: number | undefined;
  /** Never connected since start: said at warn after a session timeout, then at most once a minute. */
  let everConnected = false;
  let startedAtMs = 0;
  let unreachableSaidAtMs: number | undefined;
  const UNREACHABLE_REPEAT_MS = 60_000;

  const refreshMemberValue = () => memberValue.refresh();

  return {
    get connection() {
      return current;
    },
    get sessionId() {
      return closed ? undefined : knownSession;
    },
    nextConnection(signal) {
      if (closed) return Promise.reject(new Error('resigned'));
      if (current) return Promise.resolve(current);
      return waiters.wait(signal);
    },
    onConnection(cb) {
      listeners.push(cb);
    },
    get disconnectedForMs() {
      if (current) return 0;
      return disconnectedAt === undefined ? undefined : opts.monotonicNow() - disconnectedAt;
    },
    get sessionsOpened() {
      return opened;
    },
    get closed() {
      return closed;
    },
    memberPath,
    acl,
    refreshMemberValue,
    start() {
      if (running || closed) return;
      running = true;
      startedAtMs = opts.monotonicNow();
      open();
      watchdog = setInterval(
        () => {
          const now = opts.monotonicNow();
          if (
            !everConnected &&
            now - startedAtMs >= timeoutMs &&
            (unreachableSaidAtMs === undefined || now - unreachableSaidAtMs >= UNREACHABLE_REPEAT_MS)
          ) {
            unreachableSaidAtMs = now;
            log.warn(
              { connect: settings.connect, waitedMs: Math.round(now - startedAtMs) },
              'cannot connect to zookeeper: no server of the connect string answered yet; retrying',
            );
          }
          if (!current && giveUpAt !== undefined && now >= giveUpAt) {
            log.warn(
              { timeoutMs, disconnectedForMs: now - (disconnectedAt ?? now) },
              'disconnected from zookeeper for a session timeout: opening a new session',
            );
            reopen();
          }
        },
        Math.min(250, timeoutMs / 8),
      );
    },
    async close() {
      if (closed) return;
      closed = true;
      running = false;
      stop.abort();
      clearInterval(watchdog);
      waiters.rejectAll(new Error('resigned'));
      endConnection('resigned', 'ended');
      const h = handle;
      handle = undefined;
      try {
        h?.close();
      } catch {
        // already closed
      }
    },
  };
}
