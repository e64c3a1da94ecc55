/**
 * The figures behind the tests' bounds: with `WAIT_LOG=<file>` set, every wait of a test ({@link
 * ../test/helpers/wait.ts}'s `waitFor`, a replica's `waitForLine`) appends one JSON line to that file — its call
 * site in the test file, what it waited for, how long it took and its bound, ms (monotonic clock) — so a bound
 * can be set from the measured figure with a stated margin (CONTRIBUTING.md, "Bounds in tests"). Unset: nothing
 * is written and nothing is measured.
 *
 * `npm run harness -- wait-report <file>` prints, per call site, the longest wait against its bound.
 */
import { appendFileSync } from 'node:fs';

/** One wait as `WAIT_LOG` records it. */
export interface WaitRecord {
  /** `path/to/x.test.ts:LINE` of the test file that waited (the first `.test.ts` frame of the stack). */
  readonly at: string;
  readonly what: string;
  /** ms the wait took; with `ok: false` the wait ran out at its bound. */
  readonly elapsedMs: number;
  /** The wait's bound, ms. */
  readonly timeoutMs: number;
  readonly ok: boolean;
}

/**
 * Starts timing one wait; returns the function that records its end (a no-op when `WAIT_LOG` is unset).
 * Call it synchronously from the waiting function so that the stack still names the test's line.
 */
export function startWait(what: string, timeoutMs: number): (ok: boolean) => void {
  const file = process.env.WAIT_LOG;
  if (!file) return () => {};
  const at = callSite(new Error().stack ?? '');
  const t0 = performance.now();
  return (ok) => {
    const rec: WaitRecord = { at, what, elapsedMs: Math.round(performance.now() - t0), timeoutMs, ok };
    appendFileSync(file, `${JSON.stringify(rec)}\n`);
  };
}

/** The first stack frame in a `.test.ts` file, relative to the repository (`?` when there is none). */
function callSite(stack: string): string {
  const hit = /(?:\(|at )(?:file:\/\/)?[^\s(]*?\/(test\/[^\s:()]+\.test\.ts):(\d+)/.exec(stack);
  return hit ? `${hit[1]}:${hit[2]}` : '?';
}
