/**
 * Two configured targets must not be one: `spark` (in the kubeconfig's current context) and `prod:spark` are
 * the same namespace when the current context is `prod`. Each would get its own informer, cleaner and etcd
 * election on the same election key, so one replica would campaign twice for one target. Checked once every
 * target's context is resolved, before anything connects: a configuration error (exit 2).
 */
import { envName, flagName } from '../config/fields.ts';
import type { TargetSpec } from '../config/schema.ts';
import { KubeconfigError } from './kubeconfig.ts';

/** Two configured targets resolve to the same (context, namespace). */
export class DuplicateTargetError extends KubeconfigError {
  override name = 'DuplicateTargetError';
}

/** A target as configured (`namespace` or `context:namespace`). */
const asConfigured = (t: TargetSpec) =>
  t.context === undefined ? t.namespace : `${t.context}:${t.namespace}`;

/**
 * Refuses two targets that resolve to one (context, namespace).
 * @param targets the targets as configured
 * @param contexts the resolved context of each target, in the same order
 * @throws DuplicateTargetError naming both targets as configured and the one they resolve to
 */
export function assertDistinctTargets(targets: readonly TargetSpec[], contexts: readonly string[]): void {
  const seen = new Map<string, TargetSpec>();
  targets.forEach((t, i) => {
    const context = contexts[i] ?? '';
    const key = `${context}:${t.namespace}`;
    const first = seen.get(key);
    if (!first) {
      seen.set(key, t);
      return;
    }
    const implicit = [first, t].some((x) => x.context === undefined)
      ? ` (a target without a context is in the kubeconfig's current context, ${context})`
      : '';
    throw new DuplicateTargetError(
      `targets (${flagName('targets')}, ${envName('targets')}): "${asConfigured(first)}" and "${asConfigured(t)}" ` +
        `are the same target, ${key}${implicit}: each would run its own cleaner and election for it; list it once`,
    );
  });
}
