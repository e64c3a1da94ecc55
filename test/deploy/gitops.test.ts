/**
 * The GitOps overlay (infra/k8s/overlays/gitops, docs/deployment.md "GitOps: Argo CD and Flux") as Argo CD's repository
 * server or Flux's kustomize-controller renders it: its base and components are this repository's at the tag
 * `v<version>`, fetched by kustomize itself. Here the repository is a local clone of this working tree, tagged
 * `v<version>` and then changed again (so that rendering the tag, not the branch, shows), and the overlay's github.com
 * URLs point at it (`file://`); everything else is the overlay as shipped.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageVersion } from '../../scripts/release/versions.ts';
import { type Container, findOne, type Workload } from './find-objects.ts';
import { parseYamlObjects, REPO_ROOT } from './render.ts';
import { type KubeObject, validateKubeObject } from './validate-object.ts';

const VERSION = packageVersion(REPO_ROOT);
const OVERLAY = 'infra/k8s/overlays/gitops';
const UPSTREAM = 'https://github.com/spark-driver-cleaner/spark-driver-cleaner';
const scratch = mkdtempSync(path.join(tmpdir(), 'sdc-gitops-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const git = (...args: string[]) =>
  execFileSync('git', args, {
    cwd: path.join(scratch, 'upstream'),
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 'gitops test',
      GIT_AUTHOR_EMAIL: 'gitops@example.com',
      GIT_COMMITTER_NAME: 'gitops test',
      GIT_COMMITTER_EMAIL: 'gitops@example.com',
    },
    stdio: 'pipe',
  });

/** This tree's infra/ as a repository tagged v<version>, then changed on its branch: the tag keeps 3 replicas. */
function upstream(): string {
  const dir = path.join(scratch, 'upstream');
  cpSync(path.join(REPO_ROOT, 'infra'), path.join(dir, 'infra'), { recursive: true });
  git('init', '--quiet');
  git('add', '-A');
  git('commit', '--quiet', '-m', 'release');
  git('tag', `v${VERSION}`);
  const deployment = path.join(dir, 'infra/k8s/base/deployment.yaml');
  writeFileSync(deployment, readFileSync(deployment, 'utf8').replace('replicas: 3', 'replicas: 7'));
  git('commit', '--quiet', '-am', 'after the release');
  return dir;
}

const kustomization = readFileSync(path.join(REPO_ROOT, OVERLAY, 'kustomization.yaml'), 'utf8');
const repo = upstream();
const overlay = path.join(scratch, 'your-repo');
cpSync(path.join(REPO_ROOT, OVERLAY), overlay, { recursive: true });
writeFileSync(
  path.join(overlay, 'kustomization.yaml'),
  kustomization.replaceAll(`${UPSTREAM}//`, `file://${repo}//`),
);
const rendered = spawnSync(process.env.KUBECTL ?? 'kubectl', ['kustomize', overlay], {
  encoding: 'utf8',
  timeout: 120_000,
});
const objects = rendered.status === 0 ? parseYamlObjects(rendered.stdout, OVERLAY) : [];

describe('the GitOps overlay, its base and components fetched at the release tag', () => {
  it('names this repository at v<version> for every remote, and the image at <version>', () => {
    const remotes = [...kustomization.matchAll(/^\s*-\s*(https:\/\/\S+)$/gm)].map((m) => m[1] ?? '');
    expect(remotes.length).toBe(3);
    for (const r of remotes) expect(r).toMatch(new RegExp(`^${UPSTREAM}//infra/k8s/\\S+\\?ref=v${VERSION}$`));
    expect(kustomization).toContain(`newTag: ${VERSION}`);
  });

  it('renders from the tag without a warning (not from the branch after it)', () => {
    expect(rendered.status, rendered.stderr).toBe(0);
    expect(rendered.stderr.trim()).toBe('');
    const deployment = findOne<Workload>(objects, 'Deployment', 'spark-driver-cleaner');
    expect(deployment.spec.replicas).toBe(3);
    expect((deployment.spec.template.spec.containers[0] as Container).image).toBe(
      `registry.example.com/spark-driver-cleaner:${VERSION}`,
    );
    expect(objects.filter((o) => o.kind === 'Role').map((r) => r.metadata.namespace)).toEqual([
      'spark-team-a',
      'spark-team-b',
    ]);
    expect(findOne(objects, 'StatefulSet', 'etcd')).toBeDefined();
    expect(findOne(objects, 'Deployment', 'redis')).toBeDefined();
  });

  it('has its Secret from the External Secrets Operator with both keys the Deployment requires, and no Secret in git', async () => {
    const external = findOne<
      KubeObject & {
        spec: { target: { name: string }; data: { secretKey: string }[]; secretStoreRef: { kind: string } };
      }
    >(objects, 'ExternalSecret', 'spark-driver-cleaner-secrets');
    expect(external.apiVersion).toBe('external-secrets.io/v1');
    expect(external.metadata.namespace).toBe('spark-driver-cleaner');
    expect(external.spec.target.name).toBe('spark-driver-cleaner-secrets');
    expect(external.spec.data.map((d) => d.secretKey).sort()).toEqual([
      'SDC_DASHBOARD_PASSWORD',
      'SDC_DASHBOARD_USER',
    ]);
    expect(objects.some((o) => o.kind === 'Secret')).toBe(false);
    expect(readdirSync(path.join(REPO_ROOT, OVERLAY)).some((f) => /\.env$/.test(f))).toBe(false);
    // Every built-in object is valid against the Kubernetes schemas (the ExternalSecret is a CRD: checked above).
    const builtIn = objects.filter((o) => o.kind !== 'ExternalSecret');
    expect((await Promise.all(builtIn.map(validateKubeObject))).flat()).toEqual([]);
  });
});
