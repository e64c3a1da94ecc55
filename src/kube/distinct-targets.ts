/**
 * Two configured targets must not be one: `spark` (in the kubeconfig's current context) and `prod:spark` are
 * the same namespace when the current context is `prod`; so are `a:spark` and `b:spark` when contexts `a` and `b`
 * reach one cluster (the same CA, or the same `clusterNames` name). Each would get its own informer, cleaner and
 * election on the same election key, so one replica would campaign twice for one target. Checked once every
 * target's context and cluster are resolved, before anything connects: a configuration error (exit 2).
 */
import { envName, flagName } from '../config/fields.ts';
import type { TargetSpec } from '../config/schema.ts';
import { type ClusterIdentity, describeIdentity } from './cluster-identity.ts';
import { KubeconfigError } from './kubeconfig.ts';

/** Two configured targets resolve to the same (cluster, namespace). */
export class DuplicateTargetError extends KubeconfigError {
  override name = 'DuplicateTargetError';
}

/** A target as configured (`namespace` or `context:namespace`). */
const asConfigured = (t: TargetSpec) =>
  t.context === undefined ? t.namespace : `${t.context}:${t.namespace}`;

/**
 * Refuses two targets that resolve to one (cluster, namespace).
 * @param targets the targets as configured
 * @param resolved the resolved context and cluster of each target, in the same order (without a cluster: the
 *   targets are compared by context name only)
 * @throws DuplicateTargetError naming both targets as configured and the one they resolve to
 */
export function assertDistinctTargets(
  targets: readonly TargetSpec[],
  resolved: readonly { readonly context: string; readonly cluster?: ClusterIdentity }[],
): void {
  const seen = new Map<string, { spec: TargetSpec; context: string }>();
  targets.forEach((t, i) => {
    const r = resolved[i];
    const context = r?.context ?? '';
    const cluster = r?.cluster;
    const key = `${cluster?.name ?? context}/${t.namespace}`;
    const first = seen.get(key);
    if (!first) {
      seen.set(key, { spec: t, context });
      return;
    }
    const implicit = [first.spec, t].some((x) => x.context === undefined)
      ? ` (a target without a context is in the kubeconfig's current context, ${context})`
      : '';
    const how =
      first.context === context
        ? `${context}:${t.namespace}${implicit}`
        : `namespace ${t.namespace} of cluster ${cluster ? describeIdentity(cluster) : '?'}, reached through contexts ${first.context} and ${context}`;
    throw new DuplicateTargetError(
      `targets (${flagName('targets')}, ${envName('targets')}): "${asConfigured(first.spec)}" and "${asConfigured(t)}" ` +
        `are the same target, ${how}: each would run its own cleaner and election for it; list it once`,
    );
  });
}
