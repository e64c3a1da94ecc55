/**
 * Keeps a replica's membership value (src/leadership/assignment.ts `memberValue`: the targets it is not ready
 * for, its cluster claims) written on its session's membership entry, for both backends (src/leadership/etcd/session.ts,
 * src/leadership/zookeeper/session.ts): one write in flight at a time, at most one per
 * {@link MEMBER_VALUE_MIN_GAP_MS}, the last value wins. A refresh asked for while a write is in flight is
 * not lost: the value is compared again once the write is answered. A failed write is logged and left to the
 * next refresh (or the next registration, which writes the value of its time).
 */
import type { MonotonicClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import { sleep } from '../sleep.ts';
import { MEMBER_VALUE_MIN_GAP_MS } from './backend.ts';

/** What {@link createMemberValueWriter} needs of a session. */
export interface MemberValueWriterOptions {
  /** The value now. */
  valueNow: () => string;
  /**
   * Writes `value` on the live session's entry; resolves true when the session it wrote on is still the live
   * one. Undefined when there is no live session to write on (not running, between sessions).
   * @throws (rejects) the store's error
   */
  write: (value: string) => Promise<boolean> | undefined;
  /** Aborted when the session closes: a wait for the next write ends. */
  signal: AbortSignal;
  monotonicNow: MonotonicClock;
  log: Logger;
  /** What the entry is called in the warning: `key` (etcd), `node` (ZooKeeper). */
  entry: string;
}

/** The membership value's writer of one session. */
export interface MemberValueWriter {
  /** The registration wrote `value` on a new session's entry (undefined: a new session, not registered yet). */
  registered(value: string | undefined): void;
  /** Writes the value now if it differs from the one written (coalesced, rate-limited). Never throws. */
  refresh(): void;
}

/** Creates the writer of one session's membership value. */
export function createMemberValueWriter(opts: MemberValueWriterOptions): MemberValueWriter {
  /** The value last written on the live session's entry (undefined: none yet). */
  let written: string | undefined;
  let writing = false;
  let again = false;
  let lastWriteMs = Number.NEGATIVE_INFINITY;

  async function run(): Promise<void> {
    writing = true;
    try {
      for (;;) {
        again = false;
        const waitMs = lastWriteMs + MEMBER_VALUE_MIN_GAP_MS - opts.monotonicNow();
        if (waitMs > 0) await sleep(waitMs, opts.signal, { unref: true });
        const value = opts.valueNow();
        // Not before the registration has written the entry (it writes the value of its time).
        const pending = written !== undefined && value !== written ? opts.write(value) : undefined;
        if (!pending) {
          if (!again) return;
          continue;
        }
        lastWriteMs = opts.monotonicNow();
        try {
          if (await pending) written = value;
        } catch (err) {
          opts.log.warn(
            { err: { message: (err as Error).message } },
            `cannot update the membership ${opts.entry}; retrying`,
          );
          return;
        }
        if (!again && opts.valueNow() === written) return;
      }
    } finally {
      writing = false;
    }
  }

  return {
    registered(value) {
      written = value;
    },
    refresh() {
      if (writing) {
        again = true;
        return;
      }
      if (written !== undefined && opts.valueNow() !== written) void run().catch(() => undefined);
    },
  };
}
