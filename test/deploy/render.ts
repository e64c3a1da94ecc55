/**
 * Renders the kustomizations under infra/k8s with `kubectl kustomize` (no cluster needed) and
 * decodes the output. kubectl >= 1.21 (kustomize >= v4) is needed: scripts/check-deploy.sh checks
 * the version; `KUBECTL` names another binary.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from './validate-object.ts';

/** The repository root (two levels above this file). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A kustomization file that is a component (rendered only inside a kustomization that lists it). */
const isComponent = (text: string) => /^kind: Component$/m.test(text);
/** A kustomization with a remote base or component (`- https://…`): rendering it needs that host. */
export const hasRemote = (text: string) => /^\s*-\s*https?:\/\//m.test(text);

/**
 * Every kustomization the repository ships under infra/k8s that renders on its own, relative to the repository
 * root and sorted: found, not listed (scripts/check-deploy.sh finds them the same way), without the components and
 * the GitOps overlay, whose remote base test/deploy/gitops.test.ts renders from a local clone.
 */
export const KUSTOMIZATIONS: readonly string[] = readdirSync(path.join(REPO_ROOT, 'infra/k8s'), {
  recursive: true,
  withFileTypes: true,
})
  .filter((e) => e.isFile() && e.name === 'kustomization.yaml')
  .filter((e) => {
    const text = readFileSync(path.join(e.parentPath, e.name), 'utf8');
    return !isComponent(text) && !hasRemote(text);
  })
  .map((e) => path.relative(REPO_ROOT, e.parentPath).split(path.sep).join('/'))
  .sort();

/** The components under infra/k8s (kind: Component), relative to the repository root and sorted. */
export const COMPONENTS: readonly string[] = readdirSync(path.join(REPO_ROOT, 'infra/k8s'), {
  recursive: true,
  withFileTypes: true,
})
  .filter((e) => e.isFile() && e.name === 'kustomization.yaml')
  .filter((e) => isComponent(readFileSync(path.join(e.parentPath, e.name), 'utf8')))
  .map((e) => path.relative(REPO_ROOT, e.parentPath).split(path.sep).join('/'))
  .sort();

/** Thrown when kubectl is missing, kustomize fails, or its output is not YAML. */
export class RenderError extends Error {
  override name = 'RenderError';
}

/** What `kubectl kustomize` printed for one kustomization. */
export interface Rendered {
  /** The rendered objects, in output order. */
  objects: KubeObject[];
  /** kustomize's stderr on success: its warnings (deprecated fields such as `bases`), '' when none. */
  warnings: string;
}

/**
 * Runs `kubectl kustomize <dir>` and returns the rendered objects and kustomize's warnings.
 *
 * @param dir kustomization directory, relative to the repository root or absolute.
 * @throws {RenderError} when kubectl is missing or fails (its stderr is in the message), or when a
 *   document does not parse.
 */
export function kustomize(dir: string): Rendered {
  const kubectl = process.env.KUBECTL ?? 'kubectl';
  const r = spawnSync(kubectl, ['kustomize', path.resolve(REPO_ROOT, dir)], {
    encoding: 'utf8',
    timeout: 30_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if ((r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
    throw new RenderError(
      `${kubectl} not found: install kubectl >= 1.21 or set KUBECTL (docs/deployment.md)`,
    );
  }
  if (r.error !== undefined || r.status !== 0)
    throw new RenderError(`${kubectl} kustomize ${dir} failed: ${r.stderr || r.error?.message}`);
  return { objects: parseYamlObjects(r.stdout, dir), warnings: r.stderr.trim() };
}

/**
 * Runs `kubectl kustomize <dir>` and returns the rendered objects in output order ({@link kustomize}
 * without the warnings).
 *
 * @throws {RenderError} as {@link kustomize}.
 */
export function renderKustomization(dir: string): KubeObject[] {
  return kustomize(dir).objects;
}

/**
 * Decodes a multi-document YAML stream into objects, skipping empty documents. `<<` merge keys are
 * resolved, as Docker Compose does for its `x-` anchors.
 *
 * @param source label for error messages (a path).
 * @throws {RenderError} on a YAML syntax error.
 */
export function parseYamlObjects<T = KubeObject>(text: string, source: string): T[] {
  const objects: T[] = [];
  for (const doc of parseAllDocuments(text, { merge: true })) {
    if (doc.errors.length > 0)
      throw new RenderError(`${source}: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS() as T | null;
    if (value !== null) objects.push(value);
  }
  return objects;
}

/** Reads and decodes a YAML file of the repository (`infra/compose.yaml`). */
export function readYamlFile<T>(relativePath: string): T {
  const [value] = parseYamlObjects<T>(
    readFileSync(path.resolve(REPO_ROOT, relativePath), 'utf8'),
    relativePath,
  );
  if (value === undefined) throw new RenderError(`${relativePath} is empty`);
  return value;
}
