/**
 * The demo's live progress on stderr: on a TTY a small block redrawn in place (pods terminated /
 * cleaned / pending, the leader of each target, the DELETE count); otherwise a plain log line every
 * few seconds, so CI logs and pipes stay readable. Notes (a replica's URL, a killed leader) are printed
 * above the block in both modes.
 */

/** One progress sample. */
export interface ProgressState {
  /** 'coordinated' or 'baseline'. */
  mode: string;
  /** Since the workload started, ms. */
  elapsedMs: number;
  created: number;
  /** Total pods to create, or undefined when unbounded (until --duration). */
  total: number | undefined;
  terminated: number;
  cleaned: number;
  /** Terminated and not yet cleaned. */
  pending: number;
  deleteRequests: number;
  /** target → leader (undefined while none). */
  leaders: Record<string, string | undefined>;
}

/** A progress display. */
export interface Progress {
  /** Shows the latest state (a TTY redraws at most every `redrawMs`; plain mode logs every `plainEveryMs`). */
  update(state: ProgressState): void;
  /** Prints a line above the display. */
  note(text: string): void;
  /** Leaves the last state on screen and stops drawing. Idempotent. */
  stop(): void;
}

/** Options of {@link createProgress}. */
export interface ProgressOptions {
  out: NodeJS.WritableStream;
  tty: boolean;
  /** Clock, epoch ms. */
  now: () => number;
  /** Minimum interval between plain lines, ms (default 2000). */
  plainEveryMs?: number;
}

function counts(s: ProgressState): string {
  const created = s.total === undefined ? `${s.created}` : `${s.created}/${s.total}`;
  return `created ${created}  terminated ${s.terminated}  cleaned ${s.cleaned}  pending ${s.pending}  DELETE requests ${s.deleteRequests}`;
}

function leaderText(s: ProgressState): string {
  const entries = Object.entries(s.leaders);
  if (entries.length === 0) return 'leaders: none (uncoordinated: every replica deletes on its own)';
  return `leaders: ${entries.map(([t, r]) => `${t}=${r ?? '…'}`).join('  ')}`;
}

/** Creates the display for `out` (stderr). */
export function createProgress(opts: ProgressOptions): Progress {
  const every = opts.plainEveryMs ?? 2000;
  let lastPlain = Number.NEGATIVE_INFINITY;
  let drawn = 0;
  let last: ProgressState | undefined;
  let stopped = false;

  const clear = () => {
    // Cursor up over the block and erase it, so the next write starts where the block began.
    if (drawn > 0) opts.out.write(`\x1b[${drawn}F\x1b[0J`);
    drawn = 0;
  };
  const draw = (s: ProgressState) => {
    const lines = [`[${s.mode} ${(s.elapsedMs / 1000).toFixed(1)}s] ${counts(s)}`, `  ${leaderText(s)}`];
    // Lines longer than the terminal would wrap, and the redraw would then erase too few lines.
    const columns = (opts.out as { columns?: number }).columns;
    const width = columns && columns > 20 ? columns - 1 : 160;
    opts.out.write(`${lines.map((l) => l.slice(0, width)).join('\n')}\n`);
    drawn = lines.length;
  };

  return {
    update(s) {
      if (stopped) return;
      last = s;
      if (opts.tty) {
        clear();
        draw(s);
        return;
      }
      const t = opts.now();
      if (t - lastPlain < every) return;
      lastPlain = t;
      opts.out.write(`demo: ${(s.elapsedMs / 1000).toFixed(1)}s ${s.mode} ${counts(s)}; ${leaderText(s)}\n`);
    },
    note(text) {
      if (opts.tty && !stopped) {
        clear();
        opts.out.write(`${text}\n`);
        if (last) draw(last);
      } else opts.out.write(`${text}\n`);
    },
    stop() {
      stopped = true;
    },
  };
}
