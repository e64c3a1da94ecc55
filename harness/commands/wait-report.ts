/**
 * `harness wait-report FILE` (`npm run harness -- wait-report FILE`): reads the waits a test run recorded with
 * `WAIT_LOG=FILE` (harness/wait-log.ts) and prints one row per call site: how many waits, the longest that
 * ended in time, the bound, and their ratio, sorted by that ratio (a large ratio: a loose bound that hides a
 * regression; near 1: a bound a busy machine may cross). `--under DIR` keeps the call sites in test files
 * under DIR (e.g. `test/e2e`). Exit 2 when FILE cannot be read.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { WaitRecord } from '../wait-log.ts';

/** One call site's figures: its waits, the longest that ended in time (ms), its largest bound (ms). */
export interface WaitSite {
  readonly at: string;
  readonly waits: number;
  readonly longestMs: number;
  readonly boundMs: number;
  /** Waits that ran out at their bound (a `waitForLine` that lost a race to another replica's counts here). */
  readonly ranOut: number;
}

/** Groups `WAIT_LOG` lines by call site, sorted by bound ÷ longest wait, largest first. */
export function waitSites(records: readonly WaitRecord[], under = ''): WaitSite[] {
  const sites = new Map<string, { waits: number; longestMs: number; boundMs: number; ranOut: number }>();
  for (const r of records) {
    if (!r.at.startsWith(under)) continue;
    const s = sites.get(r.at) ?? { waits: 0, longestMs: 0, boundMs: 0, ranOut: 0 };
    s.waits++;
    s.boundMs = Math.max(s.boundMs, r.timeoutMs);
    if (r.ok) s.longestMs = Math.max(s.longestMs, r.elapsedMs);
    else s.ranOut++;
    sites.set(r.at, s);
  }
  const ratio = (s: { longestMs: number; boundMs: number }) => s.boundMs / Math.max(1, s.longestMs);
  return [...sites.entries()].map(([at, s]) => ({ at, ...s })).sort((a, b) => ratio(b) - ratio(a));
}

export function registerWaitReportCommand(program: Command): void {
  program
    .command('wait-report')
    .description('Per call site, the longest wait of a WAIT_LOG file against its bound.')
    .argument('<file>', 'the file a test run wrote with WAIT_LOG=<file>')
    .option('--under <dir>', 'only call sites in test files under this folder', '')
    .action((file: string, flags: { under: string }) => {
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        process.stderr.write(`wait-report: cannot read ${file}: ${(err as Error).message}\n`);
        process.exit(2);
      }
      // A reader that stops early (`| head`) is not an error.
      process.stdout.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'EPIPE') process.exit(0);
        throw err;
      });
      const records = text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as WaitRecord);
      process.stdout.write('bound/longest  longest ms  bound ms  waits  ran out  call site\n');
      for (const s of waitSites(records, flags.under)) {
        const ratio = s.longestMs > 0 ? (s.boundMs / s.longestMs).toFixed(1) : '-';
        process.stdout.write(
          `${ratio.padStart(13)}  ${String(s.longestMs).padStart(10)}  ${String(s.boundMs).padStart(8)}  ` +
            `${String(s.waits).padStart(5)}  ${String(s.ranOut).padStart(7)}  ${s.at}\n`,
        );
      }
    });
}
