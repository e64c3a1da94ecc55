/**
 * `spark-driver-cleaner check`: proves a deployment against the real cluster and backends before it deletes
 * anything — each context (reachable, TLS, version, clock, credentials, permissions asked with
 * SelfSubjectAccessReview), Redis, etcd or ZooKeeper, the running fleet — and, with `--canary NAMESPACE`, an
 * end-to-end run on canary pods (src/check/). Same configuration as `run` (flags, `SDC_*`, `--config`).
 * One line per check, ✓ ‼ ✗ –, or `--output json` (docs/check-output.schema.json).
 * Exit codes: 0 every check passed (warnings allowed), 1 one failed, 2 bad configuration (nothing contacted),
 * 3 something did not answer and nothing failed.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_CANARY_IMAGE } from '../check/canary-pod.ts';
import { checkJson, formatCheckText } from '../check/check-report.ts';
import { CheckConfigError, runChecks } from '../check/run-checks.ts';
import { type CheckResult, checkExitCode, EXIT_CONFIG, resultsOf } from '../check-result.ts';
import { systemClock } from '../clock.ts';
import { parseDurationMs } from '../config/duration.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import { KubeconfigError } from '../kube/kubeconfig.ts';
import { addConfigOptions } from './config-options.ts';

/** A duration flag (`5s`, `PT2M`, ms), at least `minMs`. */
function durationFlag(minMs: number): (raw: string) => number {
  return (raw) => {
    const ms = parseDurationMs(raw);
    if (ms === undefined || ms < minMs)
      throw new InvalidArgumentError(`expected a duration of at least ${minMs} ms, such as 5s or PT2M`);
    return ms;
  };
}

function countFlag(raw: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || n < 1 || n > 20)
    throw new InvalidArgumentError('expected an integer from 1 to 20');
  return n;
}

interface CheckFlags extends Record<string, unknown> {
  output: 'text' | 'json';
  canary?: string;
  canaryImage: string;
  canaryCount: number;
  canaryStartTimeout: number;
  maxClockSkew: number;
  timeout: number;
}

/** Registers `check` on the program. */
export function registerCheckCommand(program: Command): void {
  const cmd = program
    .command('check')
    .description(
      'Contact every context, Redis, etcd or ZooKeeper and the running fleet with the replicas’ configuration, ' +
        'and print one line per check (✓ ‼ ✗ –) with the fix; --canary proves the fleet end to end on canary pods. ' +
        'Exit 0 all passed, 1 a check failed, 2 bad configuration, 3 something did not answer.',
    )
    .addOption(
      new Option('--output <format>', 'text, or json (docs/check-output.schema.json)')
        .choices(['text', 'json'])
        .default('text'),
    )
    .option(
      '--canary <namespace>',
      'also create canary driver pods in this target namespace ([context:]namespace) and verify the running fleet deletes each once after the retention, not before; needs create on pods there',
    )
    .option(
      '--canary-image <image>',
      'image of the canary pods: it must exit 0 at once (`true`)',
      DEFAULT_CANARY_IMAGE,
    )
    .option('--canary-count <n>', 'canary pods to create (1 to 20)', countFlag, 3)
    .option(
      '--canary-start-timeout <duration>',
      'how long a canary may take to finish (scheduling, image pull)',
      durationFlag(1000),
      120_000,
    )
    .option(
      '--max-clock-skew <duration>',
      "largest skew accepted between this host's clock and an API server's",
      durationFlag(0),
      5000,
    )
    .option(
      '--timeout <duration>',
      'how long each server has to answer one request',
      durationFlag(100),
      5000,
    );
  addConfigOptions(cmd);
  cmd.action(async (flags: CheckFlags) => {
    process.exitCode = await check(flags);
  });
}

/** Writes the report and returns the exit code. */
function report(flags: CheckFlags, results: CheckResult[], exitCode = checkExitCode(results)): number {
  process.stdout.write(
    flags.output === 'json'
      ? `${JSON.stringify(checkJson(results, exitCode), null, 2)}\n`
      : formatCheckText(results),
  );
  return exitCode;
}

/** Runs `check` and returns its exit code. */
async function check(flags: CheckFlags): Promise<number> {
  const configLine = resultsOf('configuration');
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig({ flags });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return report(
      flags,
      err.problems.map((p) =>
        configLine.fail('configuration.invalid', p, { fix: 'the line names the field and what it expects' }),
      ),
      EXIT_CONFIG,
    );
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort(new Error('interrupted'));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const results = await runChecks(config, {
      maxClockSkewMs: flags.maxClockSkew,
      timeoutMs: flags.timeout,
      ...(flags.canary
        ? {
            canary: {
              target: flags.canary,
              image: flags.canaryImage,
              count: flags.canaryCount,
              startTimeoutMs: flags.canaryStartTimeout,
            },
          }
        : {}),
      now: systemClock,
      signal: stop.signal,
      progress: (line) => {
        if (flags.output !== 'json') process.stderr.write(`${line}\n`);
      },
    });
    return report(flags, results);
  } catch (err) {
    if (!(err instanceof KubeconfigError || err instanceof CheckConfigError)) throw err;
    return report(
      flags,
      [
        configLine.fail('configuration.invalid', err.message, {
          fix: 'the line names the setting and what it expects',
        }),
      ],
      EXIT_CONFIG,
    );
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
