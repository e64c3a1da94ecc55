/**
 * `spark-driver-cleaner status`: one block per target from Redis and etcd alone (no API server) — leader and
 * since when, jobs by state, next deadline, overdue jobs, last accepted DELETE — then, with etcd, how
 * leaderships are balanced (members, cap, per replica leads vs. assigned); `--json` for scripts. Same
 * configuration as `run` (flags, `SDC_*`, `--config`). A check: exit 0 when every target has a leader and no
 * overdue job, 1 otherwise, 2 for bad configuration, 3 when Redis or etcd cannot be reached.
 */
import type { Command } from 'commander';
import { selfCheckSettings } from '../cleaner/self-check.ts';
import { systemClock } from '../clock.ts';
import { KubeconfigError } from '../kube/kubeconfig.ts';
import { readBalance } from '../status/balance-read.ts';
import {
  checkReachable,
  openStateStore,
  readFailure,
  resolveTargets,
  UnreachableError,
} from '../status/state-store.ts';
import { EXIT_UNREACHABLE, formatStatus, statusExitCode, statusJson } from '../status/status-format.ts';
import { readTargetStatus } from '../status/target-status.ts';
import { addConfigOptions, loadConfigOrExit } from './config-options.ts';

/** Registers `status` on the program. */
export function registerStatusCommand(program: Command): void {
  const cmd = program
    .command('status')
    .description(
      'Each target from Redis and etcd: leader, jobs, next deadline, overdue jobs, last DELETE; ' +
        'with etcd, the leadership balance (members, cap, per replica leads vs. assigned). ' +
        'Exit 0 healthy, 1 a target without leader or with overdue jobs, 2 bad configuration, 3 Redis/etcd unreachable.',
    )
    .option('--json', 'print JSON instead of text');
  addConfigOptions(cmd);
  cmd.action(async (flags: Record<string, unknown>) => {
    process.exitCode = await status(flags);
  });
}

/** Runs `status` and returns its exit code. */
async function status(flags: Record<string, unknown>): Promise<number> {
  const config = loadConfigOrExit(flags);
  let targets: ReturnType<typeof resolveTargets>;
  try {
    targets = resolveTargets(config);
  } catch (err) {
    if (!(err instanceof KubeconfigError)) throw err;
    process.stderr.write(`spark-driver-cleaner: invalid configuration:\n  - ${err.message}\n`);
    return 2;
  }
  const store = openStateStore(config);
  const nowMs = systemClock();
  const { graceMs } = selfCheckSettings(config.electionTtlSeconds, config.overdueGraceMs);
  try {
    await checkReachable(store, config);
    const rows = await Promise.all(
      targets.map((t) =>
        readTargetStatus(t, {
          queue: store.queueOf(t),
          redis: store.redis,
          elections: store.elections,
          prefix: store.prefix,
          nowMs,
          overdueGraceMs: graceMs,
        }),
      ),
    );
    // With etcd: the live members and the assignment, from the same keys the replicas balance with.
    const balance = store.elections
      ? await readBalance(
          store.elections,
          rows.map((r) => r.target),
          rows.map((r) => r.leader),
        )
      : undefined;
    process.stdout.write(
      flags.json === true
        ? `${JSON.stringify(statusJson(rows, nowMs, balance), null, 2)}\n`
        : formatStatus(rows, nowMs, balance),
    );
    return statusExitCode(rows);
  } catch (err) {
    // Unreachable: named by checkReachable; anything later is Redis or etcd failing mid-read.
    const why = err instanceof UnreachableError ? err.message : readFailure(err, config);
    process.stderr.write(`spark-driver-cleaner: status: ${why}\n`);
    return EXIT_UNREACHABLE;
  } finally {
    await store.close();
  }
}
