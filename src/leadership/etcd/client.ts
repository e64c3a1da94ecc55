/**
 * The etcd client of a replica (and of `status` / `explain`), and how it copes with a member that is down:
 *
 * - **which member**: etcd3 picks one at random per call and per stream; our per-member policy
 *   (src/leadership/etcd/member-preference.ts) steers calls away from a member that failed recently, while
 *   another has not. It replaces etcd3's default per-member circuit breaker, which counts our own watch
 *   cancellations as failures, opens on a burst of them, and is closed again by every stream opened on a dead
 *   member (the opening succeeds; the stream fails just after).
 * - **retries**: etcd3 retries a unary call that failed with a connection or server error on the next member
 *   (3 retries, no delay) — kept.
 * - **how long a call may wait**: etcd3 sets no deadline (its `dialTimeout` option is declared but unused), so a
 *   call to a member that accepts connections and never answers (frozen, blackholed) waits forever. Each unary
 *   call gets `callTimeoutMs`; a timed-out call is retried on the next member. Streams (watch, keepalive) get
 *   HTTP/2 pings instead: a stream to a silent member fails after `PING_INTERVAL_MS + PING_TIMEOUT_MS`.
 * - **security**: TLS files and the etcd password are read at creation and re-read when they change
 *   (src/leadership/etcd/secrets.ts): the connections are then re-opened with the new certificate and
 *   log in with the new password.
 * - **auth tokens**: etcd forgets its tokens when it restarts; etcd3 logs in again for unary calls only. The
 *   watch and lease keepalive streams log in again too (src/leadership/etcd/auth-refresh.ts).
 * - **watch reconnects**: etcd3 waits before reopening a failed watch stream, doubling the wait up to 30 s and
 *   counting each failure twice (its `error` and its `end`): a few reopenings that landed on a dead member
 *   left the election view without news for seconds. Here the wait is at most {@link WATCH_RECONNECT_MAX_MS}.
 */

import { ExponentialBackoff, type IBackoff } from 'cockatiel';
import { Etcd3, type IOptions } from 'etcd3';
import { type MonotonicClock, monotonicClock } from '../../clock.ts';
import type { EtcdSecurity } from '../../config/schema.ts';
import { FAILOVER_TIMERS } from '../../failover-timers.ts';
import type { Logger } from '../../log.ts';
import { type AuthRefreshCounts, installAuthRefresh } from './auth-refresh.ts';
import { createMemberPreference, type MemberCallCounts } from './member-preference.ts';
import { readEtcdSecrets, watchEtcdSecrets } from './secrets.ts';

/**
 * Deadline of one login (etcd auth), ms: longer than a call's, as etcd checks the password with bcrypt and a
 * login is also the first call on a new TLS connection.
 */
export const LOGIN_TIMEOUT_MS = 5000;
/** Longest wait before reopening a failed watch stream, ms. */
export const WATCH_RECONNECT_MAX_MS = 1000;
/** A member that failed a call is avoided for this long (while another member has not failed), ms. */
export const AVOID_FAILED_MEMBER_MS = FAILOVER_TIMERS.avoidFailedMemberMs;
/**
 * Interval of HTTP/2 pings on a connection with open calls, ms. etcd refuses pings more often than its
 * `--grpc-keepalive-min-time` (default 5 s).
 */
export const PING_INTERVAL_MS = 10_000;
/** A ping unanswered for this long fails the connection and its streams, ms (generous: a loaded machine delays answers). */
export const PING_TIMEOUT_MS = 10_000;

/** Options of {@link createEtcdClient}. */
export interface EtcdClientOptions {
  /** Deadline of each unary call (per attempt; etcd3 retries on the next member), ms (default 2000). */
  callTimeoutMs?: number;
  /** The monotonic clock, ms (default the system's). */
  monotonicNow?: MonotonicClock;
  /** TLS files and etcd user auth (default none). */
  security?: EtcdSecurity;
  /** Where a changed or unreadable secret file, and a new login of a stream, are logged (default: not logged). */
  log?: Logger;
}

/** An etcd client, with the calls it sent to each member. */
export type EtcdClient = Etcd3 & {
  /** Calls per member (keyed by endpoint as configured), for tests and diagnostics. */
  readonly memberCalls: () => ReadonlyMap<string, MemberCallCounts>;
  /** Streams that logged in again after etcd refused their token, for tests and diagnostics. */
  readonly authRefreshes: () => AuthRefreshCounts;
};

/**
 * Creates an etcd client for the given endpoints (`http(s)://host:port`), secured by `opts.security`.
 * @throws Error (with `code`) when a file of `opts.security` cannot be read (checked by the configuration before).
 */
export function createEtcdClient(endpoints: readonly string[], opts: EtcdClientOptions = {}): EtcdClient {
  const security = opts.security ?? {};
  const secrets = readEtcdSecrets(security);
  const callTimeoutMs = opts.callTimeoutMs ?? 2000;
  const members = createMemberPreference({
    avoidForMs: AVOID_FAILED_MEMBER_MS,
    monotonicNow: opts.monotonicNow ?? monotonicClock,
  });
  const options: IOptions = {
    hosts: [...endpoints],
    ...(secrets.credentials ? { credentials: secrets.credentials } : {}),
    ...(secrets.auth
      ? { auth: { ...secrets.auth, callOptions: () => ({ deadline: Date.now() + LOGIN_TIMEOUT_MS }) } }
      : {}),
    // gRPC takes a wall-clock deadline.
    defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
    grpcOptions: {
      'grpc.keepalive_time_ms': PING_INTERVAL_MS,
      'grpc.keepalive_timeout_ms': PING_TIMEOUT_MS,
    },
    faultHandling: {
      host: (host) => members.policy(host),
      // etcd3 types this as a backoff but calls `next()` on it first, as on its own default (this factory).
      watchBackoff: new ExponentialBackoff({
        initialDelay: 100,
        maxDelay: WATCH_RECONNECT_MAX_MS,
      }) as unknown as IBackoff<unknown>,
    },
  };
  const client = new Etcd3(options);
  const authRefreshes = installAuthRefresh(client, opts.log);
  const stopWatching = watchEtcdSecrets(security, client, opts.log);
  const close = client.close.bind(client);
  return Object.assign(client, {
    memberCalls: () => members.counts(),
    authRefreshes,
    close: () => {
      stopWatching();
      close();
    },
  });
}
