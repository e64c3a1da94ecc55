/**
 * Failed logins per client address, for src/http/basic-auth.ts: when an address is slowed down, and which
 * failures are logged. Bounded in memory and in log volume, whatever a client sends:
 *
 * - an address gets {@link AUTH_FAILURES_ALLOWED} failures in a row; each further one refuses it for
 *   1 s · 2^(n−1), at most {@link AUTH_BACKOFF_MAX_MS} (the project's one backoff, src/backoff.ts); a success
 *   forgets it, and so do {@link AUTH_FAILURE_MEMORY_MS} without a failure;
 * - at most {@link AUTH_TRACKED_ADDRESSES} addresses are remembered, the longest quiet forgotten first;
 * - logged at warn: an address's first failure, the one that starts its backoff, then at most one a minute per
 *   address and {@link AUTH_LOG_LINES_PER_MINUTE} a minute in all; each line counts the failures left out
 *   before it (`notLogged`). Never the user name or password tried.
 *
 * Times come from the monotonic clock.
 */
import { backoffMs } from '../backoff.ts';
import type { MonotonicClock } from '../clock.ts';
import type { Logger } from '../log.ts';

/** Failed logins in a row an address gets before it is slowed down. */
export const AUTH_FAILURES_ALLOWED = 10;
/** How long the first failure past {@link AUTH_FAILURES_ALLOWED} refuses the address, ms (doubling after). */
export const AUTH_BACKOFF_INITIAL_MS = 1000;
/** The longest an address is refused after one failure, ms. */
export const AUTH_BACKOFF_MAX_MS = 60_000;
/** An address's failures are forgotten after this long without one, ms. */
export const AUTH_FAILURE_MEMORY_MS = 15 * 60_000;
/** Addresses remembered at most. */
export const AUTH_TRACKED_ADDRESSES = 10_000;
/** Lines logged per minute at most, over all addresses. */
export const AUTH_LOG_LINES_PER_MINUTE = 10;
/** One address is logged at most once per this interval (besides its first failure and its backoff's start), ms. */
const PER_ADDRESS_LOG_INTERVAL_MS = 60_000;

interface Entry {
  failures: number;
  lastFailureAt: number;
  blockedUntil: number;
  loggedAt: number | undefined;
}

/** The failed logins of every address. */
export interface AuthFailures {
  /** How long `client` is still refused, ms (0: not refused). */
  blockedForMs(client: string): number;
  /** Records a failed login of `client` on `path` (logged when sampled). */
  failed(client: string, path: string): void;
  /** `client` logged in: its failures are forgotten. */
  succeeded(client: string): void;
}

/** Creates the table; nothing is remembered at first. */
export function createAuthFailures(opts: { log: Logger; monotonicNow: MonotonicClock }): AuthFailures {
  const entries = new Map<string, Entry>();
  let windowStart = Number.NEGATIVE_INFINITY;
  let linesInWindow = 0;
  let notLogged = 0;

  const current = (client: string, now: number): Entry | undefined => {
    const e = entries.get(client);
    if (e && now - e.lastFailureAt > AUTH_FAILURE_MEMORY_MS && now >= e.blockedUntil) {
      entries.delete(client);
      return undefined;
    }
    return e;
  };

  const log = (client: string, path: string, e: Entry, now: number, blockedForMs: number | undefined) => {
    const due =
      e.loggedAt === undefined ||
      e.failures === AUTH_FAILURES_ALLOWED + 1 ||
      now - e.loggedAt >= PER_ADDRESS_LOG_INTERVAL_MS;
    if (now - windowStart >= 60_000) {
      windowStart = now;
      linesInWindow = 0;
    }
    if (!due || linesInWindow >= AUTH_LOG_LINES_PER_MINUTE) {
      notLogged++;
      return;
    }
    linesInWindow++;
    e.loggedAt = now;
    opts.log.warn(
      {
        client,
        path,
        failures: e.failures,
        ...(blockedForMs === undefined ? {} : { blockedForMs }),
        ...(notLogged > 0 ? { notLogged } : {}),
      },
      'http authentication failed',
    );
    notLogged = 0;
  };

  return {
    blockedForMs(client) {
      const now = opts.monotonicNow();
      const e = current(client, now);
      return e ? Math.max(0, e.blockedUntil - now) : 0;
    },
    failed(client, path) {
      const now = opts.monotonicNow();
      const e = current(client, now) ?? {
        failures: 0,
        lastFailureAt: now,
        blockedUntil: 0,
        loggedAt: undefined,
      };
      // Most recently failing last: the first key is the one to forget when the table is full.
      entries.delete(client);
      entries.set(client, e);
      while (entries.size > AUTH_TRACKED_ADDRESSES) {
        const oldest = entries.keys().next().value;
        if (oldest === undefined) break;
        entries.delete(oldest);
      }
      e.failures++;
      e.lastFailureAt = now;
      let blockedForMs: number | undefined;
      if (e.failures > AUTH_FAILURES_ALLOWED) {
        blockedForMs = backoffMs(e.failures - AUTH_FAILURES_ALLOWED, {
          baseMs: AUTH_BACKOFF_INITIAL_MS,
          maxMs: AUTH_BACKOFF_MAX_MS,
        });
        e.blockedUntil = now + blockedForMs;
      }
      log(client, path, e, now, blockedForMs);
    },
    succeeded(client) {
      entries.delete(client);
    },
  };
}
