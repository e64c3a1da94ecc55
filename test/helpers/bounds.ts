/**
 * The bounds of the end-to-end tests' waits, set from measured figures with a stated margin rather than guessed:
 * a bound far above what a wait takes hides a regression (a cleanup that became ten times slower still passes),
 * one close to it fails on a busy machine.
 *
 * The figure behind a bound is the longest time that wait took in CI on this repository's 2-core machine with
 * another process keeping one core busy, recorded with `WAIT_LOG` and read with `npm run harness -- wait-report`
 * (harness/wait-log.ts; CONTRIBUTING.md, "Bounds in tests"). A bound is {@link MARGIN} times that figure, at least
 * {@link FLOOR_MS}; a wait whose length the configuration decides (a claim interval, a retention) adds that
 * interval to its bound instead of hiding it in a round number. A test's own timeout is only a backstop above the
 * sum of its waits' bounds, except where the test waits for a process to exit (the demo): there it is the bound.
 */

/** A bound is this many times the longest time measured for its wait. */
export const MARGIN = 3;

/**
 * No bound below this, ms: a replica process (Node, its informers, its first Redis and etcd answers) can stall a
 * few seconds on a busy 2-core machine, whatever the wait is for.
 */
export const FLOOR_MS = 10_000;

/**
 * The bound of a wait whose longest measured time is `measuredMs` (ms): {@link MARGIN} × `measuredMs`, rounded
 * up to a second, at least {@link FLOOR_MS}; plus `configuredMs`, the part of the wait the configuration decides.
 */
export function boundMs(measuredMs: number, configuredMs = 0): number {
  return Math.max(FLOOR_MS, Math.ceil((measuredMs * MARGIN) / 1000) * 1000) + configuredMs;
}

/**
 * The bounds the end-to-end tests share, ms, each with its measured figure (the longest in CI with a busy core).
 */
export const E2E_BOUNDS = {
  /** Replica processes spawned → the first `elected leader` line of a target (measured ≤ 4.6 s). */
  elected: boundMs(4_600),
  /** Drivers past their retention → every one deleted, replicas already leading (measured ≤ 5 s). */
  cleaned: boundMs(5_000),
  /** A log line, a metric or a request that follows something already seen (measured ≤ 2.3 s). */
  follows: boundMs(2_300),
  /** One run of the CLI (`status`, `explain`, `check`) beside the replicas (measured ≤ 3 s). */
  cli: boundMs(3_000),
} as const;
