/**
 * Leadership of one target through an etcd election, as etcd's Go client does it
 * (client/v3/concurrency/election.go), on the replica's **shared session lease** (src/leadership/etcd/session.ts):
 * each candidate puts a key `prefix/<lease id>` attached to its session lease; the key with the lowest create
 * revision leads; the others wait until no key created before theirs is left. The waiting is woken by the
 * replica's one watch over all elections (src/leadership/etcd/view.ts), confirmed by a read before a
 * term starts, and re-read once per TTL anyway (a stalled watch must not hold a campaign forever).
 *
 * Whether this replica is a candidate at all is the balancer's decision (`setWanted`,
 * src/leadership/etcd/backend.ts): a term that ends — stepped down, resigned, or no longer wanted —
 * **deletes its own key** (if it still has the term's create revision), since the lease is shared and lives on.
 *
 * Fencing: the term ends as soon as the session's lease ends or goes stale (no successful keepalive for
 * TTL − margin, timed from when the keepalive was sent, on the monotonic clock); and before each DELETE,
 * `fence()` confirms our key still exists with our create revision. Fencing reads are coalesced
 * (single-flight, src/leadership/fresh-read.ts): concurrent `fence()` calls share one etcd GET, but a call is
 * only ever satisfied by a GET that started after it was made, so a confirmation is never older than its call.
 */
import type { Etcd3 } from 'etcd3';
import type { LimitFunction } from 'p-limit';
import { backoffMs } from '../../backoff.ts';
import type { MonotonicClock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import { sleep } from '../../sleep.ts';
import { withTimeout } from '../../with-timeout.ts';
import type { BackendElection } from '../backend.ts';
import { createCandidateState } from '../candidate-state.ts';
import { FencedError } from '../fenced-error.ts';
import { abortable, createFreshRead } from '../fresh-read.ts';
import { type EtcdSession, LeaseEnd, type SessionLease } from './session.ts';
import type { ElectionView } from './view.ts';

/** Options of {@link createEtcdLeadership}. */
export interface EtcdLeadershipOptions {
  client: Etcd3;
  /** The replica's session: its lease carries the candidate key. */
  session: EtcdSession;
  /** The replica's view of all elections (wakes a waiting candidate). */
  view: ElectionView;
  /** Election key prefix of the target (ends with `/`). */
  prefix: string;
  replicaId: string;
  /** Lease TTL, seconds (≥ 2): the period of the predecessor re-read. */
  ttlSeconds: number;
  log: Logger;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
  /** Bounds the replica's concurrent campaign calls (puts, reads, deletes of candidate keys). */
  limit: LimitFunction;
  /** Timeout of the fencing GET, ms (default: a third of the TTL). */
  fenceTimeoutMs?: number;
  /**
   * Tests only: wraps the fencing GET of the leader key. `read` is the real GET; both resolve to the key's
   * create revision, or undefined when the key does not exist. Default: `read` itself.
   */
  readLeaderKey?: (
    key: string,
    read: (key: string) => Promise<string | undefined>,
  ) => Promise<string | undefined>;
}

/** An etcd election: a {@link Leadership} whose candidacy the balancer turns on and off. */
export type EtcdLeadership = BackendElection;

/** The result of one shared fencing read: the key and revision it confirmed, or why it could not. */
type FenceRead =
  | { readonly ok: true; readonly key: string; readonly revision: string }
  | { readonly ok: false; readonly reason: string };

/** Creates the etcd leadership of one target; call `start()` to campaign (when wanted). */
export function createEtcdLeadership(opts: EtcdLeadershipOptions): EtcdLeadership {
  const { client, session, view, prefix } = opts;
  const ttlMs = opts.ttlSeconds * 1000;
  const fenceTimeoutMs = opts.fenceTimeoutMs ?? Math.max(500, ttlMs / 3);
  const state = createCandidateState({ log: opts.log, logInterruptions: true });
  /** The session lease of the current term. */
  let termLease: SessionLease | undefined;
  let myKey: string | undefined;
  let myRevision: string | undefined;

  const getRevision = async (key: string) => (await client.get(key).exec()).kvs[0]?.create_revision;
  const readLeaderKey = (key: string) =>
    opts.readLeaderKey ? opts.readLeaderKey(key, getRevision) : getRevision(key);

  /** The term's lease is still the live, fresh session lease. */
  const fresh = () => termLease !== undefined && !termLease.ended.aborted && session.fresh();

  /** One fencing GET of the current leader key; never rejects. Ends the term (once) if the key is gone. */
  async function readOnce(): Promise<FenceRead> {
    const key = myKey;
    const revision = myRevision;
    if (!key || !revision) return { ok: false, reason: 'no leader key' };
    let found: string | undefined;
    try {
      found = await withTimeout(readLeaderKey(key), fenceTimeoutMs, 'fencing read');
    } catch (err) {
      return { ok: false, reason: `cannot confirm the leader key: ${(err as Error).message}` };
    }
    if (found !== revision) {
      // Only the term this read was for: a later term has a key of its own.
      if (myKey === key && myRevision === revision) state.endTerm('leader key gone or re-created', 'lost');
      return { ok: false, reason: 'leader key gone or re-created' };
    }
    return { ok: true, key, revision };
  }

  /** Fencing reads, coalesced: a call is answered by a read that started after it. */
  const sharedRead = createFreshRead(readOnce);

  /**
   * Puts our candidate key (`prefix/<lease id>` = replica id, on the session lease) unless it exists, and
   * returns its create revision. As etcd's Go client does (concurrency/election.go): when the compare fails,
   * the key already exists — etcd3 retries a transaction on Unavailable/DeadlineExceeded, so a first attempt
   * may have been applied with its answer lost — and its revision is the key's own create revision, read in
   * the same transaction; the header's is a later one, behind which we would wait for our own key forever.
   * @throws Error when the existing key is gone or not ours (the campaign retries).
   */
  async function putCandidateKey(key: string, leaseId: string): Promise<string> {
    const res = await opts.limit(() =>
      client
        .if(key, 'Create', '==', 0)
        .then(client.put(key).value(opts.replicaId).lease(leaseId))
        .else(client.get(key))
        .commit(),
    );
    if (res.succeeded) return res.header.revision;
    const kv = res.responses[0]?.response_range?.kvs[0];
    if (!kv) throw new Error(`candidate key ${key} vanished (lease expired?)`);
    const holder = kv.value.toString();
    if (holder !== opts.replicaId || kv.lease !== leaseId)
      throw new Error(
        `candidate key ${key} exists but is not ours (value ${JSON.stringify(holder)}, lease ${kv.lease})`,
      );
    return kv.create_revision;
  }

  /**
   * Deletes our candidate key if it still has `revision` (a later campaign's key is left alone), retrying
   * with backoff until done or the lease ends (its keys go with it). Never rejects.
   */
  async function deleteKey(key: string, revision: string, lease: SessionLease): Promise<void> {
    for (let attempt = 1; !lease.ended.aborted; attempt++) {
      try {
        await withTimeout(
          opts.limit(() => client.if(key, 'Create', '==', revision).then(client.delete().key(key)).commit()),
          fenceTimeoutMs,
          'candidate key delete',
        );
        return;
      } catch (err) {
        opts.log.warn(
          { err: { message: (err as Error).message } },
          'cannot delete the candidate key; retrying',
        );
        await sleep(backoffMs(attempt, { baseMs: 200, maxMs: 5000, jitter: true }), lease.ended);
      }
    }
  }

  /**
   * Waits until no key of the prefix was created before ours (we lead). Keys created later have a higher
   * create revision, so predecessors can only go, never come: a read that finds none is final. The view wakes
   * us when the election changes; we read again when it no longer shows a predecessor, and once per TTL
   * anyway (a stalled watch must not hold the campaign forever).
   * @throws Error when the term ends meanwhile (lease lost, withdrawn, resigned).
   */
  async function waitForPredecessors(revision: string, signal: AbortSignal): Promise<void> {
    const mine = BigInt(revision);
    const viewShowsPredecessor = () => view.candidates(prefix).some((c) => c.createRevision < mine);
    let read = true;
    for (;;) {
      signal.throwIfAborted();
      let readRevision = 0n;
      if (read) {
        const res = await abortable(
          opts.limit(() =>
            client
              .getAll()
              .prefix(prefix)
              .maxCreateRevision((mine - 1n).toString())
              .limit(1)
              .exec(),
          ),
          signal,
        );
        if (res.kvs.length === 0) return;
        readRevision = BigInt(res.header.revision);
      }
      read = true;
      // The view is past the read and shows no predecessor: it saw one go since; read again at once.
      if (view.synced && view.revision >= readRevision && !viewShowsPredecessor()) continue;
      const woken = await view.changed(prefix, signal, ttlMs);
      // Woken by a change that left a predecessor in place: wait again without a read.
      if (woken === 'changed' && view.synced && viewShowsPredecessor()) read = false;
    }
  }

  async function term(lease: SessionLease, end: AbortSignal): Promise<void> {
    termLease = lease;
    const onLeaseEnd = () => {
      const why = lease.ended.reason;
      state.endTerm(
        why instanceof Error ? why.message : 'lease ended',
        why instanceof LeaseEnd ? why.how : 'lost',
      );
    };
    lease.ended.addEventListener('abort', onLeaseEnd, { once: true });
    try {
      if (lease.ended.aborted) return onLeaseEnd();
      const key = `${prefix}${lease.id}`;
      // Not abortable: a put applied after we stopped waiting would leave a key nobody deletes. Once it
      // returns, the key is ours to delete (the campaign loop does) even if the term has ended meanwhile.
      const revision = await putCandidateKey(key, lease.id);
      myKey = key;
      myRevision = revision;
      end.throwIfAborted();
      await waitForPredecessors(revision, end);
      if (!state.running || end.aborted) return;
      await state.lead(end, { leaseId: lease.id, createRevision: revision });
    } finally {
      lease.ended.removeEventListener('abort', onLeaseEnd);
    }
  }

  return state.election({
    prefix,
    campaign: {
      next: (signal) => session.nextLease(signal),
      closed: () => session.closed,
      term,
      lost: (lease) => lease.ended,
      async afterTerm(lease) {
        const key = myKey;
        const revision = myRevision;
        myKey = undefined;
        myRevision = undefined;
        termLease = undefined;
        // The lease lives on (shared): our key must go, so that the next candidate is elected at once.
        if (key && revision && !lease.ended.aborted) await deleteKey(key, revision, lease);
      },
      // The session's live lease when the backoff starts (a later one than the term's if that was lost).
      backoffUntil: () => session.lease?.ended,
    },
    onResign() {
      const key = myKey;
      const revision = myRevision;
      const lease = termLease;
      return async () => {
        if (key && revision && lease && !lease.ended.aborted)
          await withTimeout(
            client.if(key, 'Create', '==', revision).then(client.delete().key(key)).commit(),
            2000,
            'candidate key delete',
          ).catch(() => undefined);
      };
    },
    session: () => {
      const keepaliveAgeMs = session.keepaliveAgeMs;
      return keepaliveAgeMs === undefined ? undefined : { backend: 'etcd', keepaliveAgeMs };
    },
    stillLeader: () => state.leader && fresh(),
    async fence(signal) {
      if (!state.leader) throw new FencedError('not the leader');
      if (!fresh()) throw new FencedError('lease may have expired: no recent keepalive');
      const key = myKey;
      const rev = myRevision;
      if (!key || !rev) throw new FencedError('no leader key');
      signal.throwIfAborted();
      // An abort rejects this call at once; the shared read goes on for the others.
      const read = await sharedRead(signal);
      signal.throwIfAborted();
      if (!read.ok) throw new FencedError(read.reason);
      // The read was of a later term's key: ours is gone.
      if (read.key !== key || read.revision !== rev) throw new FencedError('leader key gone or re-created');
      if (!state.leader) throw new FencedError('leadership lost during the fencing read');
      if (!fresh()) throw new FencedError('lease went stale during the fencing read');
    },
    async currentLeader() {
      // Our own term is known before the shared watch delivers our key: a view read could still show no
      // candidate (or a predecessor that just left).
      if (state.leader && fresh()) return opts.replicaId;
      if (view.synced) return view.candidates(prefix)[0]?.replicaId;
      const res = await withTimeout(
        client.getAll().prefix(prefix).sort('Create', 'Ascend').limit(1).exec(),
        fenceTimeoutMs,
        'leader read',
      );
      return res.kvs[0]?.value.toString();
    },
  });
}
