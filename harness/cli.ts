#!/usr/bin/env node
/**
 * The harness command line (never shipped): `demo` (the whole system on one machine), `apiserver` (the
 * sandbox Kubernetes API server), `bench` (benchmarks), `wait-report` (the
 * tests' waits against their bounds, harness/wait-log.ts) and the hidden `baseline-replica` the demo and the
 * benchmarks spawn. The cleaner itself is src/cli.ts; the harness runs it as child processes.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 bad option or usage.
 */
import { Command } from 'commander';
import { registerApiserverCommand } from './commands/apiserver.ts';
import { registerBenchCommand } from './commands/bench.ts';
import { registerDemoCommand } from './commands/demo.ts';
import { registerWaitReportCommand } from './commands/wait-report.ts';

const program = new Command()
  .name('harness')
  .description('The test harness of spark-driver-cleaner: demo, sandbox API server, benchmarks.')
  .exitOverride((err) => {
    // commander's usage errors (unknown option, missing argument) are bad input: exit 2.
    process.exit(err.exitCode === 0 ? 0 : 2);
  });

registerDemoCommand(program);
registerApiserverCommand(program);
registerBenchCommand(program);
registerWaitReportCommand(program);

await program.parseAsync(process.argv);
