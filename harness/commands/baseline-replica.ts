/**
 * `harness baseline-replica` (hidden): one replica of the uncoordinated baseline, for the
 * demo's `--baseline`/`--compare` and the benchmarks. Configured like `run` by `SDC_*` variables
 * (targets, kubeconfig, retention, labelSelector, policy, apiQps, apiBurst, replicaId, logLevel).
 * Exit codes: 2 for bad configuration, 0 after SIGTERM/SIGINT.
 */
import type { Command } from 'commander';
import { systemClock } from '../../src/clock.ts';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { KubeconfigError } from '../../src/kube/kubeconfig.ts';
import { createLogger } from '../../src/log.ts';
import { startBaselineReplica } from '../baseline/baseline-replica.ts';

/** Registers the hidden `baseline-replica` subcommand. */
export function registerBaselineReplicaCommand(program: Command): void {
  program
    .command('baseline-replica', { hidden: true })
    .description(
      'One uncoordinated replica: every replica deletes each pod on its own timer, as Kyuubi does.',
    )
    .action(async () => {
      let config: ReturnType<typeof loadConfig>;
      try {
        config = loadConfig({});
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        process.stderr.write(`spark-driver-cleaner baseline-replica: ${err.message}\n`);
        process.exit(2);
      }
      const log = createLogger({ level: config.logLevel, base: { replica: config.replicaId } });
      let replica: Awaited<ReturnType<typeof startBaselineReplica>>;
      try {
        replica = await startBaselineReplica(config, { log, now: systemClock });
      } catch (err) {
        if (!(err instanceof KubeconfigError)) throw err;
        process.stderr.write(`spark-driver-cleaner baseline-replica: ${err.message}\n`);
        process.exit(2);
      }
      let exiting = false;
      const shutdown = () => {
        if (exiting) return;
        exiting = true;
        setTimeout(() => process.exit(1), 10_000).unref();
        void replica.stop().then(() => {
          log.flush();
          process.exit(0);
        });
      };
      process.on('SIGTERM', shutdown);
      process.on('SIGINT', shutdown);
    });
}
