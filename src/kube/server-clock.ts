/**
 * The API server's clock, as one context's answers reveal it: every answer carries a `Date` header
 * (RFC 9110 §6.6.1; kube-apiserver's Go net/http writes it from the server's clock), with 1 s resolution.
 * Each one is a *lower bound* of the server's time when it arrived: the header was written before it
 * arrived, and the server's time then was at least the header's second. Carried forward with the
 * monotonic clock (which never steps), the largest such bound is a lower bound of the server's time now.
 *
 * Why: a cleanup deadline (`finishedAt + retention`) is a Kubernetes timestamp, and a leader whose own
 * wall clock is ahead (NTP, an operator, a VM resumed) judged pods due early and deleted them before their
 * deadline (found by the nemesis: a leader's clock stepped +19 s deleted 14 pods 0.7–3.0 s early). The
 * clock that judges "due" is therefore {@link ServerClock.dueNow}: the *earlier* of this replica's wall
 * clock and the server's lower bound. A DELETE can then be early only if both clocks are ahead: this
 * replica's, and the server's itself (a server clock stepped back after we saw it). Before the first answer
 * there is no bound, and the wall clock alone judges.
 *
 * Cost: one header parse per answer; nothing is sent. One instance per context (its answers share one server).
 */
import type { Clock, MonotonicClock } from '../clock.ts';

/** One context's view of its API server's clock. */
export interface ServerClock {
  /**
   * Records one answer's `Date` header, received at `receivedAt` (monotonic ms; default now). A missing or
   * unparseable header is ignored.
   */
  observe(dateHeader: string | string[] | undefined, receivedAt?: number): void;
  /**
   * A lower bound of the API server's time now, epoch ms: max over the answers seen of
   * `Date + (monotonic now − monotonic receipt)`. Undefined before any answer with a `Date`.
   */
  lowerBoundMs(): number | undefined;
  /**
   * The clock that judges whether a cleanup is due, epoch ms: `min(wall clock, lowerBoundMs())`, or the
   * wall clock alone before any answer. Never ahead of the server's clock (unless it stepped back since).
   */
  dueNow(): number;
  /**
   * The clock that stamps a moment this replica saw, epoch ms (when it first saw a pod terminal that carries
   * no finish time of its own): `max(wall clock, lowerBoundMs())`, never behind the API server's clock as far
   * as its answers show (to within the second of their `Date`), so a replica whose clock lags does not stamp a
   * time, and a deadline from it, earlier than the server would.
   */
  notBehindNow(): number;
}

/** Clocks of {@link createServerClock}: this replica's wall clock and its monotonic clock (src/clock.ts). */
export interface ServerClockDeps {
  now: Clock;
  monotonicNow: MonotonicClock;
}

/**
 * Parses an HTTP `Date` header (IMF-fixdate, e.g. `Tue, 01 Dec 2026 14:02:26 GMT`) to epoch ms, floored to
 * the second (the format has no finer unit). Undefined when absent or not a date.
 */
export function parseDateHeader(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  const ms = Date.parse(text);
  if (!Number.isFinite(ms)) return undefined;
  return Math.floor(ms / 1000) * 1000;
}

/** Creates the server clock of one context, with no observation yet. */
export function createServerClock(deps: ServerClockDeps): ServerClock {
  /** The best observation so far, kept as `dateMs − receivedAt`: adding monotonic now gives the bound. */
  let offset: number | undefined;
  const lowerBoundMs = () => (offset === undefined ? undefined : offset + deps.monotonicNow());
  return {
    observe(dateHeader, receivedAt = deps.monotonicNow()) {
      const dateMs = parseDateHeader(dateHeader);
      if (dateMs === undefined) return;
      const o = dateMs - receivedAt;
      if (offset === undefined || o > offset) offset = o;
    },
    lowerBoundMs,
    dueNow() {
      const local = deps.now();
      const bound = lowerBoundMs();
      return bound === undefined ? local : Math.min(local, bound);
    },
    notBehindNow() {
      const local = deps.now();
      const bound = lowerBoundMs();
      return bound === undefined ? local : Math.max(local, bound);
    },
  };
}
