#!/usr/bin/env node
/**
 * The `spark-driver-cleaner` command line, the only one the image ships: `run` (one replica), `check` (prove
 * a deployment against the cluster and its backends), `status` and `explain` (what the cleaner knows, from
 * Redis and etcd). The demo, the sandbox API server and the benchmarks have their own entry point,
 * harness/cli.ts.
 *
 * Each subcommand lives in its own module; this file only parses arguments and dispatches.
 * Exit codes: 0 success, 1 runtime failure, 2 bad configuration or usage (`check` and `status`: 3 when a
 * server does not answer).
 */
import { Command } from 'commander';
import { registerCheckCommand } from './commands/check.ts';
import { registerExplainCommand } from './commands/explain.ts';
import { registerRunCommand } from './commands/run.ts';
import { registerStatusCommand } from './commands/status.ts';
import { VERSION } from './version.ts';

const program = new Command()
  .name('spark-driver-cleaner')
  .description(
    'Coordinated cleanup of terminated Spark driver pods: one DELETE per pod, whatever the replicas.',
  )
  .version(VERSION)
  .exitOverride((err) => {
    // commander's usage errors (unknown option, missing argument) are bad input: exit 2.
    process.exit(err.exitCode === 0 ? 0 : 2);
  });

registerRunCommand(program);
registerCheckCommand(program);
registerStatusCommand(program);
registerExplainCommand(program);

await program.parseAsync(process.argv);
