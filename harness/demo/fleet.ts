/**
 * The demo's replicas: `--replicas` real child processes, either coordinated (`run`) or the
 * uncoordinated baseline (`baseline-replica`), all feeding one {@link ReplicaTally}. Waits until they
 * are ready, kills one on request, reads the leaders from a replica's HTTP API, and stops them all
 * (SIGTERM, then SIGKILL after a timeout).
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnBaselineReplica } from '../baseline/baseline-replica.ts';
import { type ReplicaProcess, spawnReplica } from '../sandbox/replica-process.ts';
import type { ReplicaTally } from './replica-tally.ts';
import type { DemoMode } from './summary.ts';

/** A replica did not start, or exited during start. */
export class ReplicaStartError extends Error {
  override name = 'ReplicaStartError';
}

/** Options of {@link startFleet}. */
export interface FleetOptions {
  mode: DemoMode;
  /** Number of replica processes (≥ 1). */
  count: number;
  /** `SDC_*` and `KUBECONFIG` variables of every replica. */
  env: Record<string, string>;
  tally: ReplicaTally;
  /** Clock, epoch ms. */
  now: () => number;
  /** Also append each replica's log lines to `<logDir>/<replica id>.log` (JSON lines). */
  logDir?: string;
}

/** The running replicas. */
export interface Fleet {
  readonly replicas: readonly ReplicaProcess[];
  /** Replicas whose process has not exited. */
  alive(): ReplicaProcess[];
  /**
   * Resolves when every replica is ready: coordinated ones have logged their HTTP URL and every target
   * has a leader; baseline ones have logged 'replica started' (informers synced).
   * @throws ReplicaStartError after `timeoutMs` (ms) or when a replica exits first (with its stderr).
   */
  waitReady(targets: readonly string[], timeoutMs?: number): Promise<void>;
  /** Sends `signal` to one replica. */
  kill(id: string, signal: NodeJS.Signals): void;
  /**
   * The leader of each target from GET /api/v1/leaders of a live replica (coordinated only), falling back
   * to the log lines; `null` when none.
   */
  leaders(targets: readonly string[]): Promise<Record<string, string | null>>;
  /**
   * The overdue driver pods of the targets summed, as the self-check of a live replica reports them
   * (GET /api/v1/leaders; coordinated only): `null` when no replica answers or in the baseline.
   */
  overduePods(targets: readonly string[]): Promise<number | null>;
  /** SIGTERM to all, SIGKILL to those still running after `graceMs` (default 10 000 ms). Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Spawns the replicas. */
export function startFleet(opts: FleetOptions): Fleet {
  const { tally } = opts;
  const exited = new Set<string>();
  const started = new Set<string>();
  const replicas: ReplicaProcess[] = [];
  for (let i = 1; i <= opts.count; i++) {
    const id = `replica-${i}`;
    const spawnOpts = {
      id,
      env: opts.env,
      keepLines: 200,
      onLine: (line: Record<string, unknown>) => {
        tally.onLine(id, line);
        if (opts.logDir) appendFileSync(join(opts.logDir, `${id}.log`), `${JSON.stringify(line)}\n`);
        if (line.msg === 'replica started') started.add(id);
      },
    };
    const r = opts.mode === 'baseline' ? spawnBaselineReplica(spawnOpts) : spawnReplica(spawnOpts);
    void r.exited.then(() => {
      exited.add(id);
      tally.markDead(id);
    });
    replicas.push(r);
  }
  let stopping: Promise<void> | undefined;

  return {
    replicas,
    alive: () => replicas.filter((r) => !exited.has(r.id)),
    async waitReady(targets, timeoutMs = 90_000) {
      const until = opts.now() + timeoutMs;
      for (;;) {
        const dead = replicas.find((r) => exited.has(r.id));
        if (dead) {
          throw new ReplicaStartError(
            `${dead.id} exited during start: ${dead.stderr().trim().split('\n').slice(-5).join(' | ') || '(no stderr)'}`,
          );
        }
        const ready =
          opts.mode === 'baseline'
            ? replicas.every((r) => started.has(r.id))
            : replicas.every((r) => tally.urls.has(r.id)) &&
              targets.every((t) => tally.electedTargets().has(t));
        if (ready) return;
        if (opts.now() > until) {
          throw new ReplicaStartError(
            `replicas not ready within ${timeoutMs} ms (${opts.mode === 'baseline' ? 'informers not synced' : 'no leader for every target'})`,
          );
        }
        await sleep(100);
      }
    },
    kill(id, signal) {
      replicas.find((r) => r.id === id)?.kill(signal);
    },
    async leaders(targets) {
      const fromLogs = () => Object.fromEntries(targets.map((t) => [t, tally.leaderOf(t) ?? null]));
      const url = replicas.map((r) => !exited.has(r.id) && tally.urls.get(r.id)).find(Boolean);
      if (opts.mode === 'baseline' || !url) return opts.mode === 'baseline' ? {} : fromLogs();
      try {
        const res = await fetch(`${url}/api/v1/leaders`, { signal: AbortSignal.timeout(3000) });
        const body = (await res.json()) as { leaders?: Record<string, string | null | undefined> };
        return Object.fromEntries(targets.map((t) => [t, body.leaders?.[t] ?? null]));
      } catch {
        return fromLogs();
      }
    },
    async overduePods(targets) {
      const url = replicas.map((r) => !exited.has(r.id) && tally.urls.get(r.id)).find(Boolean);
      if (opts.mode === 'baseline' || !url) return null;
      try {
        const res = await fetch(`${url}/api/v1/leaders`, { signal: AbortSignal.timeout(3000) });
        const body = (await res.json()) as { targets?: Record<string, { overdue?: number } | undefined> };
        return targets.reduce((n, t) => n + (body.targets?.[t]?.overdue ?? 0), 0);
      } catch {
        return null;
      }
    },
    stop(graceMs = 10_000) {
      stopping ??= (async () => {
        const running = replicas.filter((r) => !exited.has(r.id));
        for (const r of running) r.kill('SIGTERM');
        const timer = setTimeout(() => {
          for (const r of running) if (!exited.has(r.id)) r.kill('SIGKILL');
        }, graceMs);
        await Promise.all(running.map((r) => r.exited));
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}
