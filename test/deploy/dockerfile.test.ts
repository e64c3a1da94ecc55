/**
 * The Dockerfile, checked without a Docker engine: linted with dockerfile-utils (the linter of the
 * Docker language server), then parsed with dockerfile-ast to assert what a reviewer would: bases pinned by
 * digest, the application bundled in the build stage, a final stage that installs and runs nothing but copies
 * /app, a numeric non-root user, and the CLI's `run` as the entrypoint. test/deploy/image.test.ts builds and runs it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Instruction, JSONInstruction } from 'dockerfile-ast';
import { DockerfileParser } from 'dockerfile-ast';
import type { ValidatorSettings } from 'dockerfile-utils';
import { ValidationSeverity, validate } from 'dockerfile-utils';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './render.ts';

const dockerfileText = readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8');
const packageJson = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
  dependencies: Record<string, string>;
};

/** Every optional rule of the linter raised to an error: a warning fails the test too. */
const STRICT: ValidatorSettings = {
  deprecatedMaintainer: ValidationSeverity.ERROR,
  directiveCasing: ValidationSeverity.ERROR,
  emptyContinuationLine: ValidationSeverity.ERROR,
  instructionCasing: ValidationSeverity.ERROR,
  instructionCmdMultiple: ValidationSeverity.ERROR,
  instructionEntrypointMultiple: ValidationSeverity.ERROR,
  instructionHealthcheckMultiple: ValidationSeverity.ERROR,
  instructionJSONInSingleQuotes: ValidationSeverity.ERROR,
  instructionWorkdirRelative: ValidationSeverity.ERROR,
};

interface Stage {
  name: string | null;
  image: string;
  instructions: Instruction[];
}

/** The defaults of the build arguments declared before the first FROM (`ARG NAME=value`). */
function globalArgs(text: string): Map<string, string> {
  const head = text.split(/^FROM /m)[0] ?? '';
  return new Map([...head.matchAll(/^ARG (\w+)=(\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
}

/** Splits the Dockerfile into build stages, each starting at its FROM (build arguments at their defaults). */
function stages(text: string): Stage[] {
  const result: Stage[] = [];
  const defaults = globalArgs(text);
  const resolve = (image: string) =>
    image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string, b: string) => defaults.get(a ?? b) ?? '');
  for (const instruction of DockerfileParser.parse(text).getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const from = instruction as unknown as { getImage(): string | null; getBuildStage(): string | null };
      result.push({ name: from.getBuildStage(), image: resolve(from.getImage() ?? ''), instructions: [] });
    } else {
      result.at(-1)?.instructions.push(instruction);
    }
  }
  return result;
}

/** An instruction's flags and arguments as written: `--from=build /app/dist ./dist`. */
function args(instruction: Instruction): string {
  const withFlags = instruction as Instruction & { getFlags?(): { toString(): string }[] };
  const flags = withFlags.getFlags?.().map((f) => f.toString()) ?? [];
  return [...flags, instruction.getArgumentsContent() ?? ''].join(' ');
}

const all = stages(dockerfileText);
const final = all.at(-1) as Stage;

describe('Dockerfile', () => {
  it('passes the dockerfile-utils linter with every rule as an error', () => {
    const problems = validate(dockerfileText, STRICT).map(
      (d) => `line ${d.range.start.line + 1}: ${d.message}`,
    );
    expect(problems).toEqual([]);
  });

  it('the linter does report a broken Dockerfile (so the check above can fail)', () => {
    const broken = 'FROM node:24-bookworm-slim\nUSER\nEXPOSE http\nENTRYPOINT ["node" "x"]\n';
    expect(validate(broken, STRICT).length).toBeGreaterThanOrEqual(2);
  });

  it('takes its two bases from the build arguments BUILD_BASE and RUNTIME_BASE, each pinned by digest', () => {
    const args = globalArgs(dockerfileText);
    expect(args.get('BUILD_BASE')).toMatch(
      /^localhost\/spark-driver-cleaner-build-base@sha256:[0-9a-f]{64}$/,
    );
    expect(args.get('RUNTIME_BASE')).toMatch(
      /^localhost\/spark-driver-cleaner-runtime-base@sha256:[0-9a-f]{64}$/,
    );
    const froms = DockerfileParser.parse(dockerfileText)
      .getInstructions()
      .filter((i) => i.getKeyword() === 'FROM')
      .map((i) => i.getArgumentsContent()?.split(' ')[0]);
    const stageNames = all.map((st) => st.name);
    // Every stage starts from a pinned base or from an earlier stage: nothing is pulled by tag.
    const pinned = ['BUILD_BASE', 'RUNTIME_BASE'].map((arg) => `\${${arg}}`);
    for (const image of froms) expect([...pinned, ...stageNames].includes(image ?? ''), image).toBe(true);
    // scripts/build-base-image.sh makes both at package.json's Node version and checks them against these pins.
    const script = readFileSync(path.join(REPO_ROOT, 'scripts/build-base-image.sh'), 'utf8');
    expect(script).toContain('require("./package.json").devDependencies.node');
    expect(script).toContain('s|^ARG RUNTIME_BASE=.*|');
  });

  it('is multi-stage, the final stage on the runtime base', () => {
    expect(all.length).toBeGreaterThanOrEqual(3);
    const runtimeBase = all.find((st) => st.image === globalArgs(dockerfileText).get('RUNTIME_BASE'));
    expect(runtimeBase?.name).toBeDefined();
    expect(final.image).toBe(runtimeBase?.name);
  });

  it('bundles in the build stage: `npm ci`, the ZooKeeper addon compiled with our patch, then scripts/image/bundle.ts over src/ and workers/', () => {
    const build = all.find((st) =>
      st.instructions.some(
        (i) => i.getKeyword() === 'RUN' && args(i).includes('node scripts/image/bundle.ts'),
      ),
    );
    expect(build, 'a stage runs scripts/image/bundle.ts').toBeDefined();
    const runs = build?.instructions.filter((i) => i.getKeyword() === 'RUN').map(args) ?? [];
    const install = runs.find((r) => /\bnpm ci\b/.test(r)) ?? '';
    expect(install).toMatch(/--ignore-scripts\b/);
    expect(install).toContain('patches/zookeeper+*.patch');
    expect(install).toContain('npm rebuild zookeeper');
    expect(runs.some((r) => r.includes('node scripts/image/sbom.ts'))).toBe(true);
    const copied = build?.instructions.filter((i) => i.getKeyword() === 'COPY').map(args) ?? [];
    expect(copied).toEqual(
      expect.arrayContaining(['src ./src', 'workers ./workers', 'scripts/image ./scripts/image']),
    );
  });

  it('the final stage runs nothing and copies /app from the build stage alone: the bundle, node_modules, package.json, the SBOM', () => {
    expect(final.instructions.filter((i) => i.getKeyword() === 'RUN')).toEqual([]);
    const copies = final.instructions.filter((i) => i.getKeyword() === 'COPY').map(args);
    expect(copies).toEqual([
      '--from=build /out/app/node_modules ./node_modules',
      '--from=build /out/app/dist ./dist',
      '--from=build /out/app/package.json /out/app/sbom.cdx.json ./',
    ]);
    // Sanity of the premise: the tools that must not ship are dev dependencies.
    for (const dev of [
      'typescript',
      'vitest',
      'vite',
      '@biomejs/biome',
      'node',
      'esbuild',
      '@cyclonedx/cyclonedx-npm',
    ]) {
      expect(packageJson.dependencies[dev], dev).toBeUndefined();
      expect(packageJson.devDependencies[dev], dev).toBeDefined();
    }
  });

  it('runs as a numeric non-root user in the final stage', () => {
    const users = final.instructions.filter((i) => i.getKeyword() === 'USER').map(args);
    const user = users.at(-1);
    expect(user).toMatch(/^\d+(:\d+)?$/);
    const [uid, gid] = (user ?? '0').split(':').map(Number);
    expect(uid).toBeGreaterThan(0);
    if (gid !== undefined) expect(gid).toBeGreaterThan(0);
    // Nothing after USER switches back to root.
    const lastUserIndex = final.instructions.findLastIndex((i) => i.getKeyword() === 'USER');
    expect(final.instructions.slice(lastUserIndex + 1).some((i) => i.getKeyword() === 'RUN')).toBe(false);
  });

  it('has the CLI with `run` as its exec-form ENTRYPOINT and no CMD', () => {
    const entrypoints = final.instructions.filter((i) => i.getKeyword() === 'ENTRYPOINT');
    expect(entrypoints).toHaveLength(1);
    const argv = (entrypoints[0] as JSONInstruction).getJSONStrings().map((s) => s.getJSONValue());
    expect(argv[0]).toBe('node');
    expect(argv.slice(-2)).toEqual(['dist/src/cli.js', 'run']);
    expect(final.instructions.some((i) => i.getKeyword() === 'CMD')).toBe(false);
  });

  it('.dockerignore keeps local builds, modules and VCS data out of the build context', () => {
    const ignored = readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', '.git']));
    for (const needed of [
      'src',
      'workers',
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
    ]) {
      expect(ignored, needed).not.toContain(needed);
    }
  });
});
