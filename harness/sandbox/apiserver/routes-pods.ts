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
import {
  type ListOptions,
  parseDeleteQuery,
  parseListOptions,
  queryBool,
  validateDeleteOptions,
  validateWriteOptions,
} from './query-params.ts';
import { type PodPredicate, parseFieldSelector, parseLabelSelector } from './selectors.ts';
import {
  badRequest,
  continueExpired,
  listExpired,
  methodNotAllowed,
  notFound,
  tooLargeResourceVersion,
  unknownError,
  unsupportedMediaType,
} from './status.ts';
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
    // `watch` as apimachinery reads a boolean (query-params.ts): only `0` and `false` (any case) are false.
    if (method === 'GET') return queryBool(query, 'watch') === true ? 'watch' : 'list';
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

/** How long a list waits for a resourceVersion not reached yet before its 504, ms (cacher.go blockTimeout). */
const RESOURCE_VERSION_WAIT_MS = 3_000;

/**
 * A resourceVersion parameter as storage.APIObjectVersioner.ParseResourceVersion reads it: "" and "0" are 0,
 * else Go's strconv.ParseUint(s, 10, 64). Returns the error text of a malformed one.
 */
function parseResourceVersion(raw: string): number | string {
  if (raw === '' || raw === '0') return 0;
  const quoted = JSON.stringify(raw);
  if (!/^[0-9]+$/.test(raw))
    return `resourceVersion: Invalid value: ${quoted}: strconv.ParseUint: parsing ${quoted}: invalid syntax`;
  if (BigInt(raw) > 2n ** 64n - 1n)
    return `resourceVersion: Invalid value: ${quoted}: strconv.ParseUint: parsing ${quoted}: value out of range`;
  return Number(raw);
}

/** Both selectors as one predicate. @throws KubeStatusError 400 for a malformed selector. */
function selectorPredicate(opts: ListOptions): PodPredicate {
  const matchLabels = parseLabelSelector(opts.labelSelector || undefined);
  const matchFields = parseFieldSelector(opts.fieldSelector || undefined);
  return (p) => matchLabels(p) && matchFields(p);
}

/** Resolves once the store reaches `rv`, or false after `timeoutMs`. */
function waitForResourceVersion(store: PodStore, rv: number, timeoutMs: number): Promise<boolean> {
  if (store.resourceVersion >= rv) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      unsubscribe();
      resolve(false);
    }, timeoutMs);
    const unsubscribe = store.subscribe((ev) => {
      if (ev.rv < rv) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(true);
    });
  });
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
    case 'watch': {
      let matches: PodPredicate = () => true;
      const opts = parseListOptions(query, (o) => {
        matches = selectorPredicate(o);
      });
      return ctx.verb === 'list' ? listPods(ctx, opts, matches) : watchPods(ctx, opts, matches);
    }
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
      const raw = await readBody(req);
      validateWriteOptions('CreateOptions', query);
      const pod = parseJsonBody(req, raw, ['application/json']) as V1Pod;
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
      const raw = await readBody(req);
      validateWriteOptions('UpdateOptions', query);
      const pod = parseJsonBody(req, raw, ['application/json']) as V1Pod;
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
      const raw = await readBody(req);
      validateWriteOptions('PatchOptions', query);
      const body = parseJsonBody(req, raw, PATCH_TYPES);
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
      // handlers/delete.go: DeleteOptions come from the body when it has one — the query is then not read at
      // all — and from the query otherwise; either way ValidateDeleteOptions follows (422 Invalid).
      let opts: V1DeleteOptions;
      if (raw.length > 0) {
        const parsed = parseJsonBody(req, raw, ['application/json']);
        if (typeof parsed !== 'object' || parsed === null)
          throw badRequest('the request body must be DeleteOptions');
        opts = parsed as V1DeleteOptions;
      } else {
        opts = parseDeleteQuery(query);
      }
      validateDeleteOptions(opts);
      if (opts.preconditions?.uid) ctx.noteUid?.(opts.preconditions.uid);
      if ((opts.dryRun?.length ?? 0) > 0) {
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
 * A list, or one page of it, as kube-apiserver serves it (storage/cacher/delegator.go GetList and
 * delegator/interface.go ShouldDelegateList, storage/interfaces.go ValidateListOptions, etcd3/store.go GetList):
 * - `continue`: the next page at the token's resourceVersion (see list-snapshot.ts), 410 Expired with the
 *   inconsistent-continue token once compacted; a `resourceVersion` other than "" or "0" beside it is a 400;
 * - no resourceVersion: the latest state (a consistent read), paged by `limit`;
 * - `resourceVersion=0` (NotOlderThan or unset): the watch cache's state, `limit` ignored (cacher.go
 *   computeListLimit): the whole list in one page, without continue token;
 * - `resourceVersionMatch=Exact`, or a resourceVersion > 0 with a `limit` and no match (the legacy exact
 *   case): the list as it was at that resourceVersion, paged; 410 Expired once compacted, 504 Timeout
 *   (ResourceVersionTooLarge) for one not reached yet;
 * - `resourceVersionMatch=NotOlderThan`, or a resourceVersion > 0 alone: the latest state once it is at
 *   least that resourceVersion, waiting up to 3 s for it (then 504 Timeout, retryAfterSeconds 1).
 * A continue token follows a page whenever any key — matching the selectors or not — follows it, so the
 * last page of a filtered list may be empty.
 */
async function listPods(ctx: PodRequestContext, opts: ListOptions, matches: PodPredicate): Promise<void> {
  const { req, res, route, store } = ctx;
  const filtered = Boolean(opts.labelSelector || opts.fieldSelector);
  let limit = Math.max(opts.limit, 0);
  // Keys in tokens are relative to the list's etcd prefix (/registry/pods/<ns>/ or /registry/pods/).
  const prefix = route.namespace === undefined ? '' : `${route.namespace}/`;
  let rv = store.resourceVersion;
  let entries: Iterable<StoreEntry>;
  if (opts.continue) {
    const token = decodeContinue(opts.continue);
    if (opts.resourceVersion !== '' && opts.resourceVersion !== '0') {
      throw badRequest('specifying resource version is not allowed when using continue');
    }
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
    const requested = parseResourceVersion(opts.resourceVersion);
    if (typeof requested === 'string') throw badRequest(`invalid resource version: ${requested}`);
    const exact =
      opts.resourceVersionMatch === 'Exact' ||
      (opts.resourceVersionMatch === '' && limit > 0 && requested > 0);
    if (exact) {
      if (requested > store.resourceVersion)
        throw tooLargeResourceVersion(requested, store.resourceVersion, 0);
      if (requested < store.compactedResourceVersion) throw listExpired();
      rv = requested;
      entries = entriesAt(store, rv, route.namespace, undefined);
    } else {
      if (opts.resourceVersion === '0') limit = 0;
      if (!(await waitForResourceVersion(store, requested, RESOURCE_VERSION_WAIT_MS)))
        throw tooLargeResourceVersion(requested, store.resourceVersion, 1);
      rv = store.resourceVersion;
      entries = store.entries(route.namespace);
    }
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
    if (matches(e.pod)) items.push(e);
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

/**
 * A watch (storage/cacher/cacher.go Watch, handlers/get.go handleWatch): `sendInitialEvents=true` (the
 * default for a watch from "" or "0") sends the current state as ADDED events, then — with
 * `allowWatchBookmarks` — a BOOKMARK annotated `k8s.io/initial-events-end: "true"`; otherwise the changes after
 * the resourceVersion (none before "now" for "" and "0"). A malformed resourceVersion is the watch cache's
 * parse error, answered 500 without a reason. `timeoutSeconds` 0 means the server's own (kube: 30–60 min;
 * the sandbox: never).
 */
function watchPods(ctx: PodRequestContext, opts: ListOptions, matches: PodPredicate): void {
  const { route } = ctx;
  const requested = parseResourceVersion(opts.resourceVersion);
  if (typeof requested === 'string') throw unknownError(requested);
  const initialEvents = opts.sendInitialEvents === true;
  ctx.hub.serve(
    ctx.res,
    {
      namespace: route.namespace,
      matches,
      resourceVersion: initialEvents || requested === 0 ? undefined : requested,
      sendInitialEvents: initialEvents,
      allowBookmarks: opts.allowWatchBookmarks,
      timeoutSeconds: opts.timeoutSeconds === 0 ? undefined : opts.timeoutSeconds,
      drop: ctx.dropWatch,
      table: wantsTable(ctx.req),
    },
    ctx.onWatchEnd,
  );
}
