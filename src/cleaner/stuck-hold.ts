/**
 * The hold after a self-check step-down (src/cleaner/self-check.ts). A leader that stepped down because it
 * could not make progress would otherwise campaign again at once and, being the target's assigned replica,
 * be elected again, forever, while the cause is its own (its path to Redis wedged or refused, a connection
 * ioredis ended, a starved event loop). So it reports the target **not ready**, as a replica whose informer
 * cannot list does: the balancer assigns the target to the next ready replica (src/leadership/assignment.ts)
 * and this one stays out of its line until it has shown it can make progress again:
 *
 * - its own queue answers: a probe — the self-check's few reads of the target's queue, on the replica's own
 *   Redis connection — resolves, bounded by `probeTimeoutMs`, one probe at a time (a wedged connection is
 *   not given more commands to hold), tried once per self-check period; and
 * - it has been out at least `minHoldMs` × 2^(n−1), n the step-downs since a job last made progress here, at
 *   most {@link HOLD_MAX_FACTOR} × `minHoldMs`: for causes no probe shows (a fence that fails on every job, a
 *   starved event loop, a BullMQ Worker blocked on a connection that PINGs fine), the hold alone keeps a replica
 *   that gets stuck again out longer each time.
 *
 * When no replica is ready for a target (every replica stepped down: the cause is shared, e.g. Redis itself
 * down), the assignment ignores readiness and the target keeps a leader. Intervals use the monotonic clock.
 */
import { backoffMs } from '../backoff.ts';
import type { Logger } from '../log.ts';
import { withTimeout } from '../with-timeout.ts';

/** The longest hold, as a multiple of the first. */
export const HOLD_MAX_FACTOR = 16;

/** Options of {@link createStuckHold}. */
export interface StuckHoldOptions {
  /** The first hold after a step-down, ms (the self-check's `leaderStuckMs`). */
  readonly minHoldMs: number;
  /** Resolves when this replica's path to the target's queue answers; rejects (or never settles) otherwise. */
  readonly probe: () => Promise<unknown>;
  /** How long a probe may take before it counts as not answered, ms. */
  readonly probeTimeoutMs: number;
  readonly log: Logger;
  /** Monotonic ms. */
  readonly monotonicNow: () => number;
}

/** The hold of one target on this replica. */
export interface StuckHold {
  /** Why this replica stepped down (the self-check's reason) while it is held out; undefined otherwise. */
  readonly reason: string | undefined;
  /**
   * Begins a hold after a self-check step-down (one already running goes on, with the new reason).
   * @returns how long it lasts at least, ms
   */
  begin(reason: string): number;
  /** A job made progress on this replica: the next hold is `minHoldMs` again. */
  progressed(): void;
  /**
   * Call once per self-check period: ends the hold once it has lasted its minimum and a probe answers (then
   * logs `ready again for this target` at info). Never rejects.
   */
  check(): Promise<void>;
}

/** Creates the hold of one target: not held. */
export function createStuckHold(opts: StuckHoldOptions): StuckHold {
  /** Step-downs since a job last made progress here. */
  let strikes = 0;
  let held: { reason: string; sinceMs: number; minMs: number; probeFailures: number } | undefined;
  /** The probe in flight (shared by the checks until it settles): true when it answered. */
  let probing: Promise<boolean> | undefined;

  function probeOnce(): Promise<boolean> {
    probing ??= opts
      .probe()
      .then(
        () => true,
        () => false,
      )
      .finally(() => {
        probing = undefined;
      });
    return withTimeout(probing, opts.probeTimeoutMs, 'queue probe').catch(() => false);
  }

  return {
    get reason() {
      return held?.reason;
    },
    begin(reason) {
      if (held) {
        held.reason = reason;
        return held.minMs;
      }
      strikes += 1;
      const minMs = backoffMs(strikes, {
        baseMs: opts.minHoldMs,
        maxMs: opts.minHoldMs * HOLD_MAX_FACTOR,
      });
      held = { reason, sinceMs: opts.monotonicNow(), minMs, probeFailures: 0 };
      return minMs;
    },
    progressed() {
      strikes = 0;
    },
    async check() {
      const h = held;
      if (!h || opts.monotonicNow() - h.sinceMs < h.minMs) return;
      const ok = await probeOnce();
      if (held !== h) return;
      if (!ok) {
        h.probeFailures += 1;
        opts.log.debug(
          { why: h.reason, probes: h.probeFailures },
          'still not ready: its queue does not answer',
        );
        return;
      }
      held = undefined;
      opts.log.info(
        { outMs: Math.round(opts.monotonicNow() - h.sinceMs), steppedDownFor: h.reason },
        'ready again for this target',
      );
    },
  };
}
