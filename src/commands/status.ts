/**
 * `spark-driver-cleaner status`: one block per target from Redis and the leadership backend (etcd or
 * ZooKeeper) alone (no API server) — its cluster, leader and since when, jobs by state, next deadline, overdue
 * jobs, last accepted DELETE, a refused cluster name, a rolling update from release 0.1.0 — then, with either
 * backend, how
 * leaderships are balanced (members, cap, per replica leads vs. assigned); `--json` for scripts. Same
 * configuration as `run` (flags, `SDC_*`, `--config`); for `context:*` targets, the namespaces some replica
 * campaigns for in etcd or ZooKeeper (src/status/discovered-targets.ts). A check: exit 0 when every target has a leader and no
 * overdue job and no refused cluster name, 1 otherwise, 2 for bad configuration, 3 when Redis or the leadership backend cannot be reached.
 */
import type { Command } from 'commander';
import { selfCheckSettings } from '../cleaner/self-check.ts';
import { systemClock } from '../clock.ts';
import { KubeconfigError } from '../kube/kubeconfig.ts';
import { leadershipMarker } from '../leadership/open-backend.ts';
import { membershipScope, targetKey } from '../queue/job-identity.ts';
import { readBalance } from '../status/balance-read.ts';
import { readClaims, refusalOf } from '../status/claims-read.ts';
import { discoveredTargets } from '../status/discovered-targets.ts';
import {
  ANSWER_TIMEOUT_MS,
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
      'Each target from Redis and etcd or ZooKeeper: leader, jobs, next deadline, overdue jobs, last DELETE; ' +
        'the leadership balance (members, cap, per replica leads vs. assigned). ' +
        'Exit 0 healthy, 1 a target without leader or with overdue jobs, 2 bad configuration, ' +
        '3 Redis, etcd or ZooKeeper unreachable.',
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
  let resolved: ReturnType<typeof resolveTargets>;
  try {
    resolved = resolveTargets(config);
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
    let targets = resolved.targets;
    // `context:*` targets: the namespaces some replica campaigns for now (no API server here).
    if (config.discover.length > 0) {
      if (store.elections) {
        const discovered = resolved.discoverContexts.map((context) => ({
          context,
          cluster: resolved.clusters.get(context)?.name ?? '',
        }));
        targets = [
          ...targets,
          ...(await discoveredTargets(store.elections, discovered, targets, ANSWER_TIMEOUT_MS)),
        ];
      } else
        process.stderr.write(
          'spark-driver-cleaner: status: discovered namespaces (context:* targets) are read from the elections in etcd or ZooKeeper; without either only the fixed targets are shown\n',
        );
    }
    // Each cluster name's claims read once: is it claimed by another cluster, or are some of its namespaces
    // served through another leadership backend (src/status/claims-read.ts)?
    const identities = new Map([...resolved.clusters.values()].map((c) => [c.name, c]));
    const claims = new Map(
      await Promise.all(
        [...identities.values()].map(
          async (c) => [c.name, await readClaims(store.redis, store.prefix, c)] as const,
        ),
      ),
    );
    const marker = leadershipMarker(config);
    const refusalFor = (t: { cluster: string; namespace: string }) => {
      const read = claims.get(t.cluster);
      return read ? refusalOf(read, t.namespace, marker) : undefined;
    };
    const rows = await Promise.all(
      targets.map((t) =>
        readTargetStatus(t, {
          queue: store.queueOf(t),
          redis: store.redis,
          elections: store.elections,
          prefix: store.prefix,
          nowMs,
          overdueGraceMs: graceMs,
          refusal: refusalFor(t),
        }),
      ),
    );
    // With etcd: the live members and the assignment, from the same keys the replicas balance with.
    const balance = store.elections
      ? await readBalance(
          store.elections,
          membershipScope(identities.keys()),
          targets.map(targetKey),
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
    const why = err instanceof UnreachableError ? err.message : readFailure(err, store, config);
    process.stderr.write(`spark-driver-cleaner: status: ${why}\n`);
    return EXIT_UNREACHABLE;
  } finally {
    await store.close();
  }
}
