/**
 * The one module that reads clocks. Everything else is given the clock it needs, so that time maths stays
 * in pure, testable helpers. Two clocks, never mixed:
 *
 * - the **wall clock** ({@link Clock}, epoch ms) steps with NTP and with operators: only for deadlines from
 *   Kubernetes timestamps (`finishedAt + retention`), `Retry-After` dates and token expiry times;
 * - the **monotonic clock** ({@link MonotonicClock}) never steps: for every interval between two moments of
 *   this process — lease freshness, the watchdog, rate limiting, backoffs, how long something is down. On
 *   the wall clock a step back would make an expired lease look fresh and a step forward drop it.
 */

/** Returns the current time in epoch milliseconds (the wall clock). */
export type Clock = () => number;

/** Returns milliseconds since an arbitrary origin (not epoch): only differences of two readings mean anything. */
export type MonotonicClock = () => number;

/** The system's wall clock. */
export const systemClock: Clock = () => Date.now();

/** The system's monotonic clock (`performance.now()`, CLOCK_MONOTONIC). */
export const monotonicClock: MonotonicClock = () => performance.now();
