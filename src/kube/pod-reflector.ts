/**
 * The list+watch loop and cache behind every pod informer (src/kube/pod-informer.ts for one namespace,
 * src/kube/cluster-pod-informer.ts for a whole context): a reflector and a cache of trimmed pods
 * ({@link DriverPod}) over our HTTP transport ({@link KubeHttp}), as client-go's `Reflector` +
 * `SharedIndexInformer` with a `TransformFunc` and a namespace index (k8s.io/client-go/tools/cache):
 *
 * - **scope**: one namespace (`/api/v1/namespaces/{ns}/pods`) or all of them (`/api/v1/pods`, needing
 *   list/watch on pods cluster-wide); at cluster scope the pods of namespaces not accepted
 *   (`acceptNamespace`) are dropped as they arrive, never cached nor reported;
 * - **every request through the context's rate limiter** ({@link RateLimiter}, priority `informer`): each
 *   list page and each watch takes a token, as client-go's reflector lists and watches through its
 *   clientset's limiter; the informers of many targets starting (or relisting) together queue there;
 * - **list** in pages (`limit` + `continue`, the label selector server-side), trim every item, then
 *   reconcile the cache against the full list as client-go's `Replace`: `added` for new pods, `updated`
 *   for present ones whose resourceVersion changed, `deleted` for cached pods missing from the list (a pod
 *   re-created under the same name with another UID: `deleted` for the old, `added` for the new); a page
 *   answered 410 (its continue token compacted) restarts the list, and a second one lists in one request;
 * - **watch** from the list's resourceVersion (`allowWatchBookmarks`, `timeoutSeconds` 300–600 at random),
 *   newline-delimited JSON: ADDED/MODIFIED/DELETED update the cache and are reported, BOOKMARK only moves
 *   the resourceVersion; a watch that ends (server timeout, dropped cleanly) is resumed from the last
 *   resourceVersion;
 * - **410 Gone/Expired** (an ERROR event or the watch answered 410) → relist at once, no backoff;
 * - **any other failure** (non-2xx on list or watch, a network error, a bad line, an ERROR event) → the
 *   whole list+watch restarts after an exponential backoff with jitter (500 ms · 2ⁿ · U(0.5, 1), at most
 *   30 s; `Retry-After` honoured), forever, until `stop()`, logging the API Status (code, reason, message).
 *
 * Only trimmed pods are kept (src/kube/driver-pod.ts): list pages and watch objects are dropped once
 * trimmed. The cache is indexed by namespace, then name: consumers compare UIDs themselves. Events are
 * delivered synchronously, in order; a throwing handler is logged and does not break the reflector.
 *
 * One file, long, because list, watch, relist on 410, bookmarks, backoff and the cache are one loop, as
 * client-go's Reflector is.
 */

import { StringDecoder } from 'node:string_decoder';
import { backoffMs } from '../backoff.ts';
import { type Clock, type MonotonicClock, monotonicClock } from '../clock.ts';
import { FAILOVER_TIMERS } from '../failover-timers.ts';
import type { Logger } from '../log.ts';
import { sleep } from '../sleep.ts';
import { KubeApiError, statusError, statusOf } from './api-status.ts';
import { type DriverPod, trimPod } from './driver-pod.ts';
import type { KubeHttp } from './kube-http.ts';
import type { RateLimiter } from './rate-limiter.ts';

/** What the informer observed. `deleted` is a DELETE event (the pod is gone from the API server). */
export type PodEvent = 'added' | 'updated' | 'deleted';

/** Options of {@link createPodReflector}. */
export interface PodReflectorOptions {
  /** The transport of the context (shared; the reflector does not close it). */
  http: KubeHttp;
  /** The context's rate limiter: every list page and watch takes a token from it (priority `informer`). */
  limiter: RateLimiter;
  /** One namespace, or undefined for all of them (cluster scope). */
  namespace: string | undefined;
  /**
   * Cluster scope only: the namespaces whose pods are kept (default all); the others are dropped as they
   * arrive (list items and watch events), never cached nor reported.
   */
  acceptNamespace?: (namespace: string) => boolean;
  /** Applied server-side to the list and the watch ('' for none). */
  labelSelector: string;
  /**
   * Lists and watches this cluster-scoped collection instead of pods (`/api/v1/namespaces` for
   * src/kube/namespace-discovery.ts): its objects are trimmed as pods are (metadata, `status.phase`) and
   * cached under the namespace ''. `namespace` must then be undefined.
   */
  clusterScopedPath?: string;
  log: Logger;
  /** First restart delay, ms (default 500); doubles up to `maxBackoffMs` (default 30 000). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Items per list page (default 500, as client-go's pager). */
  pageSize?: number;
  /** The wall clock, epoch ms: `Retry-After` dates of failed lists and watches. */
  now: Clock;
  /**
   * The monotonic clock, ms: backoff resets, short watches, {@link PodReflector.downSinceMs} (default the
   * system's monotonic clock).
   */
  monotonicNow?: MonotonicClock;
}

/**
 * Told about every event with the pod's namespace (the reflector's own at namespace scope); must not throw
 * (errors are logged) and makes no API calls.
 */
export type ReflectorEventHandler = (event: PodEvent, pod: DriverPod, namespace: string) => void;

/** A running reflector and its cache. */
export interface PodReflector {
  /** Subscribes `handler` to every event from now on: add handlers before `start()` to see the first list. */
  addEventHandler(handler: ReflectorEventHandler): void;
  /** Starts listing and watching (once); resolves once the first list is loaded, or on stop. Never rejects. */
  start(): Promise<void>;
  /** Aborts the list or watch in flight (or the wait for a token) and stops; resolves once the loop ended. */
  stop(): Promise<void>;
  /** True once the first list has been loaded (stays true: the cache stays usable while it restarts). */
  readonly synced: boolean;
  /** Since when it has been down (undefined while it runs), on its monotonic clock (ms, not epoch). */
  readonly downSinceMs: number | undefined;
  /** How many times it was restarted after an error (410 relists are not counted). */
  readonly restarts: number;
  /** The cached pod of that namespace and name (compare its UID!), or undefined. */
  get(namespace: string, name: string): DriverPod | undefined;
  /** The cached pods of one namespace. */
  list(namespace: string): readonly DriverPod[];
}

/** The watch's resourceVersion is too old (410): relist. */
class ExpiredError extends Error {
  override name = 'ExpiredError';
}

/** Reads a (small) error answer of a watch request as text (a Status for {@link statusOf}), at most 64 KiB. */
async function readErrorBody(body: AsyncIterable<Buffer> & { destroy(err?: Error): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk);
      size += chunk.length;
      if (size > 65_536) break;
    }
  } catch {
    // The status code alone will do.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Creates the reflector; call `start()`. */
export function createPodReflector(opts: PodReflectorOptions): PodReflector {
  const log = opts.log;
  const base = opts.backoffMs ?? FAILOVER_TIMERS.informerBackoffBaseMs;
  const max = opts.maxBackoffMs ?? FAILOVER_TIMERS.informerBackoffMaxMs;
  const pageSize = opts.pageSize ?? 500;
  const monotonicNow = opts.monotonicNow ?? monotonicClock;
  /** Consecutive failures less than this apart keep growing the backoff (client-go's reset duration). */
  const backoffResetMs = FAILOVER_TIMERS.informerBackoffResetMs;
  const path =
    opts.clusterScopedPath ??
    (opts.namespace === undefined
      ? '/api/v1/pods'
      : `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/pods`);
  const accept = opts.acceptNamespace ?? (() => true);
  /** The namespace a pod is cached and reported under; undefined: dropped (another namespace, or none). */
  const namespaceOf = (pod: DriverPod): string | undefined => {
    if (opts.clusterScopedPath !== undefined) return '';
    if (opts.namespace !== undefined) return opts.namespace;
    const ns = pod.metadata?.namespace;
    return ns && accept(ns) ? ns : undefined;
  };
  const selector = opts.labelSelector ? `labelSelector=${encodeURIComponent(opts.labelSelector)}` : '';

  /** namespace → name → pod (client-go's namespace index). */
  const cache = new Map<string, Map<string, DriverPod>>();
  const cacheOf = (ns: string): Map<string, DriverPod> => {
    let byName = cache.get(ns);
    if (!byName) {
      byName = new Map();
      cache.set(ns, byName);
    }
    return byName;
  };
  let cached = 0;
  const stopping = new AbortController();
  let stopped = false;
  let started = false;
  let synced = false;
  let downSinceMs: number | undefined = monotonicNow();
  let restarts = 0;
  let failures = 0;
  let lastFailureAt = Number.NEGATIVE_INFINITY;
  let loop: Promise<void> | undefined;
  let firstSync: (() => void) | undefined;
  const firstSynced = new Promise<void>((resolve) => {
    firstSync = resolve;
  });

  const handlers: ReflectorEventHandler[] = [];
  function emit(event: PodEvent, pod: DriverPod, namespace: string): void {
    for (const handler of handlers) {
      try {
        handler(event, pod, namespace);
      } catch (err) {
        log.error(
          { err, event, pod: pod.metadata?.name, uid: pod.metadata?.uid },
          'informer event handler failed',
        );
      }
    }
  }

  /**
   * One consistent list, in pages, trimmed. kube-apiserver reads every page at the first page's
   * resourceVersion; once etcd has compacted past it (every 5 min by default, so a list that took that long)
   * the next page is answered 410 Expired, and the pages read so far are dropped, never taken as a list: the
   * list starts again from the first page (memory stays bounded by a page), and if that one expires too, it
   * is read in one request, as client-go's pager falls back to a full list (paging cannot finish in time).
   * The 410's inconsistent-continue token is never used: it would mix two resourceVersions in the cache.
   */
  async function listAll(): Promise<{ pods: DriverPod[]; resourceVersion: string }> {
    const pods: DriverPod[] = [];
    let cont: string | undefined;
    let limit = pageSize;
    let pages = 0;
    let expired = 0;
    let resourceVersion: string | undefined;
    let dropped = 0;
    for (;;) {
      const params = [
        ...(limit > 0 ? [`limit=${limit}`] : []),
        ...(selector ? [selector] : []),
        ...(cont ? [`continue=${encodeURIComponent(cont)}`] : []),
      ];
      const query = params.length > 0 ? `?${params.join('&')}` : '';
      await opts.limiter.take(stopping.signal, 'informer');
      const res = await opts.http.request('GET', `${path}${query}`, { signal: stopping.signal });
      if (res.statusCode === 410 && cont) {
        expired += 1;
        const s = statusOf(res.body);
        log.info(
          { pages, pods: pods.length, reason: s.reason, restart: expired === 1 ? 'paged' : 'one request' },
          expired === 1
            ? 'list continue token expired (410); listing again from the first page'
            : 'list continue token expired again (410); listing in one request',
        );
        pods.length = 0;
        dropped = 0;
        pages = 0;
        cont = undefined;
        resourceVersion = undefined;
        if (expired > 1) limit = 0;
        continue;
      }
      if (res.statusCode < 200 || res.statusCode > 299)
        throw statusError(
          res.statusCode,
          res.body,
          res.headers,
          opts.now(),
          `list answered HTTP ${res.statusCode}`,
        );
      const list = res.body as {
        metadata?: { resourceVersion?: unknown; continue?: unknown };
        items?: unknown;
      };
      if (typeof list !== 'object' || list === null || !Array.isArray(list.items))
        throw new KubeApiError('list answer is not a PodList', res.statusCode, 'BadList');
      pages += 1;
      for (const item of list.items) {
        const pod = trimPod(item);
        if (namespaceOf(pod) !== undefined) pods.push(pod);
        else dropped += 1;
      }
      // Every page carries the first page's resourceVersion: the list's.
      if (typeof list.metadata?.resourceVersion === 'string') resourceVersion = list.metadata.resourceVersion;
      cont =
        typeof list.metadata?.continue === 'string' && list.metadata.continue ? list.metadata.continue : '';
      if (!cont || limit === 0) break;
    }
    if (!resourceVersion) throw new KubeApiError('list answer has no resourceVersion', 200, 'BadList');
    if (dropped > 0) log.debug({ dropped }, 'list: pods of namespaces not configured dropped');
    return { pods, resourceVersion };
  }

  /** client-go's `Replace`: reconciles the cache with a full list and reports the differences. */
  function replace(pods: readonly DriverPod[]): void {
    const seen = new Set<string>();
    for (const pod of pods) {
      const ns = namespaceOf(pod) as string; // listAll kept only pods with one
      const name = pod.metadata?.name;
      if (!name) {
        emit('added', pod, ns); // not cacheable; the consumer logs it as malformed
        continue;
      }
      seen.add(`${ns}/${name}`);
      const byName = cacheOf(ns);
      const old = byName.get(name);
      byName.set(name, pod);
      if (!old) {
        cached += 1;
        emit('added', pod, ns);
      } else if (old.metadata?.uid !== pod.metadata?.uid) {
        // Deleted and re-created under the same name while we were not watching.
        emit('deleted', old, ns);
        emit('added', pod, ns);
      } else if (old.metadata?.resourceVersion !== pod.metadata?.resourceVersion) {
        emit('updated', pod, ns);
      }
    }
    for (const [ns, byName] of cache) {
      for (const [name, old] of byName) {
        if (seen.has(`${ns}/${name}`)) continue;
        byName.delete(name);
        cached -= 1;
        emit('deleted', old, ns);
      }
      if (byName.size === 0) cache.delete(ns);
    }
  }

  async function relist(): Promise<string> {
    const { pods, resourceVersion } = await listAll();
    if (stopped) return resourceVersion;
    replace(pods);
    log.debug({ pods: cached, resourceVersion }, 'informer listed');
    synced = true;
    downSinceMs = undefined;
    firstSync?.();
    return resourceVersion;
  }

  /** Applies one watch line; returns the new resourceVersion. @throws ExpiredError, KubeApiError. */
  function applyLine(line: string, rv: string): string {
    let ev: { type?: unknown; object?: unknown };
    try {
      ev = JSON.parse(line);
    } catch {
      throw new KubeApiError(`bad watch line: ${line.slice(0, 120)}`, undefined, 'BadWatchLine');
    }
    const type = ev?.type;
    if (type === 'ERROR') {
      const s = statusOf(ev.object);
      if (s.code === 410 || s.reason === 'Expired' || s.reason === 'Gone')
        throw new ExpiredError(s.message ?? 'resourceVersion expired');
      throw statusError(s.code, ev.object, {}, opts.now(), 'watch ERROR event');
    }
    const raw = ev?.object as { metadata?: { resourceVersion?: unknown } } | undefined;
    const next = typeof raw?.metadata?.resourceVersion === 'string' ? raw.metadata.resourceVersion : rv;
    if (type === 'BOOKMARK') return next;
    if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED')
      throw new KubeApiError(`unknown watch event type ${JSON.stringify(type)}`, undefined, 'BadWatchLine');
    const pod = trimPod(raw);
    const ns = namespaceOf(pod);
    if (ns === undefined) return next; // a namespace not configured (cluster scope): not ours
    const name = pod.metadata?.name;
    if (type === 'DELETED') {
      const byName = cache.get(ns);
      if (name && byName?.delete(name)) {
        cached -= 1;
        if (byName.size === 0) cache.delete(ns);
      }
      emit('deleted', pod, ns);
    } else if (!name) {
      emit(type === 'ADDED' ? 'added' : 'updated', pod, ns); // not cacheable; the consumer logs it as malformed
    } else {
      // As client-go's HandleDeltas: add or update by what the cache holds, whatever the event type says.
      const byName = cacheOf(ns);
      const had = byName.has(name);
      byName.set(name, pod);
      if (!had) cached += 1;
      emit(had ? 'updated' : 'added', pod, ns);
    }
    return next;
  }

  /**
   * One watch from `rv` until the server ends it; returns the last resourceVersion seen.
   * @throws ExpiredError on 410, KubeApiError/undici errors on failures.
   */
  async function watch(rv: string): Promise<{ rv: string; events: number }> {
    await opts.limiter.take(stopping.signal, 'informer');
    const timeoutSeconds = 300 + Math.floor(Math.random() * 301);
    const query = `?watch=1&resourceVersion=${encodeURIComponent(rv)}&allowWatchBookmarks=true&timeoutSeconds=${timeoutSeconds}${selector ? `&${selector}` : ''}`;
    // The server ends the stream after timeoutSeconds; a connection that silently died never would.
    const guard = new AbortController();
    const guardTimer = setTimeout(() => guard.abort(), (timeoutSeconds + 30) * 1000);
    guardTimer.unref();
    const signal = AbortSignal.any([stopping.signal, guard.signal]);
    const startedAt = monotonicNow();
    let events = 0;
    try {
      const res = await opts.http.stream(`${path}${query}`, signal);
      if (res.statusCode === 410) {
        await readErrorBody(res.body);
        throw new ExpiredError('watch answered 410 Gone');
      }
      if (res.statusCode < 200 || res.statusCode > 299)
        throw statusError(
          res.statusCode,
          await readErrorBody(res.body),
          res.headers,
          opts.now(),
          `watch answered HTTP ${res.statusCode}`,
        );
      const decoder = new StringDecoder('utf8');
      let buffered = '';
      try {
        for await (const chunk of res.body) {
          buffered += decoder.write(chunk);
          let start = 0;
          for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n', start)) {
            const line = buffered.slice(start, nl);
            start = nl + 1;
            if (line.trim() === '') continue;
            rv = applyLine(line, rv);
            events += 1;
          }
          buffered = start === 0 ? buffered : buffered.slice(start);
        }
        buffered += decoder.end();
        if (buffered.trim() !== '') {
          rv = applyLine(buffered, rv);
          events += 1;
        }
      } finally {
        res.body.destroy();
      }
    } catch (err) {
      if (guard.signal.aborted && !stopped) {
        log.warn({ timeoutSeconds }, 'watch outlived its timeout (connection lost?); re-watching');
        return { rv, events };
      }
      throw err;
    } finally {
      clearTimeout(guardTimer);
    }
    if (events === 0 && monotonicNow() - startedAt < 1000 && !stopped) {
      // client-go's reflector: a server (or proxy) closing every watch at once must not make us spin.
      throw new KubeApiError(
        'very short watch: ended within a second without any event',
        undefined,
        'ShortWatch',
      );
    }
    return { rv, events };
  }

  /** List, then watch and re-watch until an error (thrown) or stop. 410 relists at once. */
  async function listAndWatch(): Promise<void> {
    let rv = await relist();
    let expiredInARow = 0;
    while (!stopped) {
      try {
        const result = await watch(rv);
        rv = result.rv;
        expiredInARow = 0;
        log.debug({ resourceVersion: rv, events: result.events }, 'watch ended; re-watching');
      } catch (err) {
        if (!(err instanceof ExpiredError) || stopped) throw err;
        expiredInARow += 1;
        // A server answering 410 to the resourceVersion of each fresh list, again and again: back off.
        if (expiredInARow > 3) throw new KubeApiError(err.message, 410, 'Expired');
        log.info({ resourceVersion: rv, message: err.message }, 'watch expired (410 Gone); relisting');
        rv = await relist();
      }
    }
  }

  async function run(): Promise<void> {
    while (!stopped) {
      try {
        await listAndWatch();
      } catch (err) {
        if (stopped) return;
        const at = monotonicNow();
        downSinceMs ??= at;
        if (at - lastFailureAt > backoffResetMs) failures = 0;
        lastFailureAt = at;
        failures += 1;
        const backoff = backoffMs(failures, { baseMs: base, maxMs: max, jitter: true });
        const e = err as { code?: unknown; reason?: unknown; message?: unknown; retryAfterMs?: unknown };
        const retryAfter = typeof e.retryAfterMs === 'number' ? Math.min(max, e.retryAfterMs) : 0;
        const delay = Math.max(backoff, retryAfter);
        log.warn(
          {
            code: e?.code,
            reason: e?.reason,
            message: typeof e?.message === 'string' ? e.message.split('\n')[0] : undefined,
            retryInMs: Math.round(delay),
          },
          'informer stopped on an error; restarting',
        );
        await sleep(delay, stopping.signal);
        if (stopped) return;
        restarts += 1;
      }
    }
  }

  return {
    addEventHandler(handler) {
      handlers.push(handler);
    },
    async start() {
      if (!started && !stopped) {
        started = true;
        loop = run().catch((err) => log.error({ err }, 'informer loop failed'));
      }
      await firstSynced;
    },
    async stop() {
      stopped = true;
      stopping.abort();
      firstSync?.();
      await loop;
    },
    get synced() {
      return synced;
    },
    get downSinceMs() {
      return downSinceMs;
    },
    get restarts() {
      return restarts;
    },
    get(namespace, name) {
      return cache.get(namespace)?.get(name);
    },
    list(namespace) {
      const byName = cache.get(namespace);
      return byName ? [...byName.values()] : [];
    },
  };
}
