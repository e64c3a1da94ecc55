/**
 * Label and field selectors as kube-apiserver parses them (k8s.io/apimachinery/pkg/labels and
 * pkg/fields): labels support `=`, `==`, `!=`, `in (…)`, `notin (…)`, `key` (exists) and `!key`;
 * fields support `=`, `==`, `!=` on the pod fields the API indexes that we use
 * (`metadata.name`, `metadata.namespace`, `status.phase`, `spec.nodeName`).
 */
import type { V1Pod } from '@kubernetes/client-node';
import {
  InvalidSelectorError,
  type LabelSelector,
  parseLabelSelector as parseKubeLabelSelector,
} from '../../../src/config/label-selector.ts';
import { badRequest } from './status.ts';

/** A compiled selector: true when the pod matches. */
export type PodPredicate = (pod: V1Pod) => boolean;

/**
 * Compiles a `labelSelector` query value with the product's own parser (one implementation of the
 * grammar). Empty or undefined selects everything.
 * @throws KubeStatusError 400 BadRequest when the selector cannot be parsed.
 */
export function parseLabelSelector(selector: string | undefined): PodPredicate {
  if (selector === undefined || selector.trim() === '') return () => true;
  let parsed: LabelSelector;
  try {
    parsed = parseKubeLabelSelector(selector);
  } catch (err) {
    if (err instanceof InvalidSelectorError) {
      throw badRequest(`unable to parse requirement: ${err.message} in selector "${selector}"`);
    }
    throw err;
  }
  return (pod) => parsed.matches(pod.metadata?.labels);
}

const FIELD_GETTERS: Record<string, (pod: V1Pod) => string> = {
  'metadata.name': (p) => p.metadata?.name ?? '',
  'metadata.namespace': (p) => p.metadata?.namespace ?? '',
  'status.phase': (p) => p.status?.phase ?? '',
  'spec.nodeName': (p) => p.spec?.nodeName ?? '',
  'spec.restartPolicy': (p) => p.spec?.restartPolicy ?? '',
  'spec.serviceAccountName': (p) => p.spec?.serviceAccountName ?? '',
  'status.podIP': (p) => p.status?.podIP ?? '',
};

/**
 * Compiles a `fieldSelector` query value. Empty or undefined selects everything.
 * @throws KubeStatusError 400 BadRequest for an unsupported field (the apiserver's own wording).
 */
export function parseFieldSelector(selector: string | undefined): PodPredicate {
  if (selector === undefined || selector.trim() === '') return () => true;
  const terms = selector.split(',').map((t) => {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(t);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${t}'`);
    const field = m[1] ?? '';
    const get = FIELD_GETTERS[field];
    if (!get) {
      throw badRequest(`field label not supported: ${field}`);
    }
    return { get, neq: m[2] === '!=', value: m[3] ?? '' };
  });
  return (pod) => {
    for (const t of terms) {
      const v = t.get(pod);
      if (t.neq ? v === t.value : v !== t.value) return false;
    }
    return true;
  };
}
