/**
 * The core/v1 pods endpoints: list and watch (per namespace and across namespaces), get, create,
 * replace, patch and delete of pods and pods/status, with the request and response shapes of
 * kube-apiserver (PodList without per-item TypeMeta, 201 on create, DeleteOptions from body and query).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { V1DeleteOptions, V1Pod } from '@kubernetes/client-node';
import { decodeContinue, encodeContinue } from './continue-token.ts';
import type { ApiVerb } from './faults.ts';
import { parseJsonBody, readBody, sendJson } from './http-io.ts';
import { entriesAt } from './list-snapshot.ts';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.ts';
import { encodeItem, itemJson, withTypeMeta } from './pod-object.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';
import { badRequest, continueExpired, methodNotAllowed, notFound, unsupportedMediaType } from './status.ts';
import type { PodStore, StoreEntry } from './store.ts';
import { podTable, wantsTable } from './table.ts';
import type { WatchHub } from './watch.ts';

/** Which pods endpoint a path names. */
export interface PodRoute {
  kind: 'collection' | 'item' | 'status';
  namespace: string | undefined;
  name: string | undefined;
}

/** Parses `/api/v1/pods`, `/api/v1/namespaces/{ns}/pods[/{name}[/status]]`; undefined otherwise. */
export function matchPodRoute(pathname: string): PodRoute | undefined {
  if (pathname === '/api/v1/pods') return { kind: 'collection', namespace: undefined, name: undefined };
  if (!pathname.startsWith('/api/v1/namespaces/')) return undefined;
  const parts = pathname.slice('/api/v1/namespaces/'.length).split('/');
  if (parts[1] !== 'pods' || !parts[0]) return undefined;
  const namespace = decodeURIComponent(parts[0]);
  if (parts.length === 2) return { kind: 'collection', namespace, name: undefined };
  const name = parts[2] ? decodeURIComponent(parts[2]) : '';
  if (!name) return undefined;
  if (parts.length === 3) return { kind: 'item', namespace, name };
  if (parts.length === 4 && parts[3] === 'status') return { kind: 'status', namespace, name };
  return undefined;
}

/**
 * The verb of a request to a pods endpoint.
 * @throws KubeStatusError 405 when the endpoint does not support the method.
 */
export function podVerb(method: string, route: PodRoute, query: URLSearchParams): ApiVerb {
  if (route.kind === 'collection') {
    if (method === 'GET')
      return query.get('watch') === 'true' || query.get('watch') === '1' ? 'watch' : 'list';
    if (method === 'POST' && route.namespace !== undefined) return 'create';
    throw methodNotAllowed();
  }
  switch (method) {
    case 'GET':
      return 'get';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      if (route.kind === 'item') return 'delete';
      throw methodNotAllowed();
    default:
      throw methodNotAllowed();
  }
}

/** Everything a pods request handler needs. */
export interface PodRequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  route: PodRoute;
  verb: ApiVerb;
  query: URLSearchParams;
  store: PodStore;
  hub: WatchHub;
  /** Fault asking to end or reset this watch mid-stream. */
  dropWatch: 'clean' | 'reset' | undefined;
  /** Sandbox clock, epoch ms (Table ages). */
  now: () => number;
  /** Called when a watch stream ends (for the request log). */
  onWatchEnd: () => void;
  /** DELETE: reports the body's preconditions.uid (the log keys a DELETE of an absent pod by it). */
  noteUid?: (uid: string) => void;
  /** DELETE: reports the pod as the store left it, once the delete was applied (for the request log). */
  noteApplied?: (pod: V1Pod) => void;
}

const PATCH_TYPES = [
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
] as const;

function intParam(query: URLSearchParams, name: string): number | undefined {
  const raw = query.get(name);
  if (raw === null || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw badRequest(`invalid value for ${name}: "${raw}"`);
  return n;
}

function podJson(pod: V1Pod): string {
  return withTypeMeta(encodeItem(pod));
}

/** Serves one pods request. @throws KubeStatusError for every API failure (the caller answers it). */
export async function handlePodRequest(ctx: PodRequestContext): Promise<void> {
  const { req, res, route, query, store } = ctx;
  const ns = route.namespace;
  const name = route.name ?? '';
  switch (ctx.verb) {
    case 'list':
      return listPods(ctx);
    case 'watch':
      return watchPods(ctx);
    case 'get': {
      const e = store.getEntry(ns ?? '', name);
      if (!e) throw notFound(name);
      sendJson(
        res,
        200,
        wantsTable(req)
          ? JSON.stringify(podTable([e.pod], ctx.now(), store.resourceVersion))
          : withTypeMeta(e.json),
      );
      return;
    }
    case 'create': {
      const pod = parseJsonBody(req, await readBody(req), ['application/json']) as V1Pod;
      if (typeof pod !== 'object' || pod === null) throw badRequest('the request body must be a Pod object');
      pod.metadata ??= {};
      if (pod.metadata.namespace && pod.metadata.namespace !== ns) {
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      pod.metadata.namespace = ns;
      sendJson(res, 201, podJson(store.create(pod, 'api')));
      return;
    }
    case 'update': {
      const pod = parseJsonBody(req, await readBody(req), ['application/json']) as V1Pod;
      if (typeof pod !== 'object' || pod === null) throw badRequest('the request body must be a Pod object');
      pod.metadata ??= {};
      if (pod.metadata.name !== name) {
        throw badRequest(
          `the name of the object (${pod.metadata.name}) does not match the name on the URL (${name})`,
        );
      }
      if (pod.metadata.namespace && pod.metadata.namespace !== ns) {
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      pod.metadata.namespace = ns;
      sendJson(res, 200, podJson(store.replace(pod, route.kind === 'status' ? 'status' : 'main')));
      return;
    }
    case 'patch': {
      const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      if (!(PATCH_TYPES as readonly string[]).includes(type))
        throw unsupportedMediaType(PATCH_TYPES.join(', '));
      const body = parseJsonBody(req, await readBody(req), PATCH_TYPES);
      const apply =
        type === 'application/json-patch+json'
          ? jsonPatch
          : type === 'application/merge-patch+json'
            ? mergePatch
            : strategicMergePatch;
      const patched = store.patch(
        ns ?? '',
        name,
        (cur) => {
          const out = apply(cur, body);
          if (typeof out !== 'object' || out === null || Array.isArray(out)) {
            throw badRequest('the patch must produce a Pod object');
          }
          return out as V1Pod;
        },
        route.kind === 'status' ? 'status' : 'main',
      );
      sendJson(res, 200, podJson(patched));
      return;
    }
    case 'delete': {
      const raw = await readBody(req);
      let opts: V1DeleteOptions = {};
      if (raw.trim() !== '') {
        const parsed = parseJsonBody(req, raw, ['application/json']);
        if (typeof parsed !== 'object' || parsed === null)
          throw badRequest('the request body must be DeleteOptions');
        opts = parsed as V1DeleteOptions;
      }
      if (opts.preconditions?.uid) ctx.noteUid?.(opts.preconditions.uid);
      const grace = query.get('gracePeriodSeconds');
      if (grace !== null) {
        const n = Number(grace);
        if (!Number.isInteger(n)) throw badRequest(`invalid value for gracePeriodSeconds: "${grace}"`);
        opts.gracePeriodSeconds = n;
      }
      const policy = query.get('propagationPolicy');
      if (policy !== null) opts.propagationPolicy = policy;
      const orphan = query.get('orphanDependents');
      if (orphan !== null) opts.orphanDependents = orphan === 'true';
      if (query.get('dryRun') || (opts.dryRun?.length ?? 0) > 0) {
        throw badRequest('dryRun is not supported by the sandbox API server');
      }
      const result = store.delete(ns ?? '', name, opts);
      ctx.noteApplied?.(result.pod);
      sendJson(res, result.code, withTypeMeta(itemJson(result.pod)));
      return;
    }
  }
}

/**
 * A list, or one page of it, as etcd3/store.go GetList serves it: the first page at the latest
 * resourceVersion, later pages at the first page's (from the continue token; see list-snapshot.ts), a
 * token older than the compacted resourceVersion answered 410 Expired (with the inconsistent-continue
 * token), and a continue token whenever any key — matching the selectors or not — follows the page, so the
 * last page of a filtered list may be empty.
 */
function listPods(ctx: PodRequestContext): void {
  const { req, res, route, query, store } = ctx;
  const matchLabels = parseLabelSelector(query.get('labelSelector') ?? undefined);
  const matchFields = parseFieldSelector(query.get('fieldSelector') ?? undefined);
  const filtered = Boolean(query.get('labelSelector') || query.get('fieldSelector'));
  const limit = intParam(query, 'limit') ?? 0;
  // Keys in tokens are relative to the list's etcd prefix (/registry/pods/<ns>/ or /registry/pods/).
  const prefix = route.namespace === undefined ? '' : `${route.namespace}/`;
  const cont = query.get('continue');
  let rv = store.resourceVersion;
  let entries: Iterable<StoreEntry>;
  if (cont) {
    const rvParam = query.get('resourceVersion');
    if (rvParam && rvParam !== '0') {
      throw badRequest('specifying resource version is not allowed when using continue');
    }
    const token = decodeContinue(cont);
    const fromKey = prefix + token.start;
    if (token.rv < 0) {
      // The inconsistent continuation a 410 hands out: the rest of the list at the latest resourceVersion.
      entries = store.entries(route.namespace, fromKey);
    } else {
      if (token.rv < store.compactedResourceVersion) throw continueExpired(encodeContinue(-1, token.start));
      if (token.rv > store.resourceVersion) {
        throw new Error('etcdserver: mvcc: required revision is a future revision');
      }
      rv = token.rv;
      entries = entriesAt(store, rv, route.namespace, fromKey);
    }
  } else {
    entries = store.entries(route.namespace);
  }
  const items: StoreEntry[] = [];
  let more = false;
  let remaining = 0;
  for (const e of entries) {
    if (limit > 0 && items.length >= limit) {
      more = true;
      if (filtered) break;
      remaining++;
      continue;
    }
    if (matchLabels(e.pod) && matchFields(e.pod)) items.push(e);
  }
  const lastKey = items.at(-1)?.key;
  const next = more && lastKey ? encodeContinue(rv, `${lastKey.slice(prefix.length)}\u0000`) : undefined;
  if (wantsTable(req)) {
    const table = podTable(
      items.map((i) => i.pod),
      ctx.now(),
      rv,
      next,
    );
    sendJson(res, 200, JSON.stringify(table));
    return;
  }
  let meta = `"resourceVersion":"${rv}"`;
  if (next) {
    meta += `,"continue":"${next}"`;
    // kube reports remainingItemCount only for unfiltered lists.
    if (!filtered) meta += `,"remainingItemCount":${remaining}`;
  }
  const body = `{"kind":"PodList","apiVersion":"v1","metadata":{${meta}},"items":[${items.map((i) => i.json).join(',')}]}`;
  sendJson(res, 200, body);
}

function watchPods(ctx: PodRequestContext): void {
  const { query, route } = ctx;
  const matchLabels = parseLabelSelector(query.get('labelSelector') ?? undefined);
  const matchFields = parseFieldSelector(query.get('fieldSelector') ?? undefined);
  const rvRaw = query.get('resourceVersion') ?? '';
  let resourceVersion: number | undefined;
  if (rvRaw !== '' && rvRaw !== '0') {
    resourceVersion = Number(rvRaw);
    if (!Number.isInteger(resourceVersion) || resourceVersion < 0) {
      throw badRequest(`invalid resource version: "${rvRaw}"`);
    }
  }
  const allowBookmarks = query.get('allowWatchBookmarks') === 'true';
  ctx.hub.serve(
    ctx.res,
    {
      namespace: route.namespace,
      matches: (p) => matchLabels(p) && matchFields(p),
      resourceVersion,
      allowBookmarks,
      timeoutSeconds: intParam(query, 'timeoutSeconds'),
      initialEventsEndBookmark: query.get('sendInitialEvents') === 'true',
      drop: ctx.dropWatch,
      table: wantsTable(ctx.req),
    },
    ctx.onWatchEnd,
  );
}
