/**
 * Renders the kustomizations under infra/k8s with `kubectl kustomize` (no cluster needed) and
 * decodes the output. scripts/check-deploy.sh installs kubectl (Debian's kubernetes-client) when
 * the machine has none; `KUBECTL` names another binary.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from './validate-object.ts';

/** The repository root (two levels above this file). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Every kustomization the repository ships, relative to the repository root. */
export const KUSTOMIZATIONS = ['infra/k8s/base', 'infra/k8s/backends', 'infra/k8s/overlays/example'] as const;

/** Thrown when kubectl is missing, kustomize fails, or its output is not YAML. */
export class RenderError extends Error {
  override name = 'RenderError';
}

/**
 * Runs `kubectl kustomize <dir>` and returns the rendered objects in output order.
 *
 * @param dir kustomization directory, relative to the repository root or absolute.
 * @throws {RenderError} when kubectl is missing or fails (its stderr is in the message), or when a
 *   document does not parse.
 */
export function renderKustomization(dir: string): KubeObject[] {
  const kubectl = process.env.KUBECTL ?? 'kubectl';
  let out: string;
  try {
    out = execFileSync(kubectl, ['kustomize', path.resolve(REPO_ROOT, dir)], {
      encoding: 'utf8',
      // stderr carries kustomize's deprecation warnings for `bases`: kept out of stdout on purpose.
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 30_000,
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') {
      throw new RenderError(
        `${kubectl} not found: run scripts/check-deploy.sh, which installs kubernetes-client`,
      );
    }
    throw new RenderError(`${kubectl} kustomize ${dir} failed: ${e.stderr ?? e.message}`);
  }
  return parseYamlObjects(out, dir);
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
