/**
 * Whether a label selector narrows what the cleaner may delete. Every pod the selector matches is a
 * candidate for deletion once terminal, so a selector that matches pods *without* a given label — the
 * empty selector, or one made only of exclusions (`!k`, `k!=v`, `k notin (…)`) — would select every
 * finished pod of the namespace: Jobs, executors, anything. Such a selector is refused at start.
 *
 * A requirement narrows when a pod must carry the label to match it (k8s.io/apimachinery labels
 * semantics): `k` (exists), `k=v` / `k==v`, `k in (v1,…)`. `!k`, `k!=v` and `k notin (…)` also match
 * pods that lack the key, so they only ever exclude.
 */
import {
  InvalidSelectorError,
  type LabelSelector,
  parseLabelSelector,
  type Requirement,
} from './label-selector.ts';

/** The default selector (src/config/fields.ts), quoted as the example in messages. */
const EXAMPLE = 'spark-role=driver,kyuubi-unique-tag';

/** The operators whose requirement a pod can only satisfy by carrying the key. */
const NARROWING: ReadonlySet<Requirement['op']> = new Set(['exists', 'in']);

/**
 * The requirements of `selector` that a pod can only meet by carrying the label (`k`, `k=v`, `k in (…)`).
 * An empty result means the selector matches pods that have none of its labels: it does not narrow.
 */
export function narrowingRequirements(selector: LabelSelector): readonly Requirement[] {
  return selector.requirements.filter((r) => NARROWING.has(r.op));
}

/**
 * What is wrong with `text` as the cleaner's `labelSelector`, or `undefined` when it is usable: not a
 * valid Kubernetes selector, or one that does not narrow (see {@link narrowingRequirements}). The message
 * names the field, its flag and variable, and an example, since it may come from any source.
 */
export function labelSelectorProblem(text: string): string | undefined {
  let selector: LabelSelector;
  try {
    selector = parseLabelSelector(text);
  } catch (err) {
    if (err instanceof InvalidSelectorError)
      return `${err.message}; expected a label selector such as ${EXAMPLE}`;
    throw err;
  }
  if (narrowingRequirements(selector).length > 0) return undefined;
  const what =
    selector.requirements.length === 0
      ? 'empty: it selects every pod of the namespace'
      : `"${text.trim()}" only excludes (!key, key!=value, key notin (…) also match pods without the label): it selects nearly every pod of the namespace`;
  return (
    `${what}, and every finished one would be deleted (Jobs, executors, …); ` +
    'expected at least one label the pod must carry (key, key=value or key in (a,b)): ' +
    `set labelSelector (--label-selector, SDC_LABEL_SELECTOR) to e.g. ${EXAMPLE}`
  );
}
