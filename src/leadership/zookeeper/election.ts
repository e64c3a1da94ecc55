/**
 * Leadership of one target on ZooKeeper, as Curator's LeaderLatch does it, on the replica's **shared
 * session** (src/leadership/zookeeper/session.ts): each candidate creates a **protected** ephemeral sequential
 * node `<election dir>/_c_<uuid>-<replica id>-latch-<sequence>`; the lowest sequence leads; every other
 * candidate watches only its predecessor, and reads the line again when it goes.
 * - Protected: a create whose answer was lost (connection loss) may have been applied; the next attempt on
 *   the same session looks for the node by its uuid before creating another, after a `sync` (the server it
 *   reconnected to may not have applied the create yet). A node of this replica and of the live session
 *   found ahead of our own in the line all the same is such a create: it is deleted, never waited for.
 * - Before a term starts, the node's `ephemeralOwner` must be our live session (Curator's CURATOR-696: a
 *   node of an earlier session, still listed while the server expires it, must not make us leader).
 * - A term ends as soon as the connection is lost (suspended: no DELETE until reconnected) or the session
 *   ends. On a reconnect within the session the node still stands: the election reads the line again (Curator
 *   CURATOR-620: each connection is one attempt; answers of an older connection are ignored).
 * - A term that ends otherwise (stepped down, withdrawn, resigned) **deletes its own node**, since the
 *   session is shared and lives on.
 * Fencing: before each DELETE, `fence()` confirms we are connected and our node still exists with our
 * session as its owner. Fencing reads are coalesced as etcd's are (src/leadership/fresh-read.ts): concurrent
 * calls share one read, never one that started before the call.
 */
import { randomUUID } from 'node:crypto';
import type { LimitFunction } from 'p-limit';
import { backoffMs } from '../../backoff.ts';
import type { MonotonicClock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import { sleep } from '../../sleep.ts';
import { withTimeout } from '../../with-timeout.ts';
import { type BackendElection, sessionValidMs } from '../backend.ts';
import { createCandidateState } from '../candidate-state.ts';
import { FencedError } from '../fenced-error.ts';
import { createFreshRead } from '../fresh-read.ts';
import { createNode, statOf, ZK_ERR, ZK_MODE, type ZkStat, zkCode } from './client.ts';
import type { ZkConnection, ZooKeeperSession } from './session.ts';
import { type CandidateNode, electionDir, parseCandidateName, type ZooKeeperView } from './view.ts';

/** Options of {@link createZooKeeperElection}. */
export interface ZooKeeperElectionOptions {
  session: ZooKeeperSession;
  view: ZooKeeperView;
  /** The election prefix (`<root>/election/<context>/<namespace>/`). */
  prefix: string;
  replicaId: string;
  log: Logger;
  /** Bounds the replica's concurrent campaign calls. */
  limit: LimitFunction;
  /** Timeout of the fencing read and of deletes, ms. */
  fenceTimeoutMs: number;
  /** The monotonic clock, ms (src/clock.ts): how old the last confirmation of our node is. */
  monotonicNow: MonotonicClock;
}

/** Our candidate node: its path and the session that created it. */
interface OwnNode {
  readonly path: string;
  readonly sessionId: string;
}

/** The result of one shared fencing read: the node and session it confirmed, or why it could not. */
type FenceRead =
  | { readonly ok: true; readonly path: string; readonly sessionId: string; readonly sentAtMs: number }
  | { readonly ok: false; readonly reason: string };

/** Creates the ZooKeeper election of one target; `start()` campaigns (when wanted). */
export function createZooKeeperElection(opts: ZooKeeperElectionOptions): BackendElection {
  const { session, prefix, replicaId, log } = opts;
  const dir = electionDir(prefix);
  const state = createCandidateState({ log });
  let own: OwnNode | undefined;
  /** A protected create whose answer was lost: look for this uuid's node before creating another. */
  let pending: { uuid: string; sessionId: string } | undefined;
  let termConnection: ZkConnection | undefined;

  const connected = () => termConnection !== undefined && !termConnection.lost.aborted;
  /**
   * When the read that last confirmed our node (for this term) was sent, monotonic ms. A process frozen past
   * the session timeout wakes before its client has read the socket that would say the session expired:
   * `stillLeader()` then refuses by this age alone, as etcd's lease freshness does.
   */
  let confirmedSentAtMs: number | undefined;
  const confirmationFresh = () =>
    termConnection !== undefined &&
    confirmedSentAtMs !== undefined &&
    // The session cannot have expired before the server last heard from us plus the granted timeout.
    opts.monotonicNow() - confirmedSentAtMs < sessionValidMs(termConnection.timeoutMs);

  /** One fencing read of our node; never rejects. Ends the term (once) if the node is gone or not ours. */
  async function readOnce(): Promise<FenceRead> {
    const c = termConnection;
    const node = own;
    if (!c || c.lost.aborted) return { ok: false, reason: 'disconnected from zookeeper' };
    if (!node) return { ok: false, reason: 'no leader node' };
    let stat: ZkStat | null;
    const sentAtMs = opts.monotonicNow();
    try {
      stat = await withTimeout(syncedStat(c, node.path), opts.fenceTimeoutMs, 'fencing read');
    } catch (err) {
      return { ok: false, reason: `cannot confirm the leader node: ${(err as Error).message}` };
    }
    if (stat?.ephemeralOwner !== c.sessionId) {
      // Only the term this read was for: a later term has a node of its own.
      if (own === node) state.endTerm('leader node gone or not of our session', 'lost');
      return { ok: false, reason: 'leader node gone or not of our session' };
    }
    return { ok: true, path: node.path, sessionId: c.sessionId, sentAtMs };
  }

  /**
   * The stat of `path` as the quorum has it: a `sync`, then the read, sent together (a session's requests are
   * answered in order, so the read waits for the sync). A plain read is answered by whatever server the
   * session is on, from what it has applied: a follower cut off from its leader goes on answering until its
   * own timeout (`syncLimit × tickTime`), while the quorum may already have expired our session and elected
   * another leader. The sync goes through the leader: cut off, it gets no answer and the fence times out.
   */
  async function syncedStat(c: ZkConnection, path: string): Promise<ZkStat | null> {
    const synced = c.handle.sync(path);
    const stat = statOf(c.handle, path);
    const [, s] = await Promise.all([synced, stat]);
    return s;
  }

  /** Fencing reads, coalesced: a call is answered by a read that started after it. */
  const sharedRead = createFreshRead(readOnce);

  /** Our node in the line now, creating it if needed (protected create). */
  async function ensureNode(c: ZkConnection): Promise<OwnNode> {
    if (own && own.sessionId !== c.sessionId) own = undefined; // gone with its session
    if (own) return own;
    if (pending && pending.sessionId === c.sessionId) {
      const uuid = pending.uuid;
      // Synced first: the server we reconnected to may not have applied the create the quorum committed.
      const names = await opts.limit(async () => {
        const [, children] = await Promise.all([c.handle.sync(dir), c.handle.get_children(dir, false)]);
        return children;
      });
      const found = names.find((n) => n.startsWith(`_c_${uuid}-`));
      pending = undefined;
      if (found) {
        own = { path: `${dir}/${found}`, sessionId: c.sessionId };
        return own;
      }
    }
    const uuid = randomUUID();
    pending = { uuid, sessionId: c.sessionId };
    const path = await opts.limit(() =>
      createNode(
        c.handle,
        `${dir}/_c_${uuid}-${replicaId}-latch-`,
        replicaId,
        ZK_MODE.ephemeralSequential,
        session.acl,
      ),
    );
    pending = undefined;
    own = { path, sessionId: c.sessionId };
    return own;
  }

  /**
   * Deletes `path`, a node of this replica's id ahead of our own, if it is of our live session: a create whose
   * answer was lost and that the lookup did not find (we would otherwise wait behind it for the session's
   * life). A node of another session (an earlier process of this replica, still expiring) is left to expire.
   * @returns true when it was deleted (or was already gone).
   */
  async function deleteOrphan(c: ZkConnection, path: string): Promise<boolean> {
    const stat = await opts.limit(() => syncedStat(c, path));
    if (stat && stat.ephemeralOwner !== c.sessionId) return false;
    if (stat) {
      log.info({ node: path }, 'deleting a candidate node no term holds');
      await opts
        .limit(() => c.handle.delete_(path, -1))
        .catch((err: unknown) => {
          if (zkCode(err) !== ZK_ERR.noNode) throw err;
        });
    }
    return true;
  }

  /** Waits until `path` is gone (or its watch fires for another reason), the signal aborts. */
  async function waitForPredecessor(c: ZkConnection, path: string, signal: AbortSignal): Promise<void> {
    const fired = Promise.withResolvers<void>();
    const stat = await opts.limit(() => statOf(c.handle, path, () => fired.resolve()));
    if (!stat) return;
    await new Promise<void>((resolve) => {
      const done = () => resolve();
      signal.addEventListener('abort', done, { once: true });
      void fired.promise.then(() => {
        signal.removeEventListener('abort', done);
        resolve();
      });
    });
  }

  async function term(c: ZkConnection, end: AbortSignal): Promise<void> {
    termConnection = c;
    confirmedSentAtMs = undefined;
    // The replica closing its session (a stop) ends the connection too: a planned end, not a loss.
    const onLost = () =>
      session.closed
        ? state.endTerm('resigned: the session is closing', 'ended')
        : state.endTerm('connection to zookeeper lost', 'lost');
    c.lost.addEventListener('abort', onLost, { once: true });
    try {
      if (c.lost.aborted) return onLost();
      const node = await ensureNode(c);
      const name = node.path.slice(dir.length + 1);
      for (;;) {
        end.throwIfAborted();
        const line = (await opts.limit(() => c.handle.get_children(dir, false)))
          .map((n) => parseCandidateName(dir, n))
          .filter((n) => n !== undefined)
          .sort((a, b) => a.sequence - b.sequence);
        const at = line.findIndex((n) => n.name === name);
        if (at < 0) {
          own = undefined;
          throw new Error(`candidate node ${node.path} vanished`);
        }
        if (at === 0) {
          // CURATOR-696: the node must be of our live session, not one the server is still expiring.
          const sentAtMs = opts.monotonicNow();
          const stat = await opts.limit(() => syncedStat(c, node.path));
          if (stat?.ephemeralOwner !== c.sessionId) {
            own = undefined;
            throw new Error(`candidate node ${node.path} is not of our session`);
          }
          end.throwIfAborted();
          if (!state.running) return;
          confirmedSentAtMs = sentAtMs;
          await state.lead(end, { sessionId: c.sessionId, node: node.path });
          return;
        }
        const before = line[at - 1] as CandidateNode;
        if (before.replicaId === replicaId && (await deleteOrphan(c, before.key))) continue;
        await waitForPredecessor(c, before.key, end);
      }
    } finally {
      c.lost.removeEventListener('abort', onLost);
    }
  }

  /** Deletes our node (it is still of the live session), retrying while that connection lasts. */
  async function deleteOwn(c: ZkConnection): Promise<void> {
    const node = own;
    if (!node || node.sessionId !== c.sessionId) return;
    for (let attempt = 1; !c.lost.aborted; attempt++) {
      try {
        await withTimeout(
          opts.limit(() => c.handle.delete_(node.path, -1)),
          opts.fenceTimeoutMs,
          'candidate node delete',
        );
        if (own === node) own = undefined;
        return;
      } catch (err) {
        if (zkCode(err) === ZK_ERR.noNode) {
          if (own === node) own = undefined;
          return;
        }
        log.warn({ err: { message: (err as Error).message } }, 'cannot delete the candidate node; retrying');
        await sleep(backoffMs(attempt, { baseMs: 200, maxMs: 5000, jitter: true }), c.lost);
      }
    }
  }

  return state.election({
    prefix,
    campaign: {
      next: (signal) => session.nextConnection(signal),
      closed: () => session.closed,
      term,
      lost: (c) => c.lost,
      async afterTerm(c) {
        termConnection = undefined;
        // Suspended: the node stays (the session may live on; reconnected, we read the line again). Else
        // the session lives on: our node must go, so that the next candidate is elected at once.
        if (!c.lost.aborted) await deleteOwn(c);
      },
      backoffUntil: (c) => c.lost,
    },
    onResign() {
      const c = termConnection ?? session.connection;
      return async () => {
        if (c && !c.lost.aborted && own?.sessionId === c.sessionId)
          await withTimeout(c.handle.delete_(own.path, -1), 2000, 'candidate node delete').catch(
            () => undefined,
          );
      };
    },
    session: () => {
      // A session given up (expired, or suspended for a whole timeout) is none: exported as absent, as etcd's
      // lost lease is, until a new one connects.
      const disconnectedMs = session.sessionId === undefined ? undefined : session.disconnectedForMs;
      return disconnectedMs === undefined ? undefined : { backend: 'zookeeper', disconnectedMs };
    },
    stillLeader: () => state.leader && connected() && confirmationFresh(),
    async fence(signal) {
      if (!state.leader) throw new FencedError('not the leader');
      const c = termConnection;
      const node = own;
      if (!c || c.lost.aborted) throw new FencedError('disconnected from zookeeper');
      if (!node) throw new FencedError('no leader node');
      signal.throwIfAborted();
      // An abort rejects this call at once; the shared read goes on for the others.
      const read = await sharedRead(signal);
      signal.throwIfAborted();
      if (!read.ok) throw new FencedError(read.reason);
      // The read was of a later term's node: ours is gone.
      if (read.path !== node.path || read.sessionId !== c.sessionId)
        throw new FencedError('leader node gone or not of our session');
      confirmedSentAtMs = Math.max(confirmedSentAtMs ?? read.sentAtMs, read.sentAtMs);
      if (!state.leader) throw new FencedError('leadership lost during the fencing read');
      if (c.lost.aborted) throw new FencedError('disconnected from zookeeper during the fencing read');
    },
    async currentLeader() {
      if (state.leader && connected()) return replicaId;
      if (opts.view.synced) return opts.view.candidates(prefix)[0]?.replicaId;
      const c = session.connection;
      if (!c) return undefined;
      const line = (await withTimeout(c.handle.get_children(dir, false), opts.fenceTimeoutMs, 'leader read'))
        .map((n) => parseCandidateName(dir, n))
        .filter((n) => n !== undefined)
        .sort((a, b) => a.sequence - b.sequence);
      return line[0]?.replicaId;
    },
  });
}
