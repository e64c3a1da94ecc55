/**
 * The one place that reads the wall clock. Everything else takes a `now(): number` (epoch ms) so that
 * time maths stays in pure, testable helpers.
 */

/** Returns the current time in epoch milliseconds. */
export type Clock = () => number;

/** The system clock. */
export const systemClock: Clock = () => Date.now();
