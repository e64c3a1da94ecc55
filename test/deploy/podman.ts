/**
 * Podman for the image test: whether an engine can run here, commands with the project's containers.conf
 * (scripts/podman/containers.conf: runc, no default ulimits), and a container run attached with its JSON log
 * lines collected, as {@link spawnReplica} does for a process.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { LogLine } from '../../harness/sandbox/replica-process.ts';
import { REPO_ROOT } from './render.ts';

/** The environment podman runs with: the project's containers.conf unless CONTAINERS_CONF names another. */
export const PODMAN_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? path.join(REPO_ROOT, 'scripts/podman/containers.conf'),
};

/** Why no image can be built and run here (a sentence for the skip message), or `undefined` when one can. */
export function engineProblem(): string | undefined {
  const has = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
  if (!has('podman'))
    return 'podman is not installed (bash scripts/install-test-tools.sh installs podman, runc and mmdebstrap as root)';
  const info = spawnSync('podman', ['info', '--format', '{{.Host.OCIRuntime.Name}}'], {
    env: PODMAN_ENV,
    encoding: 'utf8',
  });
  if (info.status !== 0)
    return `podman cannot run here: ${(info.stderr || info.stdout).trim().split('\n').at(-1)}`;
  if (!has('mmdebstrap'))
    return 'mmdebstrap is not installed: the local base image cannot be made (bash scripts/install-test-tools.sh)';
  return undefined;
}

/** A finished command: its exit code (`null` when killed by a signal) and output. */
export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `file args` from the repository root with {@link PODMAN_ENV}; never throws on a non-zero exit. */
export function run(file: string, args: string[], timeoutMs = 120_000): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { cwd: REPO_ROOT, env: PODMAN_ENV, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        if (err && code === null && !('signal' in err && err.signal)) reject(err);
        else resolve({ code, stdout, stderr });
      },
    );
  });
}

/** `podman args…`, see {@link run}. */
export const podman = (args: string[], timeoutMs?: number) => run('podman', args, timeoutMs);

/** A container run attached (`podman run` without `--detach`): its log lines and its exit. */
export interface Container {
  readonly name: string;
  /** Parsed JSON log lines so far (non-JSON lines as `{ msg: text }`). */
  readonly lines: LogLine[];
  readonly stderr: () => string;
  /** Resolves with the container's exit code (podman run's own) once it ended and its output was read. */
  readonly exited: Promise<number | string>;
  /** Resolves with the first line (past or future) matching `match`; rejects after `timeoutMs` or on exit. */
  waitForLine(match: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
}

/** Starts `podman run --name <name> <args…>` attached; `args` holds the flags, the image and its arguments. */
export function runContainer(name: string, args: string[]): Container {
  const child = spawn('podman', ['run', '--name', name, ...args], {
    cwd: REPO_ROOT,
    env: PODMAN_ENV,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  const waiters = new Set<{ match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>();
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-20_000);
  });
  createInterface({ input: child.stdout }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      line = { msg: text };
    }
    lines.push(line);
    for (const w of waiters)
      if (w.match(line)) {
        waiters.delete(w);
        w.resolve(line);
      }
  });
  const exited = new Promise<number | string>((resolve) => {
    // 'close', not 'exit': every line of its output has been read by then.
    child.once('close', (code, signal) => resolve(code ?? signal ?? -1));
  });
  return {
    name,
    lines,
    stderr: () => stderr,
    exited,
    waitForLine(match, timeoutMs = 60_000) {
      const found = lines.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const w = { match, resolve };
        waiters.add(w);
        const fail = (why: string) => {
          if (!waiters.delete(w)) return;
          const out = lines.slice(-15).map((l) => JSON.stringify(l).slice(0, 400));
          reject(
            new Error(
              `container ${name}: ${why}; stderr: ${stderr.slice(-800)}\nlast lines:\n${out.join('\n')}`,
            ),
          );
        };
        setTimeout(() => fail(`no matching log line within ${timeoutMs} ms`), timeoutMs).unref();
        void exited.then((code) => fail(`exited (${code}) before the log line`));
      });
    },
  };
}
