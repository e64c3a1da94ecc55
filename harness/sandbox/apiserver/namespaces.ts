/**
 * Namespaces, as kube-apiserver serves them (cluster-scoped, `v1`): a store sharing the pods' one global
 * resourceVersion (etcd's revision) and compaction, and the routes
 *
 * - `GET /api/v1/namespaces` — a `NamespaceList`: `labelSelector`, `limit`/`continue` (tokens as
 *   continue-token.ts; every page read at the first page's resourceVersion, 410 once compacted past it),
 *   `resourceVersion` (unset/0: the latest; N: not older than N, 504 when N is ahead);
 * - `GET /api/v1/namespaces?watch=1` — ADDED/MODIFIED/DELETED from `resourceVersion` (410 Expired as an ERROR
 *   event when compacted past it), the initial events for a watch from ""/"0", a namespace that stops matching
 *   the selector as DELETED and one that starts as ADDED, BOOKMARKs (`allowWatchBookmarks`), `timeoutSeconds`;
 * - `GET /api/v1/namespaces/{name}` — one `Namespace`, or 404.
 *
 * and the writes kubectl sends (`kubectl create namespace`, `kubectl label namespace`, `kubectl delete namespace`):
 *
 * - `POST /api/v1/namespaces` — a `Namespace` (its name and labels kept) → 201, 409 AlreadyExists;
 * - `PATCH /api/v1/namespaces/{name}` — a merge, strategic merge or JSON patch → 200; of the result only
 *   `metadata.labels` is stored (kubectl label sends a merge patch of the labels);
 * - `PUT /api/v1/namespaces/{name}` — the labels of the body; `DELETE /api/v1/namespaces/{name}` → 200 Terminating.
 *
 * Tests also write through the server handle's `namespaces` or the control surface. A delete sets
 * `deletionTimestamp` and phase `Terminating` (MODIFIED), then removes the namespace (DELETED), as the namespace
 * controller does once the namespace is empty; its pods are left alone (pods may exist in any namespace here,
 * existing or not).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { V1Namespace } from '@kubernetes/client-node';
import { decodeContinue, encodeContinue } from './continue-token.ts';
import { EventWindow } from './event-window.ts';
import { isGone, isHttp2 } from './h2.ts';
import { mediaType, parseJsonBody, readBody, readBodyBytes, sendError, sendJson } from './http-io.ts';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.ts';
import { decodeNamespace, PROTOBUF_MEDIA_TYPE } from './protobuf.ts';
import { type ListOptions, parseListOptions, validateWriteOptions } from './query-params.ts';
import { parseLabelSelector } from './selectors.ts';
import {
  alreadyExists,
  badRequest,
  continueExpired,
  expired,
  type KubeStatusError,
  methodNotAllowed,
  notFound,
  tooLargeResourceVersion,
  unsupportedMediaType,
} from './status.ts';

/** The pod store's part the namespaces share: one revision counter, one compaction. */
export interface RevisionSource {
  takeRevision(): number;
  readonly resourceVersion: number;
  readonly compactedResourceVersion: number;
}

type NamespaceEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change of one namespace. */
interface NamespaceEvent {
  readonly type: NamespaceEventType;
  readonly rv: number;
  /** The new state (for DELETED: the last). */
  readonly ns: V1Namespace;
  /** The state before (undefined for ADDED). */
  readonly prev: V1Namespace | undefined;
}

const typeMeta = { apiVersion: 'v1', kind: 'Namespace' } as const;

/** The namespaces of one sandbox server. Stored objects are never mutated: each write stores a new one. */
export class NamespaceStore {
  readonly #revisions: RevisionSource;
  readonly #now: () => number;
  readonly #items = new Map<string, V1Namespace>();
  readonly #window: EventWindow<NamespaceEvent>;
  readonly #listeners = new Set<(ev: NamespaceEvent) => void>();
  /** The open watches' `end`, for {@link NamespaceStore.dropWatches}. */
  readonly openWatches = new Set<() => void>();

  constructor(revisions: RevisionSource, now: () => number) {
    this.#revisions = revisions;
    this.#now = now;
    this.#window = new EventWindow(50_000, revisions.resourceVersion);
  }

  /** Watches and continue tokens from a resourceVersion below this get 410 Expired. */
  get compactedResourceVersion(): number {
    return Math.max(this.#window.compactedRv, this.#revisions.compactedResourceVersion);
  }

  #write(type: NamespaceEventType, ns: V1Namespace, prev: V1Namespace | undefined): V1Namespace {
    const rv = this.#revisions.takeRevision();
    const stored: V1Namespace = { ...ns, metadata: { ...ns.metadata, resourceVersion: String(rv) } };
    const name = stored.metadata?.name ?? '';
    if (type === 'DELETED') this.#items.delete(name);
    else this.#items.set(name, stored);
    const ev = { type, rv, ns: stored, prev };
    this.#window.push(ev);
    for (const l of this.#listeners) l(ev);
    return structuredClone(stored);
  }

  /**
   * Creates a namespace with these labels (plus `kubernetes.io/metadata.name`, as the API server adds).
   * @throws KubeStatusError 409 AlreadyExists.
   */
  create(name: string, labels: Record<string, string> = {}): V1Namespace {
    if (this.#items.has(name)) throw alreadyExists(name, 'namespaces');
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name))
      throw badRequest(`invalid namespace name ${name}`);
    return this.#write(
      'ADDED',
      {
        metadata: {
          name,
          uid: randomUUID(),
          creationTimestamp: new Date(this.#now()),
          labels: { ...labels, 'kubernetes.io/metadata.name': name },
        },
        spec: { finalizers: ['kubernetes'] },
        status: { phase: 'Active' },
      },
      undefined,
    );
  }

  /**
   * Replaces the labels (`kubernetes.io/metadata.name` kept); an unchanged write is a no-op.
   * @throws KubeStatusError 404.
   */
  setLabels(name: string, labels: Record<string, string>): V1Namespace {
    const cur = this.#items.get(name);
    if (!cur) throw notFound(name, 'namespaces');
    const next = { ...labels, 'kubernetes.io/metadata.name': name };
    if (JSON.stringify(next) === JSON.stringify(cur.metadata?.labels ?? {})) return structuredClone(cur);
    return this.#write('MODIFIED', { ...cur, metadata: { ...cur.metadata, labels: next } }, cur);
  }

  /** Deletes: Terminating (MODIFIED), then gone (DELETED). @throws KubeStatusError 404. */
  delete(name: string): V1Namespace {
    const cur = this.#items.get(name);
    if (!cur) throw notFound(name, 'namespaces');
    const terminating = this.#write(
      'MODIFIED',
      {
        ...cur,
        metadata: { ...cur.metadata, deletionTimestamp: new Date(this.#now()) },
        status: { phase: 'Terminating' },
      },
      cur,
    );
    const last = this.#items.get(name) as V1Namespace;
    this.#write('DELETED', last, last);
    return terminating;
  }

  /** The namespace, a clone; undefined when absent. */
  get(name: string): V1Namespace | undefined {
    const ns = this.#items.get(name);
    return ns && structuredClone(ns);
  }

  /** Every namespace at resourceVersion `rv` (default the latest), sorted by name (etcd's key order). */
  at(rv?: number): V1Namespace[] {
    const state = new Map(this.#items);
    if (rv !== undefined) {
      // Undo the retained changes after rv, newest first.
      const later = this.#window.since(rv);
      for (const ev of later.reverse()) {
        const name = ev.ns.metadata?.name ?? '';
        if (ev.type === 'ADDED') state.delete(name);
        else if (ev.prev) state.set(name, ev.prev);
      }
    }
    return [...state.values()].sort((a, b) => ((a.metadata?.name ?? '') < (b.metadata?.name ?? '') ? -1 : 1));
  }

  /** @throws KubeStatusError 410 when events after `rv` were compacted. */
  eventsSince(rv: number): NamespaceEvent[] {
    if (rv < this.compactedResourceVersion) throw expired(rv, this.compactedResourceVersion + 1);
    return this.#window.since(rv);
  }

  /** Ends every open namespace watch cleanly (the client resumes from its last resourceVersion). */
  dropWatches(): void {
    for (const end of [...this.openWatches]) end();
  }

  subscribe(listener: (ev: NamespaceEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/** `/api/v1/namespaces` or `/api/v1/namespaces/{name}`: the name ('' for the collection); else undefined. */
export function matchNamespaceRoute(pathname: string): string | undefined {
  if (pathname === '/api/v1/namespaces') return '';
  const m = /^\/api\/v1\/namespaces\/([^/]+)$/.exec(pathname);
  return m ? decodeURIComponent(m[1] as string) : undefined;
}

/** The verb of a namespace request (for the request log, faults and authorization), as RBAC names it. */
export function namespaceVerb(
  name: string,
  query: URLSearchParams,
  method = 'GET',
): 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' {
  switch (method) {
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
  }
  if (name !== '') return 'get';
  const w = query.get('watch');
  return w === '1' || w === 'true' ? 'watch' : 'list';
}

const PATCH_TYPES = [
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
] as const;

/** The labels of a Namespace body, checked to be a string map. @throws KubeStatusError 400 otherwise. */
function labelsOf(obj: unknown): Record<string, string> {
  const labels = (obj as { metadata?: { labels?: unknown } } | null)?.metadata?.labels ?? {};
  if (
    typeof labels !== 'object' ||
    labels === null ||
    Array.isArray(labels) ||
    Object.values(labels).some((v) => typeof v !== 'string')
  )
    throw badRequest('metadata.labels must be a map of strings');
  return labels as Record<string, string>;
}

/**
 * Serves one namespace write (POST, PUT, PATCH, DELETE), as kube-apiserver answers them.
 * @throws KubeStatusError 400 (malformed body, name mismatch), 404, 405, 409, 415, 422.
 */
async function writeNamespace(
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
  query: URLSearchParams,
  store: NamespaceStore,
): Promise<void> {
  const method = req.method ?? '';
  if (method === 'DELETE') {
    await readBody(req);
    sendJson(res, 200, objectJson(store.delete(name)));
    return;
  }
  if (method === 'POST' && name === '') {
    validateWriteOptions('CreateOptions', query);
    // kubectl create namespace sends protobuf (a typed clientset); other clients JSON.
    const bytes = await readBodyBytes(req);
    const body = (
      mediaType(req) === PROTOBUF_MEDIA_TYPE
        ? decodeNamespace(bytes)
        : parseJsonBody(req, bytes.toString('utf8'), ['application/json', PROTOBUF_MEDIA_TYPE])
    ) as V1Namespace;
    const newName = body?.metadata?.name ?? '';
    if (!newName) throw badRequest('name or generateName is required');
    sendJson(res, 201, objectJson(store.create(newName, labelsOf(body))));
    return;
  }
  if ((method === 'PUT' || method === 'PATCH') && name !== '') {
    const cur = store.get(name);
    if (!cur) throw notFound(name, 'namespaces');
    let next: unknown;
    if (method === 'PUT') {
      validateWriteOptions('UpdateOptions', query);
      next = parseJsonBody(req, await readBody(req), ['application/json']);
      if ((next as V1Namespace)?.metadata?.name !== name)
        throw badRequest(
          `the name of the object (${(next as V1Namespace)?.metadata?.name}) does not match the name on the URL (${name})`,
        );
    } else {
      const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      if (!(PATCH_TYPES as readonly string[]).includes(type))
        throw unsupportedMediaType(PATCH_TYPES.join(', '));
      validateWriteOptions('PatchOptions', query);
      const patch = parseJsonBody(req, await readBody(req), PATCH_TYPES);
      next =
        type === 'application/json-patch+json'
          ? jsonPatch(cur, patch)
          : type === 'application/merge-patch+json'
            ? mergePatch(cur, patch)
            : strategicMergePatch(cur, patch);
    }
    sendJson(res, 200, objectJson(store.setLabels(name, labelsOf(next))));
    return;
  }
  throw methodNotAllowed();
}

const itemJson = (ns: V1Namespace): string => JSON.stringify(ns);
const objectJson = (ns: V1Namespace): string => JSON.stringify({ ...typeMeta, ...ns });

/** Serves one namespace request: reads, and the writes kubectl sends (see the module comment). */
export async function handleNamespaceRequest(
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
  query: URLSearchParams,
  store: NamespaceStore,
  revisions: RevisionSource,
  opts: { bookmarkIntervalMs: number },
): Promise<void> {
  try {
    if (req.method !== 'GET') {
      await writeNamespace(req, res, name, query, store);
      return;
    }
    if (name !== '') {
      const ns = store.get(name);
      if (!ns) throw notFound(name, 'namespaces');
      sendJson(res, 200, objectJson(ns));
      return;
    }
    const lo = parseListOptions(query, (o) => {
      parseLabelSelector(o.labelSelector);
    });
    if (lo.watch) watchNamespaces(res, lo, store, revisions, opts.bookmarkIntervalMs);
    else listNamespaces(res, lo, store, revisions);
  } catch (err) {
    sendError(res, err);
  }
}

function parseRv(raw: string): number {
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw badRequest(`invalid resource version "${raw}"`);
  return n;
}

function listNamespaces(
  res: ServerResponse,
  lo: ListOptions,
  store: NamespaceStore,
  revisions: RevisionSource,
): void {
  const matches = parseLabelSelector(lo.labelSelector);
  let rv = revisions.resourceVersion;
  let start = '';
  if (lo.continue !== '') {
    const token = decodeContinue(lo.continue);
    start = token.start;
    if (token.rv > 0) {
      if (token.rv < store.compactedResourceVersion) throw continueExpired(encodeContinue(-1, start));
      rv = token.rv;
    }
  } else if (lo.resourceVersion !== '' && lo.resourceVersion !== '0') {
    const asked = parseRv(lo.resourceVersion);
    if (asked > rv) throw tooLargeResourceVersion(asked, rv, 1);
  }
  const all = store
    .at(rv === revisions.resourceVersion ? undefined : rv)
    // `start` is the first key to read: `name\0` sorts right after `name`.
    .filter((ns) => (ns.metadata?.name ?? '') >= start)
    .filter((ns) => matches(ns as never));
  const limit = lo.limit > 0 ? lo.limit : all.length;
  const page = all.slice(0, limit);
  const more = all.length > page.length;
  const last = page[page.length - 1]?.metadata?.name ?? '';
  const metadata = {
    resourceVersion: String(rv),
    ...(more
      ? { continue: encodeContinue(rv, `${last}\0`), remainingItemCount: all.length - page.length }
      : {}),
  };
  sendJson(
    res,
    200,
    `{"kind":"NamespaceList","apiVersion":"v1","metadata":${JSON.stringify(metadata)},"items":[${page.map(itemJson).join(',')}]}`,
  );
}

function bookmarkLine(rv: number, initialEventsEnd: boolean): string {
  const annotations = initialEventsEnd ? ',"annotations":{"k8s.io/initial-events-end":"true"}' : '';
  return `{"type":"BOOKMARK","object":{"kind":"Namespace","apiVersion":"v1","metadata":{"resourceVersion":"${rv}","creationTimestamp":null${annotations}},"spec":{},"status":{}}}\n`;
}

/** The type a watch with this selector sees for a change, or undefined (selector transitions as cacher.go). */
function filteredType(ev: NamespaceEvent, matches: (ns: never) => boolean): NamespaceEventType | undefined {
  const now = matches(ev.ns as never);
  const before = ev.prev !== undefined && matches(ev.prev as never);
  if (ev.type === 'ADDED') return now ? 'ADDED' : undefined;
  if (ev.type === 'DELETED') return now || before ? 'DELETED' : undefined;
  if (before && now) return 'MODIFIED';
  if (now) return 'ADDED';
  if (before) return 'DELETED';
  return undefined;
}

function watchNamespaces(
  res: ServerResponse,
  lo: ListOptions,
  store: NamespaceStore,
  revisions: RevisionSource,
  bookmarkIntervalMs: number,
): void {
  const matches = parseLabelSelector(lo.labelSelector);
  const fromRv =
    lo.resourceVersion === '' || lo.resourceVersion === '0' ? undefined : parseRv(lo.resourceVersion);
  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Cache-Control': 'no-cache, private',
    ...(isHttp2(res) ? {} : { 'Transfer-Encoding': 'chunked' }),
  });
  res.flushHeaders();
  const write = (line: string) => {
    if (!isGone(res)) res.write(line);
  };
  let backlog: NamespaceEvent[] = [];
  if (fromRv !== undefined) {
    try {
      backlog = store.eventsSince(fromRv);
    } catch (err) {
      res.end(`{"type":"ERROR","object":${JSON.stringify((err as KubeStatusError).status)}}\n`);
      return;
    }
  }
  const afterRv = fromRv ?? revisions.resourceVersion;
  const send = (ev: NamespaceEvent) => {
    if (ev.rv <= afterRv) return;
    const type = filteredType(ev, matches);
    if (type) write(`{"type":"${type}","object":${objectJson(ev.ns)}}\n`);
  };
  if (lo.sendInitialEvents) {
    for (const ns of store.at())
      if (matches(ns as never)) write(`{"type":"ADDED","object":${objectJson(ns)}}\n`);
    if (lo.allowWatchBookmarks) write(bookmarkLine(revisions.resourceVersion, true));
  } else {
    for (const ev of backlog) send(ev);
  }
  const unsubscribe = store.subscribe(send);
  const timers: NodeJS.Timeout[] = [];
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    store.openWatches.delete(end);
    unsubscribe();
    for (const t of timers) clearTimeout(t);
    res.end();
  };
  res.on('close', end);
  store.openWatches.add(end);
  if (lo.allowWatchBookmarks) {
    const t = setInterval(() => write(bookmarkLine(revisions.resourceVersion, false)), bookmarkIntervalMs);
    t.unref();
    timers.push(t);
  }
  if (lo.timeoutSeconds !== undefined) {
    const t = setTimeout(end, Math.max(0, lo.timeoutSeconds * 1000));
    t.unref();
    timers.push(t);
  }
}
