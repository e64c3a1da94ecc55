/**
 * `harness bench [--quick] [--only …] [--name …]` (`npm run bench`): runs the benchmarks in `bench/` (the
 * product beside the uncoordinated baseline, on real Redis, etcd and a sandbox API server), writes
 * `bench/results/<name>.json` and renders `bench/REPORT.md`.
 *
 * The benchmarks are loaded by a computed path only when the command runs, so `harness --help` and the
 * other harness commands do not load them.
 * Exit codes: 0 done, 1 a benchmark failed (or redis-server / etcd is missing), 2 bad option or no
 * `bench/` directory beside `harness/`.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { systemClock } from '../../src/clock.ts';
import { MissingBinaryError } from '../sandbox/local-services.ts';

/** What `bench/run.ts` exports that this command uses (declared here: the compiler must not load it). */
interface BenchModule {
  BENCHMARKS: readonly string[];
  runBench(opts: {
    quick: boolean;
    only?: readonly string[];
    name?: string;
    resultsDir?: string;
    reportDir?: string;
    scaleSizes?: readonly { targets: number; replicas: number }[];
    scaleScope?: 'namespace' | 'cluster';
    leadership?: readonly ('etcd' | 'zookeeper')[];
    now: () => number;
  }): Promise<{ path: string }>;
}

const EXT = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const RUN_PATH = fileURLToPath(new URL(`../../bench/run${EXT}`, import.meta.url));
const NAMES = ['deletes', 'failover', 'lateness', 'burst', 'cost', 'scale', 'redis-failover'];

function leadershipList(raw: string): ('etcd' | 'zookeeper')[] {
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = names.find((n) => n !== 'etcd' && n !== 'zookeeper');
  if (bad !== undefined || names.length === 0)
    throw new InvalidArgumentError(
      `expected etcd, zookeeper or both (etcd,zookeeper)${bad ? `, not ${bad}` : ''}`,
    );
  return [...new Set(names)] as ('etcd' | 'zookeeper')[];
}

function benchList(raw: string): string[] {
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = names.filter((n) => !NAMES.includes(n));
  if (bad.length || !names.length)
    throw new InvalidArgumentError(`expected a comma-separated list of ${NAMES.join(', ')}; got ${raw}`);
  return names;
}

/** `100x3,300x3` → sizes of the scale benchmark (targets × replicas). */
function scaleSizes(raw: string): { targets: number; replicas: number }[] {
  return raw.split(',').map((s) => {
    const m = /^\s*(\d+)x(\d+)\s*$/i.exec(s);
    if (!m || Number(m[1]) < 1 || Number(m[2]) < 1)
      throw new InvalidArgumentError(
        `expected TARGETSxREPLICAS, comma-separated (e.g. 100x3,300x3); got ${raw}`,
      );
    return { targets: Number(m[1]), replicas: Number(m[2]) };
  });
}

function fileName(raw: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(raw))
    throw new InvalidArgumentError('expected a file name: letters, digits, . _ -');
  return raw;
}

/** Registers `bench` on the program. */
export function registerBenchCommand(program: Command): void {
  program
    .command('bench')
    .description(
      'Benchmarks: DELETEs per pod against replicas (coordinated vs the uncoordinated baseline), failover, ' +
        'lateness, burst throughput, API rate, cost. Writes bench/results/<name>.json and bench/REPORT.md.',
    )
    .option('--quick', 'small sizes and short windows (under two minutes, for CI)', false)
    .addOption(new Option('--only <list>', `benchmarks to run: ${NAMES.join(',')}`).argParser(benchList))
    .addOption(new Option('--name <name>', 'results file name (default quick or full)').argParser(fileName))
    .addOption(
      new Option(
        '--scale-sizes <list>',
        'sizes of the scale benchmark as TARGETSxREPLICAS, comma-separated (default 100x3,300x3; quick 4x2; the soak: 1000x5)',
      ).argParser(scaleSizes),
    )
    .addOption(
      new Option(
        '--scale-scope <scope>',
        "the scale benchmark's informerScope: namespace (the product's default) or cluster",
      ).choices(['namespace', 'cluster']),
    )
    .option(
      '--scale-as-deployed',
      "run the scale benchmark's replicas as the Deployment does: compiled, each in a memory cgroup with its limit",
      false,
    )
    .addOption(
      new Option(
        '--leadership <list>',
        'leadership backends the deletes and failover benchmarks measure, side by side: etcd (default), zookeeper or etcd,zookeeper',
      ).argParser(leadershipList),
    )
    .option(
      '--out <dir>',
      'write the results JSON and the report there (default: bench/results, and the report in bench/ for a full run, bench/results/<name>/ otherwise)',
    )
    .action(
      async (flags: {
        quick: boolean;
        only?: string[];
        name?: string;
        out?: string;
        scaleSizes?: { targets: number; replicas: number }[];
        scaleScope?: 'namespace' | 'cluster';
        scaleAsDeployed: boolean;
        leadership?: ('etcd' | 'zookeeper')[];
      }) => {
        if (!existsSync(RUN_PATH)) {
          process.stderr.write(
            `spark-driver-cleaner bench: ${RUN_PATH} not found; run it from a source checkout\n`,
          );
          process.exit(2);
        }
        const mod = (await import(RUN_PATH)) as BenchModule;
        try {
          const out = flags.out ? { resultsDir: flags.out, reportDir: flags.out } : {};
          await mod.runBench({
            quick: flags.quick,
            only: flags.only,
            name: flags.name,
            ...(flags.scaleSizes ? { scaleSizes: flags.scaleSizes } : {}),
            ...(flags.scaleScope ? { scaleScope: flags.scaleScope } : {}),
            ...(flags.scaleAsDeployed ? { scaleAsDeployed: true } : {}),
            ...(flags.leadership ? { leadership: flags.leadership } : {}),
            ...out,
            now: systemClock,
          });
        } catch (err) {
          if (err instanceof MissingBinaryError) {
            process.stderr.write(`spark-driver-cleaner bench: ${err.message}\n`);
            process.exit(1);
          }
          throw err;
        }
        process.exit(0);
      },
    );
}
