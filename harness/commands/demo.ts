/**
 * `harness demo` (`npm run demo`): the whole system on one machine in one command (see
 * harness/demo/orchestrator.ts). Also registers the hidden `baseline-replica` subcommand its `--baseline`
 * mode runs.
 *
 * Exit codes: 0 when no pod leaked and (outside `--baseline`) no pod got a second DELETE; 1 otherwise,
 * or when redis-server, etcd or ZooKeeper is missing (a one-line message with the install command) or a replica
 * fails to start; 2 for a bad option (the message names it); 130 / 143 / 129 after SIGINT / SIGTERM /
 * SIGHUP, once everything it started is stopped.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { systemClock } from '../../src/clock.ts';
import { parseDurationMs } from '../../src/config/duration.ts';
import { ReplicaStartError } from '../demo/fleet.ts';
import { type DemoOptions, runDemo } from '../demo/orchestrator.ts';
import { Teardown } from '../demo/teardown.ts';
import { MissingBinaryError } from '../sandbox/local-services.ts';
import { registerBaselineReplicaCommand } from './baseline-replica.ts';

function intFrom(min: number, max: number): (raw: string) => number {
  return (raw) => {
    const n = Number(raw);
    if (!/^\s*\d+\s*$/.test(raw) || n < min || n > max)
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}`);
    return n;
  };
}

function positiveNumber(raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError('expected a number > 0');
  return n;
}

function durationMs(allowZero: boolean): (raw: string) => number {
  return (raw) => {
    const ms = parseDurationMs(raw);
    if (ms === undefined || (!allowZero && ms === 0))
      throw new InvalidArgumentError(
        `expected a duration${allowZero ? '' : ' > 0'}: 30s, 2m, 500ms, PT1M or a number of ms`,
      );
    return ms;
  };
}

interface DemoFlags {
  replicas: number;
  pods?: number;
  rate: number;
  retention: number;
  duration?: number;
  json?: boolean;
  killLeaderAt?: number;
  baseline?: boolean;
  compare?: boolean;
  electionTtl: number;
  leadership: 'etcd' | 'zookeeper';
  seed: number;
  logDir?: string;
}

/** Cross-option checks commander cannot express; returns the problem naming the options, if any. */
function conflict(f: DemoFlags): string | undefined {
  if (f.baseline && f.compare) return '--baseline and --compare: choose one (--compare runs both)';
  if (f.killLeaderAt !== undefined && f.baseline)
    return '--kill-leader-at: the baseline has no leader to kill; drop --baseline';
  if (f.killLeaderAt !== undefined && f.replicas < 2)
    return '--kill-leader-at needs --replicas 2 or more, so another replica can take over';
  return undefined;
}

/** Registers `demo` (and the hidden `baseline-replica`) on the program. */
export function registerDemoCommand(program: Command): void {
  registerBaselineReplicaCommand(program);
  program
    .command('demo')
    .description(
      'The whole system on one machine: Redis, etcd or ZooKeeper, two sandbox clusters with a Spark workload, and ' +
        'several replicas; prints how many DELETEs each terminated driver pod got.',
    )
    .addOption(new Option('--replicas <n>', 'replica processes').argParser(intFrom(1, 16)).default(3))
    .addOption(
      new Option(
        '--pods <n>',
        'driver pods to create, then end once all are cleaned (default: 200; with --duration alone: no limit)',
      ).argParser(intFrom(1, 1_000_000)),
    )
    .addOption(
      new Option('--rate <perSecond>', 'driver pods created per second (both clusters together)')
        .argParser(positiveNumber)
        .default(10),
    )
    .addOption(
      new Option('--retention <duration>', 'retention period after a driver finished (5s, PT5S, 5000)')
        .argParser(durationMs(true))
        .default(5000, '5s'),
    )
    .addOption(
      new Option('--duration <duration>', 'end after this long even if pods remain (30s, 2m)').argParser(
        durationMs(false),
      ),
    )
    .addOption(
      new Option(
        '--kill-leader-at <seconds>',
        'SIGKILL the leader of one target this many seconds in',
      ).argParser(positiveNumber),
    )
    .addOption(
      new Option(
        '--election-ttl <seconds>',
        'leader lease TTL (etcd) or session timeout (ZooKeeper) in seconds',
      )
        .argParser(intFrom(2, 60))
        .default(3),
    )
    .addOption(
      new Option(
        '--leadership <backend>',
        'where the replicas elect their leaders: etcd (ETCD_ENDPOINTS, else launched) or zookeeper (ZOOKEEPER, else launched)',
      )
        .choices(['etcd', 'zookeeper'])
        .default('etcd'),
    )
    .option('--baseline', 'run the uncoordinated baseline instead: every replica deletes on its own timer')
    .option('--compare', 'run the coordinated demo and the baseline on the same workload, side by side')
    .option('--json', 'print one JSON object instead of the table')
    .option('--log-dir <dir>', "keep every replica's JSON log lines in <dir>/<mode>/<replica>.log")
    .addOption(
      new Option('--seed <n>', 'seed of the workload outcome mix').argParser(intFrom(0, 2 ** 31)).default(42),
    )
    .action(async (flags: DemoFlags) => {
      const problem = conflict(flags);
      if (problem) {
        process.stderr.write(`spark-driver-cleaner demo: ${problem}\n`);
        process.exit(2);
      }
      const opts: DemoOptions = {
        replicas: flags.replicas,
        // --duration alone means "keep the workload going until then".
        pods: flags.pods ?? (flags.duration !== undefined ? undefined : 200),
        ratePerSecond: flags.rate,
        retentionMs: flags.retention,
        durationMs: flags.duration,
        json: flags.json === true,
        killLeaderAtMs: flags.killLeaderAt === undefined ? undefined : flags.killLeaderAt * 1000,
        mode: flags.compare ? 'compare' : flags.baseline ? 'baseline' : 'coordinated',
        electionTtlSeconds: flags.electionTtl,
        leadership: flags.leadership,
        seed: flags.seed,
        logDir: flags.logDir,
      };
      const teardown = new Teardown();
      let signalled = false;
      const exitCode = (signal: NodeJS.Signals) =>
        128 + (signal === 'SIGINT' ? 2 : signal === 'SIGHUP' ? 1 : 15);
      const onSignal = (signal: NodeJS.Signals) => {
        if (signalled) process.exit(exitCode(signal)); // second Ctrl-C: exit handlers SIGKILL the rest
        signalled = true;
        process.stderr.write(`\ndemo: ${signal}: stopping everything it started…\n`);
        setTimeout(() => process.exit(1), 20_000).unref();
        void teardown.run().then(() => process.exit(exitCode(signal)));
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      process.on('SIGHUP', onSignal); // terminal closed
      let code: number;
      try {
        code = await runDemo(
          opts,
          {
            stdout: process.stdout,
            stderr: process.stderr,
            tty: process.stderr.isTTY === true,
            env: process.env,
            now: systemClock,
          },
          teardown,
        );
      } catch (err) {
        if (signalled) return; // the signal handler exits once everything is stopped
        if (err instanceof MissingBinaryError || err instanceof ReplicaStartError) {
          process.stderr.write(`spark-driver-cleaner demo: ${err.message}\n`);
          process.exit(1);
        }
        throw err;
      }
      if (!signalled) process.exit(code);
    });
}
