/**
 * Every command the README shows in its fenced shell blocks works as written on a fresh clone. The cheap
 * ones run here exactly as written (from the repository root, without SDC_* or KUBECONFIG in the
 * environment); the long ones (demo, benchmarks, the test suite) are each mapped to the test or CI step
 * that runs them at their smallest size, and that file must still contain the invocation. A command added
 * to the README without an entry here fails this test, and so does an entry the README no longer shows.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { FIELDS, flagName } from '../../src/config/fields.ts';
import { shellCommands } from '../helpers/readme-commands.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const readme = readFileSync(new URL('README.md', `file://${ROOT}`), 'utf8');
const scripts = (
  JSON.parse(readFileSync(new URL('package.json', `file://${ROOT}`), 'utf8')) as {
    scripts: Record<string, string>;
  }
).scripts;

/** How a README command is covered. */
type Coverage =
  /** Run here exactly as written; `expect` checks its output. */
  | { run: 'as-written'; expect: (out: { stdout: string; stderr: string }) => void }
  /**
   * Run here as written plus `--check`: a `run` example that needs the cluster, Redis and etcd it names;
   * `--check` validates every flag it shows and starts nothing.
   */
  | { run: 'with-check' }
  /** Too long to run here: `file` runs it at its smallest size, and contains `invocation`. */
  | { run: 'elsewhere'; file: string; invocation: string; why: string };

const COVERAGE: Record<string, Coverage> = {
  'npm run demo': {
    run: 'elsewhere',
    file: 'test/e2e/demo.test.ts',
    invocation: "startDemo(['--pods', '60', '--replicas', '3', '--retention', '2s', '--json'])",
    why: 'the demo command with 60 pods (npm run demo = scripts/setup.sh, which CI runs, then the same command)',
  },
  'npm run demo -- --leadership zookeeper': {
    run: 'elsewhere',
    file: 'test/e2e/demo.test.ts',
    invocation: "ZOOKEEPER_DEMO = ['--leadership', 'zookeeper', '--pods', '20', '--replicas', '2', '--json']",
    why: 'the demo on ZooKeeper with 20 pods and 2 replicas',
  },
  'npm test': {
    run: 'elsewhere',
    file: '.ci/run',
    invocation: '\nnpm test\n',
    why: 'CI runs the whole suite as written',
  },
  'npm run setup': {
    run: 'elsewhere',
    file: '.ci/run',
    invocation: '\nbash scripts/setup.sh\n',
    why: 'CI runs the script npm run setup runs; not here: it may run npm ci, which rewrites node_modules',
  },
  'npx node src/cli.ts run --targets prod-eu:spark-jobs,prod-eu:spark-adhoc --redis-url redis://redis:6379 --etcd-endpoints http://etcd-0:2379,http://etcd-1:2379,http://etcd-2:2379 --retention PT5M --policy ALL':
    { run: 'with-check' },
  'npx node src/cli.ts run --help': {
    run: 'as-written',
    expect: ({ stdout }) => {
      for (const f of FIELDS) expect(stdout, f.key).toContain(flagName(f.key));
      expect(stdout).toContain('(range: 1s to 24h)');
    },
  },
  'npx node src/cli.ts run --check --targets kind-a:spark --retention PT5M': {
    run: 'as-written',
    expect: ({ stdout }) =>
      expect(JSON.parse(stdout)).toMatchObject({ targets: ['kind-a:spark'], retentionMs: 300_000 }),
  },
  'npx node src/cli.ts explain prod-eu:spark-jobs/kyuubi-etl-0f3a9c2e-driver': {
    run: 'elsewhere',
    file: 'test/ops/status-explain.test.ts',
    invocation: "cli(['explain', ref, '--json']",
    why: 'explain needs Redis, etcd and a cluster: run against replica processes for each verdict',
  },
  'npx node src/cli.ts status': {
    run: 'elsewhere',
    file: 'test/ops/status-explain.test.ts',
    invocation: "cli(['status'], env([NS]))",
    why: 'status needs Redis and etcd: run against replica processes, a healthy and a leaderless target',
  },
  'npx node src/cli.ts status --json': {
    run: 'elsewhere',
    file: 'test/ops/status-explain.test.ts',
    invocation: "cli(['status', '--json'], env([NS, ORPHAN]))",
    why: 'the same, parsed as JSON, exit 0 and exit 1',
  },
  'npx node src/cli.ts status --help': {
    run: 'as-written',
    expect: ({ stdout }) => {
      expect(stdout).toContain('--json');
      for (const f of FIELDS) expect(stdout, f.key).toContain(flagName(f.key));
    },
  },
  'bash scripts/build-image.sh': {
    run: 'elsewhere',
    file: 'test/deploy/image.test.ts',
    invocation: "const BUILD = 'bash scripts/build-image.sh';",
    why: 'the image test builds the image with it as written (minutes on a cold cache), then runs the image',
  },
  'bash scripts/image-report.sh spark-driver-cleaner:dev': {
    run: 'elsewhere',
    file: 'test/deploy/image.test.ts',
    invocation: "const REPORT = 'bash scripts/image-report.sh spark-driver-cleaner:dev';",
    why: 'the image test runs it as written on the image it built and checks each section',
  },
  'npm run bench -- --quick': {
    run: 'elsewhere',
    file: 'test/bench/quick.test.ts',
    invocation: "'npm run bench -- --quick'",
    why: 'the quick benchmarks, run exactly as written, into bench/results/quick*',
  },
  'npm run bench': {
    run: 'elsewhere',
    file: 'test/bench/quick.test.ts',
    invocation: "'npm run bench -- --quick'",
    why: 'the same benchmarks at their smallest size (--quick); the full run only changes the sizes',
  },
  'npm run bench -- --quick --only scale --name scale-quick': {
    run: 'elsewhere',
    file: 'test/bench/scale.test.ts',
    invocation: "'npm run bench -- --quick --only scale --name scale-quick'",
    why: 'the scale benchmark at 4 targets × 2 replicas, run exactly as written',
  },
  'npm run bench -- --only scale --scale-sizes 1000x5 --name scale-soak': {
    run: 'elsewhere',
    file: 'test/bench/scale.test.ts',
    invocation: "'npm run bench -- --quick --only scale --name scale-quick'",
    why: 'the 1,000 × 5 soak: the same benchmark, only the size differs (--scale-sizes)',
  },
  'npm run bench -- --only scale --scale-sizes 1000x5 --scale-scope cluster --name scale-soak-cluster': {
    run: 'elsewhere',
    file: 'test/bench/scale.test.ts',
    invocation: "'npm run bench -- --quick --only scale --scale-scope cluster --name scale-quick-cluster'",
    why: 'the 1,000 × 5 soak in cluster scope: the quick run with the same --scale-scope',
  },
  'npm run bench -- --only scale --scale-sizes 1000x5 --scale-scope cluster --scale-as-deployed --name scale-soak-cluster-deployed':
    {
      run: 'elsewhere',
      file: 'test/bench/scale.test.ts',
      invocation: "'npm run bench -- --quick --only scale --scale-as-deployed --name scale-quick-deployed'",
      why: 'the 1,000 × 5 soak as deployed: the quick run with the same --scale-as-deployed (cluster scope is tested beside it)',
    },
};

/** The environment of a fresh shell: none of the cleaner's settings. */
function freshEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env))
    if (k.startsWith('SDC_') || ['KUBECONFIG', 'REDIS_URL', 'ETCD_ENDPOINTS'].includes(k)) delete env[k];
  return env;
}

interface ShellResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `command` with bash from the repository root in a fresh environment. */
function sh(command: string): Promise<ShellResult> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', command], { cwd: ROOT, env: freshEnv() }, (err, stdout, stderr) => {
      const status = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      if (err && status === null) reject(err);
      else resolve({ status, stdout, stderr });
    });
  });
}

/** The commands run here, started together (each CLI start costs seconds of CPU), awaited by their test. */
const runs = new Map<string, Promise<ShellResult>>();
function started(command: string): Promise<ShellResult> {
  let run = runs.get(command);
  if (!run) {
    run = sh(command);
    runs.set(command, run);
  }
  return run;
}

describe('shellCommands (the README parser)', () => {
  const fence = '```';
  const cases: [string, string, string[]][] = [
    [
      'one sh block, two commands',
      `${fence}sh\nnpm run demo\nnpm test\n${fence}`,
      ['npm run demo', 'npm test'],
    ],
    ['a comment after a blank is dropped', `${fence}sh\nnpm test   # all of it\n${fence}`, ['npm test']],
    ['a # inside a word or quotes is kept', `${fence}bash\necho a#b '# c'\n${fence}`, ["echo a#b '# c'"]],
    ['continuations joined', `${fence}sh\nrun \\\n  --a 1 \\\n  --b 2\n${fence}`, ['run --a 1 --b 2']],
    ['a $ prompt removed', `${fence}console\n$ npm test\n${fence}`, ['npm test']],
    ['comment-only and blank lines skipped', `${fence}sh\n# setup\n\nnpm test\n${fence}`, ['npm test']],
    ['blocks of other languages ignored', `${fence}\nnpm x\n${fence}\n${fence}yaml\na: b\n${fence}`, []],
    ['text outside fences ignored', 'run `npm test` now', []],
  ];
  for (const [name, md, want] of cases) it(name, () => expect(shellCommands(md)).toEqual(want));
});

describe('README commands', () => {
  const commands = shellCommands(readme);
  const commandLine = (command: string, how: Coverage) =>
    how.run === 'with-check' ? `${command} --check` : command;

  beforeAll(() => {
    for (const [command, how] of Object.entries(COVERAGE))
      if (how.run !== 'elsewhere') void started(commandLine(command, how)).catch(() => undefined);
  });

  it('every command in a fenced shell block has an entry here, and every entry is still in the README', () => {
    expect(commands.length).toBeGreaterThan(0);
    expect(
      commands.filter((c) => !(c in COVERAGE)),
      'README commands without an entry',
    ).toEqual([]);
    expect(
      Object.keys(COVERAGE).filter((c) => !commands.includes(c)),
      'entries the README no longer shows',
    ).toEqual([]);
  });

  it('every `npm run` script the README names exists in package.json', () => {
    for (const c of commands) {
      const script = /^npm run (?:-s )?([\w:-]+)/.exec(c)?.[1];
      if (script) expect(scripts[script], c).toBeDefined();
    }
  });

  for (const [command, how] of Object.entries(COVERAGE)) {
    const short = command.length > 70 ? `${command.slice(0, 67)}…` : command;
    if (how.run === 'elsewhere') {
      it(`${short}: run by ${how.file} (${how.why})`, () => {
        expect(readFileSync(new URL(how.file, `file://${ROOT}`), 'utf8')).toContain(how.invocation);
      });
    } else if (how.run === 'as-written') {
      it(`${short}: runs as written`, async () => {
        const r = await started(command);
        expect(r.status, r.stderr).toBe(0);
        how.expect(r);
      });
    } else {
      it(`${short}: every flag it shows is valid (run with --check)`, async () => {
        const r = await started(commandLine(command, how));
        expect(r.status, r.stderr).toBe(0);
        expect(JSON.parse(r.stdout)).toHaveProperty('targets');
      });
    }
  }
});
