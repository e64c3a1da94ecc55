/**
 * The error of fencing: this replica may not DELETE now. Leadership throws it ({@link Leadership.fence});
 * the job handler (workers/) turns it into the `fenced` outcome. It lives here, beside the leadership that
 * throws it, so that the domain never imports from workers/.
 */

/** This replica may not DELETE now: leadership lost, lease stale, or leader key gone. */
export class FencedError extends Error {
  override name = 'FencedError';
}
