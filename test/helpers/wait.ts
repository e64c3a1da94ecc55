/** Polls `check` until it returns a truthy value; fails with `what` after `timeoutMs`. Never a fixed sleep. */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<NonNullable<T>> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for: ${what}${last ? ` (last error: ${last})` : ''}`,
      );
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
