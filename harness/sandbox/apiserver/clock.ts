/**
 * The sandbox clock: wall time plus an offset that tests can advance, so grace periods and fault
 * windows pass without waiting. This is the one place in the sandbox that reads `Date.now()`.
 */

/** A clock in epoch milliseconds that tests can move forward. */
export interface SandboxClock {
  /** Current time, epoch ms (wall time + everything advanced so far). */
  now(): number;
  /** Move the clock forward by `ms` milliseconds (must be ≥ 0) and notify listeners. */
  advance(ms: number): void;
  /** Called after every {@link SandboxClock.advance}; returns an unsubscribe function. */
  onAdvance(listener: () => void): () => void;
}

/**
 * Creates a clock. `base` defaults to `Date.now`; pass another source to make time fully manual.
 * @throws TypeError when `advance` gets a negative or non-finite number.
 */
export function createSandboxClock(base: () => number = Date.now): SandboxClock {
  let offsetMs = 0;
  const listeners = new Set<() => void>();
  return {
    now: () => base() + offsetMs,
    advance(ms: number) {
      if (!Number.isFinite(ms) || ms < 0) {
        throw new TypeError(`clock.advance expects a finite number of ms ≥ 0, got ${ms}`);
      }
      offsetMs += ms;
      for (const l of listeners) l();
    },
    onAdvance(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
