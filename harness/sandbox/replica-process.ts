/**
 * Runs `spark-driver-cleaner run` as a real child process (one replica), collecting its JSON log lines.
 * Used by the demo, the end-to-end tests and the benchmarks: replicas are real processes so that
 * SIGKILL, SIGSTOP and SIGTERM mean what they mean in production.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startWait } from '../wait-log.ts';

/** The cleaner's CLI entry point, src/cli.ts (the harness runs from source only). */
export const CLI_PATH = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

/** The harness's CLI entry point, harness/cli.ts (`baseline-replica`). */
export const HARNESS_CLI_PATH = fileURLToPath(new URL('../cli.ts', import.meta.url));

/** A JSON log line of a replica. */
export type LogLine = Record<string, unknown> & { msg?: string; level?: string };

/** Options of {@link spawnReplica}. */
export interface SpawnReplicaOptions {
  /** Replica identity (SDC_REPLICA_ID). */
  id: string;
  /** Configuration as SDC_* variables (merged over the parent's environment). */
  env: Record<string, string>;
  /** Called for each log line (parsed JSON; non-JSON lines come as `{ msg: text }`). */
  onLine?: (line: LogLine) => void;
  /** Keep at most this many lines in memory (default 20 000). */
  keepLines?: number;
  /**
   * CLI subcommand to run (default `run`; the demo's uncoordinated baseline uses `baseline-replica` of
   * {@link HARNESS_CLI_PATH}).
   */
  command?: string;
  /** Arguments after the subcommand, e.g. `['--check']`. */
  args?: readonly string[];
  /** CLI entry point to run (default {@link CLI_PATH}; the benchmarks also run a compiled `cli.js`). */
  cliPath?: string;
  /**
   * A cgroup directory (its `cgroup.procs` writable) that the process joins before Node starts, so that
   * Node sizes its heap from the cgroup's memory limit as it does in a container (the cost benchmark).
   */
  cgroupDir?: string;
}

/** A replica child process. */
export interface ReplicaProcess {
  readonly id: string;
  readonly pid: number | undefined;
  readonly child: ChildProcess;
  /** Parsed log lines so far (bounded by `keepLines`). */
  readonly lines: LogLine[];
  /** stderr text (bounded). */
  readonly stderr: () => string;
  /** Resolves with the exit code (or signal name) when the process ends. */
  readonly exited: Promise<number | string>;
  /** Resolves with the first line (past or future) matching `match`; rejects after `timeoutMs`. */
  waitForLine(match: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  kill(signal?: NodeJS.Signals): void;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Spawns one replica with the same Node binary as this process. */
export function spawnReplica(opts: SpawnReplicaOptions): ReplicaProcess {
  // REPLICA_NODE_ARGS: extra Node flags for every replica, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` or V8
  // heap flags (bench/README.md).
  const nodeArgs = (process.env.REPLICA_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const argv = [...nodeArgs, opts.cliPath ?? CLI_PATH, opts.command ?? 'run', ...(opts.args ?? [])];
  // With a cgroup: a shell joins it, then execs Node (same pid), which reads the limit at start.
  const [file, args] = opts.cgroupDir
    ? [
        '/bin/sh',
        ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', opts.cgroupDir, process.execPath, ...argv],
      ]
    : [process.execPath, argv];
  const child = spawn(file, args, {
    env: { ...process.env, SDC_REPLICA_ID: opts.id, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const keep = opts.keepLines ?? 20_000;
  const lines: LogLine[] = [];
  const waiters = new Set<{ match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>();
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-20_000);
  });
  if (child.stdout) {
    createInterface({ input: child.stdout }).on('line', (text) => {
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        line = { msg: text };
      }
      lines.push(line);
      if (lines.length > keep) lines.shift();
      opts.onLine?.(line);
      for (const w of waiters) {
        if (w.match(line)) {
          waiters.delete(w);
          w.resolve(line);
        }
      }
    });
  }
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve(code ?? signal ?? -1);
    });
  });
  return {
    id: opts.id,
    get pid() {
      return child.pid;
    },
    child,
    lines,
    stderr: () => stderr,
    exited,
    waitForLine(match, timeoutMs = 30_000) {
      const done = startWait(`replica ${opts.id}: a log line`, timeoutMs);
      const found = lines.find(match);
      if (found) {
        done(true);
        return Promise.resolve(found);
      }
      return new Promise((resolve, reject) => {
        const w = {
          match,
          resolve: (l: LogLine) => {
            done(true);
            resolve(l);
          },
        };
        waiters.add(w);
        const t = setTimeout(() => {
          if (waiters.has(w)) done(false);
          waiters.delete(w);
          reject(
            new Error(
              `replica ${opts.id}: no matching log line within ${timeoutMs} ms; stderr: ${stderr.slice(-500)}`,
            ),
          );
        }, timeoutMs);
        t.unref();
        void exited.then(() => {
          if (waiters.delete(w)) {
            clearTimeout(t);
            reject(new Error(`replica ${opts.id} exited before the log line; stderr: ${stderr.slice(-500)}`));
          }
        });
      });
    },
    kill(signal = 'SIGTERM') {
      child.kill(signal);
    },
  };
}
