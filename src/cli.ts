#!/usr/bin/env node
/**
 * The `spark-driver-cleaner` command line: `run` (one replica), `status` and `explain` (what the cleaner
 * knows, from Redis and etcd), `demo` (the whole system on one machine), `apiserver` (the sandbox
 * Kubernetes API server) and `bench` (benchmarks).
 *
 * Each subcommand lives in its own module; this file only parses arguments and dispatches.
 * Exit codes: 0 success, 1 runtime failure, 2 bad configuration or usage.
 */
import { Command } from 'commander';
import { registerBenchCommand } from './commands/bench.ts';
import { registerDemoCommand } from './commands/demo.ts';
import { registerExplainCommand } from './commands/explain.ts';
import { registerRunCommand } from './commands/run.ts';
import { registerStatusCommand } from './commands/status.ts';
import { registerApiserverCommand } from './sandbox/apiserver-command.ts';

const program = new Command()
  .name('spark-driver-cleaner')
  .description(
    'Coordinated cleanup of terminated Spark driver pods: one DELETE per pod, whatever the replicas.',
  )
  .exitOverride((err) => {
    // commander's usage errors (unknown option, missing argument) are bad input: exit 2.
    process.exit(err.exitCode === 0 ? 0 : 2);
  });

registerRunCommand(program);
registerStatusCommand(program);
registerExplainCommand(program);
registerDemoCommand(program);
registerApiserverCommand(program);
registerBenchCommand(program);

await program.parseAsync(process.argv);
