/**
 * What ships is the cleaner and nothing else (STYLE.md 15, as sample-controller's `main.go`
 * starts nothing else): the built and imaged code (src/, workers/) refers to no file outside itself, in
 * particular not to the harness (sandbox API server, demo, baseline), bench/ or test/; the production CLI
 * offers none of the harness's commands; the image build copies nothing but the manifests, tsconfig* and
 * src/ + workers/; the compiler's build configuration compiles only those; and what ships imports only
 * production dependencies (`selfsigned`, the sandbox's TLS, is a devDependency).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DockerfileParser } from 'dockerfile-ast';
import { describe, expect, it } from 'vitest';
import { packagesOf, REPO_ROOT, refsOf, tsFilesUnder } from '../helpers/imports.ts';

const SHIPPED = ['src', 'workers'];
const shipped = (file: string) => SHIPPED.some((dir) => file.startsWith(`${dir}/`));

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a CLI entry point with this Node (24) from the repository root. */
function cli(entry: string, args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [entry, ...args], { cwd: REPO_ROOT }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

/** The command names in the `Commands:` section of commander's `--help`. */
function commandsOf(help: string): string[] {
  const section = help.split(/^Commands:\s*$/m)[1] ?? '';
  return [...section.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1] ?? '');
}

describe('what ships refers only to what ships', () => {
  const files = SHIPPED.flatMap(tsFilesUnder);
  it('src/ and workers/ are not empty (the scan sees them)', () => {
    expect(files).toContain('src/cli.ts');
    expect(files.some((f) => f.startsWith('workers/'))).toBe(true);
  });
  it('no file under src/ or workers/ imports or loads a file outside them (harness/, bench/, test/)', () => {
    const outside = files.flatMap(refsOf).filter((r) => !shipped(r.to));
    expect(outside.map((r) => `${r.from} → ${r.specifier}`)).toEqual([]);
  });
  it('every package src/ and workers/ import is a production dependency (the image installs no others)', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const missing = files.flatMap((f) =>
      packagesOf(f)
        .filter((p) => !(p in pkg.dependencies))
        .map((p) => `${f} → ${p}`),
    );
    expect(missing).toEqual([]);
  });
});

describe('the production CLI is the cleaner only', () => {
  const production = cli('src/cli.ts', ['--help']);
  const harness = cli('harness/cli.ts', ['--help']);

  it('src/cli.ts --help lists run and none of the harness commands', async () => {
    const [p, h] = await Promise.all([production, harness]);
    expect(p.code, p.stderr).toBe(0);
    expect(h.code, h.stderr).toBe(0);
    const harnessCommands = commandsOf(h.stdout).filter((c) => c !== 'help');
    expect(harnessCommands).toEqual(expect.arrayContaining(['demo', 'apiserver', 'bench']));
    expect(commandsOf(p.stdout)).toContain('run');
    expect(commandsOf(p.stdout).filter((c) => harnessCommands.includes(c))).toEqual([]);
  });

  it('src/cli.ts --version prints the release from package.json (semantic version, CHANGELOG.md)', async () => {
    const { version } = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    const r = await cli('src/cli.ts', ['--version']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(version);
    expect(readFileSync(path.join(REPO_ROOT, 'CHANGELOG.md'), 'utf8')).toContain(`## ${version}`);
  });

  it('src/cli.ts refuses the hidden harness command baseline-replica as an unknown command (exit 2)', async () => {
    const r = await cli('src/cli.ts', ['baseline-replica']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command');
  });
});

describe('the image build takes only what ships', () => {
  const dockerfile = DockerfileParser.parse(readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8'));
  it('every COPY from the build context names a manifest, src, workers, the dependency patches or the bundle scripts', () => {
    const allowed = new Set([
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      // Applied to node_modules before the native addon is compiled (scripts/setup.sh does the same).
      'patches',
      // The bundler and SBOM scripts, run in the build stage; only their output ships.
      'scripts/image',
      ...SHIPPED,
    ]);
    const sources = dockerfile
      .getInstructions()
      .filter((i) => i.getKeyword() === 'COPY' && !/--from=/.test(i.getTextContent()))
      .flatMap((i) => {
        const args = (i.getArguments() ?? []).map((a) => a.getValue()).filter((a) => !a.startsWith('--'));
        return args.slice(0, -1).map((a) => a.replace(/^\.\//, '').replace(/\/$/, ''));
      });
    expect(sources.length).toBeGreaterThan(0);
    expect(sources.filter((s) => !allowed.has(s))).toEqual([]);
  });
  it('.dockerignore keeps the harness, the benchmarks and the tests out of the build context', () => {
    const ignored = readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n');
    expect(ignored).toEqual(expect.arrayContaining(['harness', 'bench', 'test']));
  });
  it('tsconfig.build.json compiles src and workers only', () => {
    const build = JSON.parse(readFileSync(path.join(REPO_ROOT, 'tsconfig.build.json'), 'utf8')) as {
      include: string[];
    };
    expect(build.include.sort()).toEqual([...SHIPPED].sort());
  });
});
