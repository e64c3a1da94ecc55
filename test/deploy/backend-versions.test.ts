/**
 * What the docs promise about the deployment, checked against the files and the machine:
 * - the Redis and etcd versions the README calls tested are the ones the example backends run (the kustomize
 *   components and the compose file) and the ones the tests run here (Debian's redis-server and etcd);
 * - every `kubectl create secret` a document or a manifest comment shows names its namespace (a Secret created in
 *   the default namespace is one the pods never see).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './render.ts';

const read = (f: string) => readFileSync(path.join(REPO_ROOT, f), 'utf8');
const readme = read('README.md');

/** The `major.minor` the README calls tested for `name` (`**Redis** (7.0 tested)`). */
function tested(name: string): string {
  const v = new RegExp(`\\*\\*${name}\\*\\* \\((\\d+\\.\\d+) tested`).exec(readme)?.[1];
  if (!v) throw new Error(`README.md names no tested ${name} version`);
  return v;
}
/** The `major.minor` of every `image:` of `repository` in `file`. */
function imageMinors(file: string, repository: string): string[] {
  const re = new RegExp(`image: ${repository.replace(/[./]/g, '\\$&')}:v?(\\d+\\.\\d+)[.\\d]*\\S*`, 'g');
  return [...read(file).matchAll(re)].map((m) => m[1] ?? '');
}
/** `major.minor` of a binary's `--version` output. */
function binaryMinor(bin: string, pattern: RegExp): string {
  return pattern.exec(execFileSync(bin, ['--version'], { encoding: 'utf8' }))?.[1] ?? '';
}

describe('the versions the README calls tested', () => {
  it('Redis: the example backend and the compose file run it, and so do the tests', () => {
    const redis = tested('Redis');
    expect(redis).toBe('7.0');
    expect(imageMinors('infra/k8s/backends/redis/redis.yaml', 'redis')).toEqual([redis]);
    expect(imageMinors('infra/compose.yaml', 'redis')).toEqual([redis]);
    expect(binaryMinor('redis-server', /v=(\d+\.\d+)/)).toBe(redis);
  });

  it('etcd: the example backend and the compose file run it, and so do the tests', () => {
    const etcd = tested('etcd');
    expect(etcd).toBe('3.4');
    expect(imageMinors('infra/k8s/backends/etcd/etcd.yaml', 'quay.io/coreos/etcd')).toEqual([etcd]);
    expect(imageMinors('infra/compose.yaml', 'quay.io/coreos/etcd')).toEqual([etcd]);
    expect(binaryMinor('etcd', /etcd Version: (\d+\.\d+)/)).toBe(etcd);
  });
});

describe('kubectl create secret', () => {
  /** Every Markdown document and every manifest, with each line that creates a Secret. */
  const files = [
    'README.md',
    'CONTRIBUTING.md',
    ...readdirSync(path.join(REPO_ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
    ...readdirSync(path.join(REPO_ROOT, 'infra'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
      .map((e) => path.relative(REPO_ROOT, path.join(e.parentPath, e.name))),
  ];
  const creates = files.flatMap((f) =>
    read(f)
      .split('\n')
      .map((line, i) => ({ where: `${f}:${i + 1}`, line }))
      .filter(({ line }) => /kubectl .*create secret/.test(line)),
  );

  it('is shown in the README, the deployment guide and the manifests (the check below sees them)', () => {
    expect(creates.length).toBeGreaterThanOrEqual(5);
  });

  it('always names the namespace (-n or --namespace)', () => {
    expect(
      creates.filter(({ line }) => !/kubectl (-n \S+|--namespace[= ]\S+) .*create secret/.test(line)),
    ).toEqual([]);
  });
});
