/**
 * The three PATCH flavours kube-apiserver accepts for pods, applied to plain JSON:
 * - `application/merge-patch+json`: RFC 7386 JSON merge patch;
 * - `application/json-patch+json`: RFC 6902 JSON patch (client-node's default content type for
 *   patch calls, because it is the first of the generated media types);
 * - `application/strategic-merge-patch+json`: merge patch plus the pod fields' patch strategies we
 *   meet (containers by `name`, conditions by `type`, ownerReferences by `uid`, finalizers as a merged
 *   primitive list, with `$patch` and `$deleteFromPrimitiveList/…` directives), as in
 *   k8s.io/apimachinery/pkg/util/strategicpatch.
 * Server-side apply (`application/apply-patch+yaml`) is not supported: 415.
 */
import { badRequest } from './status.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 merge of `patch` into `target`; returns a new value, inputs untouched. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v) as Json;
  }
  return out;
}

/** Merge keys of the pod lists whose patch strategy is "merge" (from the core/v1 struct tags). */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  conditions: 'type',
  ownerReferences: 'uid',
  env: 'name',
  volumes: 'name',
  tolerations: 'key',
};
const PRIMITIVE_MERGE_LISTS = new Set(['finalizers']);

/** Strategic merge of `patch` into `target` for the pod fields listed above; otherwise merge patch. */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _, ...rest } = patch;
    return structuredClone(rest);
  }
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch' || k.startsWith('$setElementOrder/') || k.startsWith('$retainKeys')) continue;
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      const field = k.slice('$deleteFromPrimitiveList/'.length);
      const cur = out[field];
      if (Array.isArray(cur) && Array.isArray(v)) out[field] = cur.filter((x) => !v.includes(x));
      continue;
    }
    if (v === null) {
      delete out[k];
      continue;
    }
    const mergeKey = MERGE_KEYS[k];
    const cur = out[k];
    if (mergeKey && Array.isArray(v)) {
      out[k] = mergeList(Array.isArray(cur) ? cur : [], v, mergeKey);
    } else if (PRIMITIVE_MERGE_LISTS.has(k) && Array.isArray(v)) {
      const merged = Array.isArray(cur) ? [...cur] : [];
      for (const x of v) if (!merged.includes(x)) merged.push(x);
      out[k] = merged;
    } else {
      out[k] = strategicMergePatch(cur, v) as Json;
    }
  }
  return out;
}

function mergeList(cur: Json[], patch: Json[], key: string): Json[] {
  const out = [...cur];
  for (const item of patch) {
    if (!isObject(item)) continue;
    const idx = out.findIndex((c) => isObject(c) && c[key] === item[key]);
    if (item.$patch === 'delete') {
      if (idx >= 0) out.splice(idx, 1);
    } else if (idx >= 0) {
      out[idx] = strategicMergePatch(out[idx], item) as Json;
    } else {
      out.push(strategicMergePatch({}, item) as Json);
    }
  }
  return out;
}

function decodePointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw badRequest(`invalid JSON pointer "${path}"`);
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(doc: Json, tokens: string[], path: string): { parent: JsonObject | Json[]; last: string } {
  let node: Json = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(node)) node = node[Number(t)] as Json;
    else if (isObject(node)) node = node[t] as Json;
    else node = undefined as unknown as Json;
    if (node === undefined || node === null) {
      throw badRequest(
        `the server rejected our request due to an error in our request: path ${path} not found`,
      );
    }
  }
  if (!Array.isArray(node) && !isObject(node)) throw badRequest(`path ${path} not found`);
  return { parent: node, last: tokens[tokens.length - 1] ?? '' };
}

function getAt(doc: Json, path: string): Json {
  let node: Json = doc;
  for (const t of decodePointer(path)) {
    if (Array.isArray(node)) node = node[Number(t)] as Json;
    else if (isObject(node)) node = node[t] as Json;
    else throw badRequest(`path ${path} not found`);
    if (node === undefined) throw badRequest(`path ${path} not found`);
  }
  return node;
}

function removeAt(doc: Json, path: string): Json {
  const { parent, last } = parentOf(doc, decodePointer(path), path);
  if (Array.isArray(parent)) {
    const i = Number(last);
    if (!(i >= 0 && i < parent.length)) throw badRequest(`path ${path} not found`);
    return parent.splice(i, 1)[0] as Json;
  }
  if (!Object.hasOwn(parent, last)) throw badRequest(`path ${path} not found`);
  const v = parent[last] as Json;
  delete parent[last];
  return v;
}

function addAt(doc: Json, path: string, value: Json, replace: boolean): Json {
  const tokens = decodePointer(path);
  if (tokens.length === 0) return value;
  const { parent, last } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) {
    const i = last === '-' ? parent.length : Number(last);
    if (!(i >= 0 && i <= parent.length)) throw badRequest(`path ${path} out of range`);
    if (replace) parent[i] = value;
    else parent.splice(i, 0, value);
  } else {
    if (replace && !Object.hasOwn(parent, last)) throw badRequest(`path ${path} not found`);
    parent[last] = value;
  }
  return doc;
}

/**
 * RFC 6902 JSON patch: add, remove, replace, move, copy, test.
 * @throws KubeStatusError 400 for a malformed operation, a missing path, or a failed `test`.
 */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw badRequest('json patch must be an array of operations');
  let doc = structuredClone(target) as Json;
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string') {
      throw badRequest('invalid json patch operation');
    }
    const path = op.path;
    switch (op.op) {
      case 'add':
        doc = addAt(doc, path, structuredClone(op.value ?? null), false);
        break;
      case 'replace':
        doc = addAt(doc, path, structuredClone(op.value ?? null), true);
        break;
      case 'remove':
        removeAt(doc, path);
        break;
      case 'move': {
        const v = removeAt(doc, String(op.from));
        doc = addAt(doc, path, v, false);
        break;
      }
      case 'copy':
        doc = addAt(doc, path, structuredClone(getAt(doc, String(op.from))), false);
        break;
      case 'test':
        if (JSON.stringify(getAt(doc, path)) !== JSON.stringify(op.value)) {
          throw badRequest(
            `the server rejected our request due to an error in our request: testing value ${path} failed`,
          );
        }
        break;
      default:
        throw badRequest(`Unexpected kind: ${op.op}`);
    }
  }
  return doc;
}
