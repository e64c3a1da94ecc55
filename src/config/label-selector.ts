/**
 * Kubernetes label selectors, parsed and matched as kube-apiserver does
 * (k8s.io/apimachinery/pkg/labels/selector.go): comma-separated requirements, all of which must hold.
 * Operators: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist).
 * `!=` and `notin` also match objects without the key, as upstream.
 */

/** One requirement of a selector. */
export interface Requirement {
  readonly key: string;
  readonly op: 'in' | 'notin' | 'exists' | '!';
  readonly values: readonly string[];
}

/** A parsed selector: `matches` tells whether a label set satisfies every requirement. */
export interface LabelSelector {
  readonly text: string;
  readonly requirements: readonly Requirement[];
  matches(labels: Readonly<Record<string, string>> | undefined): boolean;
}

/** The selector text is not a valid Kubernetes label selector; `message` says where. */
export class InvalidSelectorError extends Error {
  override name = 'InvalidSelectorError';
}

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Splits on commas that are not inside parentheses. */
function splitTop(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  return parts;
}

function checkKey(key: string, part: string): string {
  if (!KEY.test(key)) throw new InvalidSelectorError(`invalid label key "${key}" in "${part}"`);
  return key;
}

function checkValue(value: string, part: string): string {
  if (!VALUE.test(value) || value.length > 63)
    throw new InvalidSelectorError(`invalid label value "${value}" in "${part}"`);
  return value;
}

function parseRequirement(raw: string): Requirement {
  const part = raw.trim();
  if (!part) throw new InvalidSelectorError('empty requirement (stray comma?)');
  const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part);
  if (set) {
    const values = (set[3] ?? '').split(',').map((v) => checkValue(v.trim(), part));
    return { key: checkKey(set[1] ?? '', part), op: set[2] === 'in' ? 'in' : 'notin', values };
  }
  const cmp = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
  if (cmp) {
    const key = checkKey(cmp[1] ?? '', part);
    const value = checkValue(cmp[3] ?? '', part);
    return { key, op: cmp[2] === '!=' ? 'notin' : 'in', values: [value] };
  }
  if (part.startsWith('!')) return { key: checkKey(part.slice(1).trim(), part), op: '!', values: [] };
  return { key: checkKey(part, part), op: 'exists', values: [] };
}

/**
 * Parses a label selector. An empty string selects everything.
 * @throws InvalidSelectorError naming the bad requirement.
 */
export function parseLabelSelector(text: string): LabelSelector {
  const requirements = text.trim() === '' ? [] : splitTop(text).map(parseRequirement);
  return {
    text,
    requirements,
    matches(labels) {
      const l = labels ?? {};
      return requirements.every((r) => {
        const has = Object.hasOwn(l, r.key);
        switch (r.op) {
          case 'exists':
            return has;
          case '!':
            return !has;
          case 'in':
            return has && r.values.includes(l[r.key] ?? '');
          default:
            return !has || !r.values.includes(l[r.key] ?? ''); // notin
        }
      });
    },
  };
}
