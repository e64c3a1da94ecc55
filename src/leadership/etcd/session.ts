/**
 * The etcd session of a replica, as etcd's Go `concurrency.Session`: **one lease** (one keepalive stream) that
 * every election of the replica campaigns on, and the replica's membership key
 * `<root>clusters/<scope>/members/<replica id>` (src/queue/job-identity.ts `membersPrefix`) on that lease, so that the live members are exactly the replicas whose lease lives. Two replicas with the same
 * id would share one membership key: replica ids must be unique (they are, as pod names).
 *
 * Freshness (fencing): every successful keepalive is recorded with the time its request was **sent** (the
 * server's TTL runs from its receipt, not from our reading of the answer), on the monotonic clock (a stepped
 * wall clock would make an expired lease look fresh, or drop a live one). Once (TTL − margin) has passed
 * without one, the lease may have expired on the server: the session ends it at once — every term of this
 * replica ends — instead of waiting for etcd3, which reports a lost lease only after about 2 × TTL. Then, as
 * after a lost lease, it revokes what it can, grants a new lease, registers again, and the elections
 * campaign again on the new lease.
 */
import type { Etcd3, Lease } from 'etcd3';
import { backoffMs } from '../../backoff.ts';
import type { MonotonicClock } from '../../clock.ts';
import { DEFAULT_ETCD_KEY_PREFIX } from '../../config/fields.ts';
import type { Logger } from '../../log.ts';
import { sleep } from '../../sleep.ts';
import { withTimeout } from '../../with-timeout.ts';
import { sessionValidMs } from '../backend.ts';
import { createMemberValueWriter } from '../member-value.ts';
import { createWaitList } from '../wait-list.ts';

/** Where all leadership keys live by default (`etcdKeyPrefix`); one watch over it serves every election of a replica. */
export const ETCD_ROOT = DEFAULT_ETCD_KEY_PREFIX;

/** Why a session lease ended: `lost` (expired, stale, revoked behind our back) or `ended` (closed: we left). */
export class LeaseEnd extends Error {
  override name = 'LeaseEnd';
  readonly how: 'lost' | 'ended';
  constructor(message: string, how: 'lost' | 'ended') {
    super(message);
    this.how = how;
  }
}

/** One granted lease of the session. */
export interface SessionLease {
  /** The lease id (decimal string), also the name of every candidate key on it. */
  readonly id: string;
  /** Aborted, with a {@link LeaseEnd}, when this lease ends (lost, stale, or the session closed). */
  readonly ended: AbortSignal;
}

/** Options of {@link createEtcdSession}. */
export interface EtcdSessionOptions {
  client: Etcd3;
  replicaId: string;
  /** Lease TTL, seconds (≥ 2). */
  ttlSeconds: number;
  log: Logger;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
  /**
   * The value of the membership key, read at each registration and by {@link EtcdSession.refreshMemberValue}
   * (default: the replica id).
   */
  memberValue?: () => string;
  /** Prefix of the membership key (`<root>clusters/<scope>/members/`): the key is this plus the replica id. */
  membersPrefix: string;
}

/** A replica's etcd session. */
export interface EtcdSession {
  /** The live lease, or undefined while none is (starting, re-granting after a loss, closed). */
  readonly lease: SessionLease | undefined;
  /**
   * Resolves with the live lease, waiting for the next grant if none is live.
   * @throws the signal's reason when it aborts first, or a LeaseEnd when the session closes.
   */
  nextLease(signal: AbortSignal): Promise<SessionLease>;
  /** True while a keepalive (or the grant) was sent less than (TTL − margin) ago. */
  fresh(): boolean;
  /** How long ago the last answered keepalive (or the grant) was sent, ms; undefined without a live lease. */
  readonly keepaliveAgeMs: number | undefined;
  /** Calls `cb` with each newly granted (and registered) lease. */
  onLease(cb: (lease: SessionLease) => void): void;
  /** True once `close()` was called. */
  readonly closed: boolean;
  /** Leases granted so far (1 while nothing went wrong). */
  readonly leasesGranted: number;
  /**
   * Writes the membership value again if it changed since it was last written (readiness of a target changed):
   * one put in flight at a time, at most one per {@link MEMBER_VALUE_MIN_GAP_MS}, the last value wins. A put
   * that fails is retried at the next call; a new lease registers the current value anyway.
   */
  refreshMemberValue(): void;
  /** Grants the lease and keeps it (idempotent). */
  start(): void;
  /**
   * Ends the lease (its terms end as `resigned`) and revokes it: every key on it disappears at once. Never
   * rejects; takes at most {@link REVOKE_TIMEOUT_MS} — when etcd does not answer, the lease is left to expire.
   */
  close(): Promise<void>;
}

/**
 * How long a lease revoke may take, ms. Past it the lease is left to expire on the server (within its TTL):
 * its terms have already ended here, so nothing is deleted under it meanwhile.
 */
export const REVOKE_TIMEOUT_MS = 2000;

/** At most this many keepalives awaiting their answer are remembered (etcd3 sends one every TTL/3). */
const MAX_PENDING_KEEPALIVES = 16;

/** Creates the session of a replica; `start()` grants its lease. */
export function createEtcdSession(opts: EtcdSessionOptions): EtcdSession {
  const { membersPrefix } = opts;
  const { log } = opts;
  const ttlMs = opts.ttlSeconds * 1000;
  const freshMs = sessionValidMs(ttlMs);
  let running = false;
  let closed = false;
  let current: (SessionLease & { end: AbortController; lease: Lease }) | undefined;
  /** When the last answered keepalive (or the grant) was sent, monotonic ms. */
  let lastKeepaliveSentMs: number | undefined;
  let granted = 0;
  const listeners: ((l: SessionLease) => void)[] = [];
  const valueNow = () => opts.memberValue?.() ?? opts.replicaId;
  const waiters = createWaitList<SessionLease>();
  const stop = new AbortController();
  const memberValue = createMemberValueWriter({
    valueNow,
    write(value) {
      const c = current;
      if (!running || !c || c.end.signal.aborted) return undefined;
      return withTimeout(
        opts.client.put(`${membersPrefix}${opts.replicaId}`).value(value).lease(c.id).exec(),
        ttlMs,
        'membership update',
      ).then(() => current === c);
    },
    signal: stop.signal,
    monotonicNow: opts.monotonicNow,
    log,
    entry: 'key',
  });

  const keepaliveAgeMs = () =>
    current === undefined || lastKeepaliveSentMs === undefined
      ? undefined
      : opts.monotonicNow() - lastKeepaliveSentMs;
  const fresh = () => {
    const age = keepaliveAgeMs();
    return age !== undefined && age < freshMs;
  };

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
      if (current?.lease === l && at !== undefined)
        lastKeepaliveSentMs = Math.max(lastKeepaliveSentMs ?? at, at);
    });
  }

  /** Ends the live lease (once) with `end`: every term on it ends. */
  function endLease(end: LeaseEnd) {
    const c = current;
    if (!c || c.end.signal.aborted) return;
    if (end.how === 'lost') log.warn({ leaseId: c.id, reason: end.message }, 'etcd session lease lost');
    c.end.abort(end);
  }

  /** One lease: grant, register, keep until it ends. Throws when the grant or the registration fails. */
  async function oneLease(): Promise<void> {
    const end = new AbortController();
    memberValue.registered(undefined);
    // The grant request leaves as the lease is created: its TTL runs from about now.
    const grantSentMs = opts.monotonicNow();
    const l = opts.client.lease(opts.ttlSeconds, { autoKeepAlive: true });
    const ended = new Promise<void>((resolve) => end.signal.addEventListener('abort', () => resolve()));
    stampKeepalives(l);
    l.on('lost', (err) => {
      if (current?.lease === l) endLease(new LeaseEnd(`lease lost: ${err.message}`, 'lost'));
    });
    try {
      const id = await withTimeout(l.grant(), ttlMs, 'lease grant');
      current = { id, ended: end.signal, end, lease: l };
      lastKeepaliveSentMs = grantSentMs;
      const value = valueNow();
      await withTimeout(
        opts.client.put(`${membersPrefix}${opts.replicaId}`).value(value).lease(id).exec(),
        ttlMs,
        'membership registration',
      );
      memberValue.registered(value);
      if (!running) throw new LeaseEnd('resigned', 'ended');
      granted += 1;
      log.info({ leaseId: id, ttlSeconds: opts.ttlSeconds }, 'etcd session lease granted');
      const live: SessionLease = { id, ended: end.signal };
      waiters.resolveAll(live);
      for (const cb of listeners) cb(live);
      // Watchdog: etcd3 notices a dead lease late; we end it as soon as it may have expired on the server.
      const watchdog = setInterval(
        () => {
          if (!fresh())
            endLease(
              new LeaseEnd(
                `no successful keepalive for ${Math.round(keepaliveAgeMs() ?? 0)} ms (TTL ${ttlMs} ms)`,
                'lost',
              ),
            );
        },
        Math.min(250, ttlMs / 8),
      );
      try {
        await ended;
      } finally {
        clearInterval(watchdog);
      }
    } finally {
      if (current?.lease === l) {
        endLease(new LeaseEnd('lease abandoned', 'lost'));
        current = undefined;
      }
      lastKeepaliveSentMs = undefined;
      // Revoke so that every key on it goes at once (another replica is elected without waiting for the TTL).
      await withTimeout(l.revoke(), REVOKE_TIMEOUT_MS, 'lease revoke').catch(() => undefined);
    }
  }

  async function loop(): Promise<void> {
    let failures = 0;
    while (running) {
      try {
        await oneLease();
        failures = 0;
      } catch (err) {
        if (!running) break;
        failures += 1;
        // The message operators look for (docs/troubleshooting.md, alerts) when a replica cannot campaign.
        log.warn(
          { err: { message: (err as Error).message }, step: 'session lease grant' },
          'campaign failed; retrying',
        );
      }
      if (running)
        await sleep(backoffMs(failures + 1, { baseMs: 200, maxMs: 5000, jitter: true }), stop.signal);
    }
  }

  return {
    refreshMemberValue: () => memberValue.refresh(),
    get lease() {
      return current && !current.end.signal.aborted ? { id: current.id, ended: current.ended } : undefined;
    },
    nextLease(signal) {
      if (closed) return Promise.reject(new LeaseEnd('resigned', 'ended'));
      const live = this.lease;
      if (live) return Promise.resolve(live);
      return waiters.wait(signal);
    },
    fresh,
    get keepaliveAgeMs() {
      return keepaliveAgeMs();
    },
    onLease(cb) {
      listeners.push(cb);
    },
    get closed() {
      return closed;
    },
    get leasesGranted() {
      return granted;
    },
    start() {
      if (running || closed) return;
      running = true;
      void loop();
    },
    async close() {
      if (closed) return;
      closed = true;
      running = false;
      stop.abort();
      waiters.rejectAll(new LeaseEnd('resigned', 'ended'));
      const c = current;
      endLease(new LeaseEnd('resigned', 'ended'));
      if (!c) return;
      await withTimeout(c.lease.revoke(), REVOKE_TIMEOUT_MS, 'lease revoke').catch((err: unknown) =>
        log.warn(
          { leaseId: c.id, err: { message: (err as Error).message } },
          'cannot revoke the session lease; it expires on the server within its TTL',
        ),
      );
    },
  };
}
