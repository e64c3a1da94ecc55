/**
 * Leadership of one target through an etcd election, as etcd's Go client does it
 * (client/v3/concurrency/election.go): each candidate puts a key `prefix/<lease id>` attached to its
 * lease; the key with the lowest create revision leads; the others wait for the key just before theirs
 * to be deleted.
 *
 * Why not etcd3's `Campaign`: it reports a lost lease only after ~2×TTL of failed keepalives, while the
 * server expires the lease after 1×TTL, so a replica could believe it leads after another was elected.
 * Here the lease is ours: we record every successful keepalive and consider leadership lost as soon as
 * (TTL − safety margin) has passed without one (**fencing**), and before each DELETE we confirm our key
 * still exists with our create revision. A keepalive counts from when its request was **sent** (the
 * server's TTL runs from its receipt, not from our reading of the answer), and every interval is measured
 * on the monotonic clock: a wall clock stepped back would make an expired lease look fresh, stepped forward
 * it would drop a live one.
 *
 * Fencing reads are coalesced (single-flight): concurrent `fence()` calls share one etcd GET, but a call
 * is only ever satisfied by a GET that started after it was made, so a confirmation is never older than
 * its call. At most one GET is in flight; calls made while it is in flight share the next one, which
 * starts when it settles.
 */
import type { Etcd3, Lease, Namespace } from 'etcd3';
import { backoffMs } from '../backoff.ts';
import type { MonotonicClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import { sleep } from '../sleep.ts';
import { FencedError } from './fenced-error.ts';
import { type Leadership, leadershipSubscribers } from './leadership.ts';

/** Options of {@link createEtcdLeadership}. */
export interface EtcdLeadershipOptions {
  client: Etcd3;
  /** Election key prefix of the target (ends with `/`). */
  prefix: string;
  replicaId: string;
  /** Lease TTL, seconds (≥ 2). */
  ttlSeconds: number;
  log: Logger;
  /** The monotonic clock, ms (src/clock.ts): lease freshness and the watchdog never read the wall clock. */
  monotonicNow: MonotonicClock;
  /** Timeout of the fencing GET, ms (default: a third of the TTL). */
  fenceTimeoutMs?: number;
  /**
   * Wait before the first campaign, ms (default 0). A replica staggers its targets' first campaigns (in an
   * order of its own) so that leaderships spread over the replicas instead of all going to the first one
   * to reach etcd: the order of candidates is fixed by who campaigns first.
   */
  initialCampaignDelayMs?: number;
  /**
   * Tests only: wraps the fencing GET of the leader key. `read` is the real GET; both resolve to the key's
   * create revision, or undefined when the key does not exist. Default: `read` itself.
   */
  readLeaderKey?: (
    key: string,
    read: (key: string) => Promise<string | undefined>,
  ) => Promise<string | undefined>;
}

/** The result of one shared fencing read: the key and revision it confirmed, or why it could not. */
type FenceRead =
  | { readonly ok: true; readonly key: string; readonly revision: string }
  | { readonly ok: false; readonly reason: string };

/** Settles with `p`, or rejects with the signal's reason as soon as it aborts (leaving `p` running). */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** At most this many keepalives awaiting their answer are remembered (etcd3 sends one every TTL/3). */
const MAX_PENDING_KEEPALIVES = 16;

/** Creates the etcd leadership of one target; call `start()` to campaign. */
export function createEtcdLeadership(opts: EtcdLeadershipOptions): Leadership {
  const ns: Namespace = opts.client.namespace(opts.prefix);
  const ttlMs = opts.ttlSeconds * 1000;
  // Stop DELETEs a little before the server can expire the lease: its clock's rate and ours, timer granularity.
  const freshMs = ttlMs - Math.min(1000, ttlMs / 5);
  const fenceTimeoutMs = opts.fenceTimeoutMs ?? Math.max(500, ttlMs / 3);
  const events = leadershipSubscribers();
  let running = false;
  let resigned = false;
  let leader = false;
  let lease: Lease | undefined;
  let myKey: string | undefined;
  let myRevision: string | undefined;
  /** When the last answered keepalive (or the lease grant) was sent, monotonic ms. */
  let lastKeepaliveSentMs: number | undefined;
  /**
   * Aborted when the current term ends (lease lost or stale, key gone, resigned). Created at the start of
   * each term, before anything waits, so that an end arriving at any moment — even while a watch is being
   * created — is seen by every wait of that term.
   */
  let termEnd: AbortController | undefined;

  const getRevision = async (key: string) => (await ns.get(key).exec()).kvs[0]?.create_revision;
  const readLeaderKey = (key: string) =>
    opts.readLeaderKey ? opts.readLeaderKey(key, getRevision) : getRevision(key);
  /** The fencing read in flight, if any. */
  let readInFlight: Promise<FenceRead> | undefined;
  /** Callers that arrived while a read was in flight: they share the next read. */
  let nextRead: PromiseWithResolvers<FenceRead> | undefined;

  const keepaliveAgeMs = () =>
    lastKeepaliveSentMs === undefined ? undefined : opts.monotonicNow() - lastKeepaliveSentMs;
  const fresh = () => {
    const age = keepaliveAgeMs();
    return age !== undefined && age < freshMs;
  };

  /**
   * Ends the current term (if leader, exactly once) and wakes whatever the term waits for. `lost`: the
   * lease is lost or stale, or the key vanished — a real failure, logged at warn; `ended`: we resigned or
   * the term finished normally (every rolling update does it), logged at info.
   */
  function endTerm(reason: string, how: 'lost' | 'ended') {
    if (termEnd && !termEnd.signal.aborted) {
      if (!leader) opts.log.debug({ reason }, 'campaign interrupted');
      termEnd.abort(new Error(`campaign interrupted: ${reason}`));
    }
    if (leader) {
      leader = false;
      if (how === 'lost') opts.log.warn({ reason }, 'leadership lost');
      else opts.log.info({ reason }, 'leadership ended');
      events.onLost(reason);
    }
  }

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
      if (myKey === key && myRevision === revision) endTerm('leader key gone or re-created', 'lost');
      return { ok: false, reason: 'leader key gone or re-created' };
    }
    return { ok: true, key, revision };
  }

  /** Starts a fencing read now; when it settles, starts the one the callers that arrived meanwhile wait for. */
  function startRead(): Promise<FenceRead> {
    const read = readOnce();
    readInFlight = read;
    void read.then(() => {
      readInFlight = undefined;
      const waiting = nextRead;
      nextRead = undefined;
      waiting?.resolve(startRead());
    });
    return read;
  }

  /** A fencing read that starts now or later, never one already in flight. */
  function sharedRead(): Promise<FenceRead> {
    if (!readInFlight) return startRead();
    nextRead ??= Promise.withResolvers<FenceRead>();
    return nextRead.promise;
  }

  /**
   * Puts our candidate key (`prefix/<lease id>` = replica id, on our lease) unless it exists, and returns its
   * create revision. As etcd's Go client does (concurrency/election.go): when the compare fails, the key
   * already exists — etcd3 retries a transaction on Unavailable/DeadlineExceeded, so a first attempt may
   * have been applied with its answer lost — and its revision is the key's own create revision, read in the
   * same transaction; the header's is a later one, behind which we would wait for our own key forever.
   * @throws Error when the existing key is gone or not ours (the campaign retries with a new lease).
   */
  async function putCandidateKey(key: string, leaseId: string): Promise<string> {
    const res = await ns
      .if(key, 'Create', '==', 0)
      .then(ns.put(key).value(opts.replicaId).lease(leaseId))
      .else(ns.get(key))
      .commit();
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
   * Waits until no key of the prefix was created before ours (we lead). Watches the key just before ours
   * for its deletion, and re-reads once per TTL anyway: a watch that stalls (a stream etcd3 failed to
   * re-establish) must not hold the campaign forever.
   * @throws Error when the term ends meanwhile (lease lost, resigned).
   */
  async function waitForPredecessors(revision: string, signal: AbortSignal): Promise<void> {
    const before = (BigInt(revision) - 1n).toString();
    for (;;) {
      if (!running) throw new Error('campaign interrupted: resigned');
      signal.throwIfAborted();
      const res = await abortable(
        ns.getAll().maxCreateRevision(before).sort('Create', 'Descend').limit(1).exec(),
        signal,
      );
      const prev = res.kvs[0];
      if (!prev) return;
      await predecessorGone(prev.key.toString(), res.header.revision, signal);
    }
  }

  /**
   * Resolves when `key` is deleted after `revision`, when the term ends, or after one TTL, whichever comes
   * first; the caller re-reads. Never rejects (a failed watch also makes the caller re-read).
   */
  async function predecessorGone(key: string, revision: string, signal: AbortSignal): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<void>();
    const timer = setTimeout(resolve, ttlMs);
    const onEnd = () => resolve();
    signal.addEventListener('abort', onEnd, { once: true });
    if (signal.aborted) resolve();
    const created = ns
      .watch()
      .key(key)
      .startRevision((BigInt(revision) + 1n).toString())
      .create();
    created.then(
      (w) => {
        w.on('delete', () => resolve());
        w.on('error', () => resolve());
      },
      () => resolve(),
    );
    // The abort listener covers an end at any moment, also one while the watch was being created.
    await promise;
    clearTimeout(timer);
    signal.removeEventListener('abort', onEnd);
    created.then((w) => void w.cancel().catch(() => undefined)).catch(() => undefined);
  }

  /**
   * Records, for each answered keepalive of `l`, when its request was sent. etcd3 emits `keepaliveFired`
   * just before sending and `keepaliveSucceeded` on an answer; one stream answers its requests in order, so
   * an answer belongs to the oldest unanswered request of its stream (a new stream starts afresh).
   */
  function stampKeepalives(l: Lease): void {
    const sent: number[] = [];
    l.on('keepaliveEstablished', () => {
      sent.length = 0;
    });
    l.on('keepaliveFailed', () => {
      sent.length = 0;
    });
    l.on('keepaliveFired', () => {
      // Full (answers stopped coming): an answer would be matched with an older send, erring on the safe side.
      if (sent.length < MAX_PENDING_KEEPALIVES) sent.push(opts.monotonicNow());
    });
    l.on('keepaliveSucceeded', () => {
      const at = sent.shift();
      if (lease === l && at !== undefined) lastKeepaliveSentMs = Math.max(lastKeepaliveSentMs ?? at, at);
    });
  }

  async function term(): Promise<void> {
    const end = new AbortController();
    termEnd = end;
    // The grant request leaves as the lease is created: its TTL runs from about now.
    const grantSentMs = opts.monotonicNow();
    const l = opts.client.lease(opts.ttlSeconds, { autoKeepAlive: true });
    lease = l;
    stampKeepalives(l);
    l.on('lost', (err) => {
      if (lease === l) endTerm(`lease lost: ${err.message}`, 'lost');
    });
    const leaseId = await withTimeout(l.grant(), ttlMs, 'lease grant');
    lastKeepaliveSentMs ??= grantSentMs;
    const key = leaseId;
    const revision = await putCandidateKey(key, leaseId);
    myRevision = revision;
    myKey = key;
    await waitForPredecessors(revision, end.signal);
    if (!running || end.signal.aborted) return;
    const ended = new Promise<void>((resolve) => end.signal.addEventListener('abort', () => resolve()));
    leader = true;
    opts.log.info({ leaseId, createRevision: myRevision }, 'elected leader');
    events.onElected();
    // Watchdog: etcd3 notices a dead lease late; we stop as soon as it may have expired on the server.
    const watchdog = setInterval(
      () => {
        if (!fresh())
          endTerm(
            `no successful keepalive for ${Math.round(keepaliveAgeMs() ?? 0)} ms (TTL ${ttlMs} ms)`,
            'lost',
          );
      },
      Math.min(250, ttlMs / 8),
    );
    try {
      await ended;
    } finally {
      clearInterval(watchdog);
    }
  }

  async function campaign(): Promise<void> {
    let failures = 0;
    let first = true;
    while (running) {
      if (first && opts.initialCampaignDelayMs) {
        await sleep(opts.initialCampaignDelayMs);
        if (!running) break;
      }
      first = false;
      try {
        await term();
        failures = 0;
      } catch (err) {
        if (!running) break;
        failures += 1;
        opts.log.warn({ err: { message: (err as Error).message } }, 'campaign failed; retrying');
      } finally {
        endTerm('term ended', 'ended');
        const l = lease;
        lease = undefined;
        myKey = undefined;
        myRevision = undefined;
        lastKeepaliveSentMs = undefined;
        // Revoke so that the next candidate is elected at once instead of after the TTL.
        if (l) await withTimeout(l.revoke(), 2000, 'lease revoke').catch(() => undefined);
      }
      // 200 ms after a term that ended normally, doubling per failed campaign up to 5 s, with jitter.
      if (running) await sleep(backoffMs(failures + 1, { baseMs: 200, maxMs: 5000, jitter: true }));
    }
  }

  return {
    addEventHandler: (e) => events.add(e),
    start() {
      if (running || resigned) return;
      running = true;
      void campaign();
    },
    async resign() {
      resigned = true;
      running = false;
      const l = lease;
      endTerm('resigned', 'ended');
      if (l) await withTimeout(l.revoke(), 2000, 'lease revoke').catch(() => undefined);
    },
    stepDown(reason) {
      // The campaign loop then revokes the lease and campaigns again with a new key, behind the others.
      if (leader) endTerm(`stepped down: ${reason}`, 'ended');
    },
    get isLeader() {
      return leader;
    },
    get keepaliveAgeMs() {
      return keepaliveAgeMs();
    },
    stillLeader: () => leader && fresh(),
    async fence(signal) {
      if (!leader) throw new FencedError('not the leader');
      if (!fresh()) throw new FencedError('lease may have expired: no recent keepalive');
      const key = myKey;
      const rev = myRevision;
      if (!key || !rev) throw new FencedError('no leader key');
      signal.throwIfAborted();
      // An abort rejects this call at once; the shared read goes on for the others.
      const read = await abortable(sharedRead(), signal);
      signal.throwIfAborted();
      if (!read.ok) throw new FencedError(read.reason);
      // The read was of a later term's key: ours is gone.
      if (read.key !== key || read.revision !== rev) throw new FencedError('leader key gone or re-created');
      if (!leader) throw new FencedError('leadership lost during the fencing read');
      if (!fresh()) throw new FencedError('lease went stale during the fencing read');
    },
    async currentLeader() {
      const res = await withTimeout(
        ns.getAll().sort('Create', 'Ascend').limit(1).exec(),
        fenceTimeoutMs,
        'leader read',
      );
      return res.kvs[0]?.value.toString();
    },
  };
}
