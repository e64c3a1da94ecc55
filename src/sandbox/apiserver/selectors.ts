/**
 * Label and field selectors as kube-apiserver parses them (k8s.io/apimachinery/pkg/labels and
 * pkg/fields): labels support `=`, `==`, `!=`, `in (…)`, `notin (…)`, `key` (exists) and `!key`;
 * fields support `=`, `==`, `!=` on the pod fields the API indexes that we use
 * (`metadata.name`, `metadata.namespace`, `status.phase`, `spec.nodeName`).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { badRequest } from './status.ts';

/** A compiled selector: true when the pod matches. */
export type PodPredicate = (pod: V1Pod) => boolean;

type Requirement = {
  key: string;
  op: 'eq' | 'neq' | 'in' | 'notin' | 'exists' | 'notexists';
  values: string[];
};

const LABEL_KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

function parseRequirement(raw: string, whole: string): Requirement {
  const term = raw.trim();
  const setMatch = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  let req: Requirement;
  if (setMatch) {
    const values = (setMatch[3] ?? '')
      .split(',')
      .map((v) => v.trim())
      .filter((v) => v !== '');
    req = { key: setMatch[1] ?? '', op: setMatch[2] === 'in' ? 'in' : 'notin', values };
  } else {
    const eq = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (eq) {
      req = { key: eq[1] ?? '', op: eq[2] === '!=' ? 'neq' : 'eq', values: [eq[3] ?? ''] };
    } else if (term.startsWith('!')) {
      req = { key: term.slice(1).trim(), op: 'notexists', values: [] };
    } else {
      req = { key: term, op: 'exists', values: [] };
    }
  }
  if (!LABEL_KEY.test(req.key)) {
    throw badRequest(`unable to parse requirement: invalid label key "${req.key}" in selector "${whole}"`);
  }
  return req;
}

/**
 * Compiles a `labelSelector` query value. Empty or undefined selects everything.
 * @throws KubeStatusError 400 BadRequest when the selector cannot be parsed.
 */
export function parseLabelSelector(selector: string | undefined): PodPredicate {
  if (selector === undefined || selector.trim() === '') return () => true;
  const reqs = splitTopLevel(selector).map((t) => parseRequirement(t, selector));
  return (pod) => {
    const labels = pod.metadata?.labels ?? {};
    for (const r of reqs) {
      const has = Object.hasOwn(labels, r.key);
      const v = labels[r.key];
      switch (r.op) {
        case 'eq':
          if (v !== r.values[0]) return false;
          break;
        case 'neq':
          // As in k8s labels: `!=` also matches objects without the key.
          if (has && v === r.values[0]) return false;
          break;
        case 'in':
          if (!has || !r.values.includes(v as string)) return false;
          break;
        case 'notin':
          if (has && r.values.includes(v as string)) return false;
          break;
        case 'exists':
          if (!has) return false;
          break;
        case 'notexists':
          if (has) return false;
          break;
      }
    }
    return true;
  };
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
