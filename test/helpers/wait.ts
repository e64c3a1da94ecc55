import { startWait } from '../../harness/wait-log.ts';

/**
 * Polls `check` every `everyMs` until it returns a truthy value; fails with `what` (and the last error `check`
 * threw) after `timeoutMs`, measured on the monotonic clock. Never a fixed sleep. With `WAIT_LOG` set, the time
 * it took is recorded (harness/wait-log.ts).
 */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<NonNullable<T>> {
  const until = performance.now() + timeoutMs;
  const done = startWait(what, timeoutMs);
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) {
        done(true);
        return v as NonNullable<T>;
      }
    } catch (err) {
      last = err;
    }
    if (performance.now() > until) {
      done(false);
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for: ${what}${last ? ` (last error: ${last})` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
