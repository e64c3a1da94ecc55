/**
 * One version everywhere: package.json's `version` is the source, and the image tag in the README, the docs, the
 * Dockerfile and the manifests, kustomize's `newTag`, the remote base's `?ref=v…`, package-lock.json, `--version`,
 * the metric `sdc_build_info` and CHANGELOG.md's entry all say the same (scripts/release/versions.ts). The
 * CHANGELOG entry may read `(unreleased)` only while the tag `v<version>` does not exist.
 *
 * scripts/release.sh moves them together: run here on a scratch repository made from this working tree, it
 * refuses a dirty tree, a missing CHANGELOG entry and an existing tag, and otherwise commits and tags a release in
 * which everything agrees.
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  changelogEntry,
  KEEP_MARKER,
  packageVersion,
  versionProblems,
  versionReferences,
} from '../../scripts/release/versions.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VERSION = packageVersion(ROOT);

/** Whether `git tag v<version>` exists in `dir` (false outside a git checkout). */
function tagged(dir: string, version: string): boolean {
  try {
    return (
      execFileSync('git', ['tag', '--list', `v${version}`], { cwd: dir, encoding: 'utf8' }).trim() !== ''
    );
  } catch {
    return false;
  }
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
    );
  });
}

describe('one version everywhere', () => {
  it('every place agrees with package.json (and the CHANGELOG entry is dated once the tag exists)', () => {
    expect(versionProblems(ROOT, tagged(ROOT, VERSION))).toEqual([]);
  });

  it('the places are found: the image tag in the README, the docs, the Dockerfile and the Deployment, newTag, ?ref=', () => {
    const refs = versionReferences(ROOT);
    const files = (kind: string) => new Set(refs.filter((r) => r.kind === kind).map((r) => r.file));
    expect([...files('image tag')]).toEqual(
      expect.arrayContaining([
        'README.md',
        'docs/deployment.md',
        'Dockerfile',
        'infra/k8s/base/deployment.yaml',
      ]),
    );
    expect([...files('kustomize newTag')]).toContain('infra/k8s/overlays/example/kustomization.yaml');
    expect(files('git ref of the remote base').size).toBeGreaterThan(0);
  });

  it('a disagreement is reported with its file and line; a line marked version-pin: keep is not', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sdc-version-'));
    try {
      for (const f of [
        'package.json',
        'package-lock.json',
        'CHANGELOG.md',
        'README.md',
        'CONTRIBUTING.md',
        'Dockerfile',
      ])
        cpSync(path.join(ROOT, f), path.join(dir, f));
      for (const d of ['docs', 'infra']) cpSync(path.join(ROOT, d), path.join(dir, d), { recursive: true });
      expect(versionProblems(dir, false)).toEqual([]);
      writeFileSync(
        path.join(dir, 'docs', 'extra.md'),
        `image: spark-driver-cleaner:9.9.9\nrollback: spark-driver-cleaner:0.0.1   # ${KEEP_MARKER}\n`,
      );
      expect(versionProblems(dir, false)).toEqual([`docs/extra.md:1: image tag 9.9.9, not ${VERSION}`]);
      const changelog = path.join(dir, 'CHANGELOG.md');
      writeFileSync(
        changelog,
        readFileSync(changelog, 'utf8').replace(`## ${VERSION} (`, '## 0.0.0-removed ('),
      );
      expect(versionProblems(dir, false)).toContain(
        `CHANGELOG.md: no entry "## ${VERSION} (YYYY-MM-DD)" or "## ${VERSION} (unreleased)"`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('`--version` prints it', async () => {
    const r = await run(process.execPath, ['src/cli.ts', '--version'], ROOT);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(VERSION);
  });

  it('sdc_build_info carries it', async () => {
    const metrics = createMetrics({ processMetrics: false });
    const text = await metrics.registry.metrics();
    expect(text).toContain(`sdc_build_info{version="${VERSION}"} 1`);
  });
});

describe('scripts/release.sh, on a scratch repository made from this working tree', () => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'sdc-release-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    // The project's Node 24 (move-version.ts is TypeScript) before the system's.
    PATH: `${path.join(ROOT, 'node_modules', '.bin')}:${process.env.PATH}`,
    GIT_AUTHOR_NAME: 'release test',
    GIT_AUTHOR_EMAIL: 'release@example.com',
    GIT_COMMITTER_NAME: 'release test',
    GIT_COMMITTER_EMAIL: 'release@example.com',
  };
  const git = (...args: string[]) => run('git', args, scratch, env);
  const release = (...args: string[]) => run('bash', ['scripts/release.sh', ...args], scratch, env);
  const next = '0.99.0';

  it('copies what a release touches into a fresh repository (one commit)', async () => {
    for (const f of [
      'package.json',
      'package-lock.json',
      'CHANGELOG.md',
      'README.md',
      'CONTRIBUTING.md',
      'Dockerfile',
    ])
      cpSync(path.join(ROOT, f), path.join(scratch, f));
    for (const d of ['docs', 'infra', 'scripts/release'])
      cpSync(path.join(ROOT, d), path.join(scratch, d), { recursive: true });
    cpSync(path.join(ROOT, 'scripts/release.sh'), path.join(scratch, 'scripts/release.sh'));
    expect((await git('init', '--quiet')).code).toBe(0);
    expect((await git('add', '-A')).code).toBe(0);
    expect((await git('commit', '--quiet', '-m', 'base')).code).toBe(0);
  });

  it('refuses a version without a CHANGELOG entry, and changes nothing', async () => {
    const r = await release(next);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`CHANGELOG.md has no entry "## ${next} (unreleased)"`);
    expect((await git('status', '--porcelain')).stdout).toBe('');
  });

  it('refuses a dirty tree (the new entry written but not committed)', async () => {
    const changelog = path.join(scratch, 'CHANGELOG.md');
    writeFileSync(
      changelog,
      readFileSync(changelog, 'utf8').replace(
        /^## /m,
        `## ${next} (unreleased)\n\n### Added\n- Something.\n\n## `,
      ),
    );
    const r = await release(next);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('the working tree has changes');
    expect(packageVersion(scratch)).toBe(VERSION);
  });

  it('refuses what is not a semantic version', async () => {
    const r = await release('1.2');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('1.2 is not a semantic version');
  });

  it('moves every place to the new version, dates the entry, commits and tags', async () => {
    expect((await git('commit', '--quiet', '-am', `CHANGELOG: ${next}`)).code).toBe(0);
    const r = await release(next, '--date', '2031-02-03');
    expect(r.code, r.stderr).toBe(0);
    expect(packageVersion(scratch)).toBe(next);
    expect(changelogEntry(scratch, next)).toBe('2031-02-03');
    // The previous release's entry keeps its own heading.
    expect(changelogEntry(scratch, VERSION)).toBe(changelogEntry(ROOT, VERSION));
    expect(versionProblems(scratch, true)).toEqual([]);
    const refs = versionReferences(scratch);
    expect(refs.length).toBe(versionReferences(ROOT).length);
    expect(refs.every((ref) => ref.version === next)).toBe(true);
    expect((await git('status', '--porcelain')).stdout).toBe('');
    expect((await git('log', '-1', '--format=%s')).stdout.trim()).toBe(`Release ${next}`);
    expect((await git('tag', '--list', `v${next}`)).stdout.trim()).toBe(`v${next}`);
  });

  it('refuses to make the same release twice (the tag exists)', async () => {
    const r = await release(next);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`the tag v${next} exists already`);
  });
});
