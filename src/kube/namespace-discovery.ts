/**
 * Namespace discovery: the namespaces of one context matching a label selector, listed and watched
 * (`/api/v1/namespaces?labelSelector=…`) by the same reflector as the pods (src/kube/pod-reflector.ts: paged
 * list, watch with bookmarks, 410 → relist, backoff with jitter on any other failure, every request through
 * the given rate limiter). The selector is applied server-side, so a namespace that loses its label arrives as
 * DELETED and one that gains it as ADDED (the watch cache's filtering). A namespace being deleted
 * (`deletionTimestamp` set, phase `Terminating`) no longer counts: the namespace controller deletes its pods.
 *
 * Handlers only learn that the set may have changed; the supervisor (src/replica-supervisor.ts) reads
 * {@link NamespaceDiscovery.namespaces} and decides.
 */
import type { Clock, MonotonicClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { KubeHttp } from './kube-http.ts';
import { createPodReflector } from './pod-reflector.ts';
import type { RateLimiter } from './rate-limiter.ts';

/** Options of {@link createNamespaceDiscovery}. */
export interface NamespaceDiscoveryOptions {
  /** The context's transport (not closed by the discovery). */
  http: KubeHttp;
  /** Every list page and watch takes a token from it (priority `informer`). */
  limiter: RateLimiter;
  /** Label selector of the namespaces (`namespaceSelector`), applied server-side; non-empty. */
  selector: string;
  log: Logger;
  /** The wall clock, epoch ms: `Retry-After` dates. */
  now: Clock;
  /** The monotonic clock, ms: backoffs, {@link NamespaceDiscovery.downSinceMs}. */
  monotonicNow?: MonotonicClock;
  /** First restart delay after a failure, ms (default 500; doubles up to 30 000). */
  backoffMs?: number;
}

/** A running discovery of one context. */
export interface NamespaceDiscovery {
  /** Called after every namespace event (the set may or may not have changed); must not throw. */
  onChange(handler: () => void): void;
  /** Starts listing and watching; resolves once the first list is loaded, or on stop. Never rejects. */
  start(): Promise<void>;
  /** Stops the list or watch in flight; resolves once the loop has ended. */
  stop(): Promise<void>;
  /** The names of the matching namespaces not being deleted, sorted. */
  namespaces(): string[];
  /** True once the first list has been loaded. */
  readonly synced: boolean;
  /** Since when the list+watch has been down (undefined while it runs), monotonic ms. */
  readonly downSinceMs: number | undefined;
}

/** What one discovery found, as `/api/v1/leaders` and `/readyz` show it. */
export interface DiscoveryView {
  /** The context as resolved (`in-cluster` for the service account). */
  readonly context: string;
  readonly namespaceSelector: string;
  /** The first list of namespaces has been loaded. */
  readonly synced: boolean;
  /** The matching namespaces now, sorted (the running replica follows them after the debounce). */
  readonly namespaces: readonly string[];
}

/** Creates the discovery; call `start()`. */
export function createNamespaceDiscovery(opts: NamespaceDiscoveryOptions): NamespaceDiscovery {
  const reflector = createPodReflector({
    http: opts.http,
    limiter: opts.limiter,
    namespace: undefined,
    clusterScopedPath: '/api/v1/namespaces',
    labelSelector: opts.selector,
    log: opts.log,
    now: opts.now,
    ...(opts.monotonicNow ? { monotonicNow: opts.monotonicNow } : {}),
    ...(opts.backoffMs === undefined ? {} : { backoffMs: opts.backoffMs }),
  });
  const handlers: (() => void)[] = [];
  reflector.addEventHandler(() => {
    for (const h of handlers) h();
  });
  return {
    onChange(handler) {
      handlers.push(handler);
    },
    start: () => reflector.start(),
    stop: () => reflector.stop(),
    namespaces() {
      return reflector
        .list('')
        .filter((ns) => !ns.metadata?.deletionTimestamp && ns.status?.phase !== 'Terminating')
        .map((ns) => ns.metadata?.name)
        .filter((name): name is string => typeof name === 'string' && name !== '')
        .sort();
    },
    get synced() {
      return reflector.synced;
    },
    get downSinceMs() {
      return reflector.downSinceMs;
    },
  };
}
