/**
 * One `KubeConfig` per context. client-node's `makeApiClient` reads auth from the *current* context on
 * every request, so a shared KubeConfig whose current context changes would send one cluster's token to
 * another: each target gets a KubeConfig of its own, pinned to its context.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

/** The name we give the in-cluster (service account) context. */
export const IN_CLUSTER_CONTEXT = 'in-cluster';

/** A context is not in the kubeconfig, or no kubeconfig can be found. Configuration error (exit 2). */
export class KubeconfigError extends Error {
  override name = 'KubeconfigError';
}

/** Where the kubeconfig comes from: an explicit path, `~/.kube/config`, or the in-cluster service account. */
export function kubeconfigPath(explicit: string | undefined): string | undefined {
  if (explicit) return explicit;
  const home = join(homedir(), '.kube', 'config');
  return existsSync(home) ? home : undefined;
}

/**
 * Loads a KubeConfig for `context` (undefined = the file's current context, or in-cluster when there is
 * no file). `path` may list several files separated by `:` as $KUBECONFIG does: they are merged, the
 * first file's current context winning, as kubectl does.
 * @returns the KubeConfig and the context's resolved name.
 * @throws KubeconfigError when the file is unreadable or has no such context (the message lists the known ones).
 */
export function loadKubeConfig(
  path: string | undefined,
  context: string | undefined,
): { kc: KubeConfig; context: string } {
  const kc = new KubeConfig();
  const files = (path ?? '').split(':').filter(Boolean);
  const file = files.join(':');
  if (files.length === 0) {
    if (context && context !== IN_CLUSTER_CONTEXT) {
      throw new KubeconfigError(`context "${context}": no kubeconfig found (set --kubeconfig or KUBECONFIG)`);
    }
    try {
      kc.loadFromCluster();
    } catch (err) {
      throw new KubeconfigError(
        `no kubeconfig and not in a cluster: ${(err as Error).message}; set --kubeconfig`,
      );
    }
    return { kc, context: IN_CLUSTER_CONTEXT };
  }
  for (const [i, f] of files.entries()) {
    try {
      if (i === 0) kc.loadFromFile(f);
      else {
        const more = new KubeConfig();
        more.loadFromFile(f);
        kc.mergeConfig(more, true);
      }
    } catch (err) {
      throw new KubeconfigError(`--kubeconfig ${f}: cannot load (${(err as Error).message.split('\n')[0]})`);
    }
  }
  const name = context ?? kc.getCurrentContext();
  if (!name || !kc.getContextObject(name)) {
    const known = kc.getContexts().map((c) => c.name);
    throw new KubeconfigError(
      `--targets: context "${name}" is not in ${file}; expected one of: ${known.join(', ') || '(none)'}`,
    );
  }
  kc.setCurrentContext(name);
  return { kc, context: name };
}
