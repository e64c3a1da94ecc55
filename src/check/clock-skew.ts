/**
 * How far the API server's clock is from ours, as far as one answer shows it. The answer's `Date` header
 * (1 s resolution, written by the server while it answered) puts the server's time, at some moment between
 * our sending and our receiving, in `[Date, Date + 1 s)`. Only what that interval proves is reported: the
 * smallest skew consistent with it (0 when our clock could be right), signed (positive: the server is ahead).
 *
 * Why it matters: deadlines are `finishedAt + retention`, with `finishedAt` written by the node's kubelet;
 * the cleaner judges "due" by the earlier of its own clock and the server's (src/kube/server-clock.ts), so a
 * skewed replica deletes late, or, when both its clock and the server's are ahead, early.
 */
import { parseDateHeader } from '../kube/server-clock.ts';

/** One answer's timing: its `Date` header, and our wall clock (epoch ms) when we sent and when it arrived. */
export interface ClockSample {
  readonly dateHeader: string | string[] | undefined;
  readonly sentAtMs: number;
  readonly receivedAtMs: number;
}

/**
 * The proven skew of the server's clock against ours, ms: > 0 when the server is ahead by at least that, < 0
 * when it is behind by at least that, 0 when the sample cannot tell them apart. Undefined without a usable
 * `Date` header. Pure.
 */
export function provenSkewMs(s: ClockSample): number | undefined {
  const date = parseDateHeader(s.dateHeader);
  if (date === undefined) return undefined;
  // The server's time lies in [date, date + 1000) at a moment of ours in [sentAtMs, receivedAtMs].
  if (date > s.receivedAtMs) return date - s.receivedAtMs;
  if (date + 1000 < s.sentAtMs) return date + 1000 - s.sentAtMs;
  return 0;
}
