/**
 * The Dockerfile, checked without a Docker engine: linted with dockerfile-utils (the linter of the
 * Docker language server), then parsed with dockerfile-ast to assert what a reviewer would: a Node 24
 * base matching package.json, production dependencies only in the final stage, a numeric non-root
 * user, and the CLI's `run` as the entrypoint. test/deploy/image.test.ts builds and runs it.
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

  it('takes its base from the build argument BASE_IMAGE, whose default is the public Node image', () => {
    expect(globalArgs(dockerfileText).get('BASE_IMAGE')).toBe('node:24-bookworm-slim');
    const froms = DockerfileParser.parse(dockerfileText)
      .getInstructions()
      .filter((i) => i.getKeyword() === 'FROM')
      .map((i) => i.getArgumentsContent()?.split(' ')[0]);
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const image of froms) expect(image).toMatch(/^\$\{BASE_IMAGE\}$/);
  });

  it('is multi-stage, every stage on the Node major that package.json requires', () => {
    const engineMajor = /(\d+)/.exec(packageJson.engines.node)?.[1];
    const devNodeMajor = packageJson.devDependencies.node?.split('.')[0];
    expect(engineMajor).toBe('24');
    expect(devNodeMajor).toBe(engineMajor);
    expect(all.length).toBeGreaterThanOrEqual(2);
    for (const stage of all)
      expect(stage.image).toMatch(new RegExp(`^node:${engineMajor}(\\.\\d+)*-[a-z0-9.-]+$`));
  });

  it('builds with `npm ci && npm run build` from src/ and workers/', () => {
    const build = all.find((s) =>
      s.instructions.some((i) => i.getKeyword() === 'RUN' && args(i).endsWith('npm run build')),
    );
    expect(build, 'a stage runs `npm run build`').toBeDefined();
    const copied = build?.instructions.filter((i) => i.getKeyword() === 'COPY').map(args) ?? [];
    expect(copied).toEqual(expect.arrayContaining(['src ./src', 'workers ./workers']));
  });

  it('ships production dependencies only: the final stage installs nothing and copies node_modules from an --omit=dev stage', () => {
    // Its one RUN removes the base's package managers; nothing is installed.
    const runs = final.instructions.filter((i) => i.getKeyword() === 'RUN').map(args);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatch(/^rm -rf /);
    expect(runs[0]).toContain('/usr/local/bin/npm');
    const copies = final.instructions.filter((i) => i.getKeyword() === 'COPY').map(args);
    const modulesCopy = copies.find((c) => c.includes('node_modules'));
    const fromStage = /--from=(\S+)/.exec(modulesCopy ?? '')?.[1];
    const depsStage = all.find((s) => s.name === fromStage);
    const installs = depsStage?.instructions.filter(
      (i) => i.getKeyword() === 'RUN' && /\bnpm ci\b/.test(args(i)),
    );
    expect(installs?.length).toBe(1);
    expect(args(installs?.[0] as Instruction)).toMatch(/--omit=dev\b/);
    // The compiled output and package.json ("type": "module") come along; no TypeScript sources.
    expect(copies.some((c) => /--from=\S+ \/app\/dist \.\/dist/.test(c))).toBe(true);
    expect(copies).toContain('package.json ./');
    expect(copies.some((c) => /\bsrc\b/.test(c))).toBe(false);
    // Sanity of the premise: the tools that must not ship are dev dependencies.
    for (const dev of ['typescript', 'vitest', 'vite', '@biomejs/biome', 'node']) {
      expect(packageJson.dependencies[dev], dev).toBeUndefined();
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
