/**
 * One replica's wall clock, stepped at run time with libfaketime (Debian package `libfaketime`): the
 * process runs with `LD_PRELOAD` of the library and reads its offset from a file (`+12s`, `-7s`). Only the
 * wall clock moves (`DONT_FAKE_MONOTONIC=1`): `performance.now()`, timers and libuv's clock stay true, as
 * when NTP or an operator steps a host's clock.
 *
 * The library re-reads the file at most once a second (`FAKETIME_CACHE_DURATION=1`), so a step shows
 * within a second. `FAKETIME_NO_CACHE=1` would show it at once but costs a file read per clock read
 * (about 20 µs per `Date.now()` measured here: a replica became CPU-bound).
 */
import { existsSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MissingBinaryError } from '../../harness/sandbox/local-services.ts';

/** Where Debian's libfaketime puts the library. */
const CANDIDATES = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/faketime/libfaketime.so.1',
];

/** A stepped wall clock for one process: its environment and the step control. */
export interface FakeClock {
  /** Environment to add to the process (LD_PRELOAD and the libfaketime settings). */
  readonly env: Record<string, string>;
  /** Sets the offset from the true wall clock, in whole seconds (0: true time). Seen within a second. */
  step(offsetSeconds: number): void;
  /** The offset set last, seconds. */
  readonly offsetSeconds: number;
}

/**
 * The path of libfaketime.
 * @throws MissingBinaryError naming the package to install when it is absent.
 */
export function libfaketimePath(): string {
  const found = CANDIDATES.find((p) => existsSync(p));
  if (!found)
    throw new MissingBinaryError(
      'libfaketime not found: install it with `apt-get update && apt-get install -y faketime` ' +
        '(scripts/setup.sh does); the nemesis steps a replica’s wall clock with it',
    );
  return found;
}

/** Creates a fake clock at offset 0 (its offset file in a fresh temp directory). */
export function createFakeClock(): FakeClock {
  const file = join(mkdtempSync(join(tmpdir(), 'sdc-faketime-')), 'offset');
  let offset = 0;
  const write = (s: number) => {
    // Renamed into place: libfaketime never reads a half-written file.
    writeFileSync(`${file}.next`, `${s >= 0 ? '+' : ''}${s}s\n`);
    renameSync(`${file}.next`, file);
  };
  write(0);
  return {
    env: {
      LD_PRELOAD: libfaketimePath(),
      FAKETIME_TIMESTAMP_FILE: file,
      FAKETIME_CACHE_DURATION: '1',
      DONT_FAKE_MONOTONIC: '1',
    },
    step(offsetSeconds) {
      if (!Number.isInteger(offsetSeconds))
        throw new TypeError(`step: offsetSeconds must be an integer, got ${offsetSeconds}`);
      offset = offsetSeconds;
      write(offsetSeconds);
    },
    get offsetSeconds() {
      return offset;
    },
  };
}
