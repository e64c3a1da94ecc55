/**
 * A pod informer for one (context, namespace) that keeps running. client-node's informer relists on
 * 410 Gone by itself but *stops* on any other error (401/403/5xx, a failed list, a broken connection):
 * we restart it with exponential backoff and jitter, from its last resourceVersion, forever, until
 * `stop()`. The label selector is applied server-side.
 *
 * client-node's cache is keyed by namespace/name, not UID: consumers compare UIDs themselves.
 */
import { CoreV1Api, type KubeConfig, makeInformer, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../telemetry/log.ts';

/** What the informer observed. `deleted` is a DELETE event (the pod is gone from the API server). */
export type PodEvent = 'added' | 'updated' | 'deleted';

/** Options of {@link createPodInformer}. */
export interface PodInformerOptions {
  kc: KubeConfig;
  namespace: string;
  labelSelector: string;
  log: Logger;
  /** Called for every event; must not throw (errors are logged) and makes no API calls. */
  onEvent: (event: PodEvent, pod: V1Pod) => void;
  /** Called after each (re)start's initial list has completed. */
  onSynced?: () => void;
  /** First restart delay, ms (default 500); doubles up to `maxBackoffMs` (default 30 000). */
  backoffMs?: number;
  maxBackoffMs?: number;
  now: () => number;
}

/** A running informer. */
export interface PodInformer {
  /** Starts watching; resolves once the first list has been loaded (the cache is synced). Never rejects. */
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly synced: boolean;
  /** Epoch ms since when it has been down (undefined while it runs). */
  readonly downSinceMs: number | undefined;
  /** How many times it was restarted after an error. */
  readonly restarts: number;
  /** The cached pod of that name (compare its UID!), or undefined. */
  get(name: string): V1Pod | undefined;
  list(): readonly V1Pod[];
}

/** Creates the informer; call `start()`. */
export function createPodInformer(opts: PodInformerOptions): PodInformer {
  const api = opts.kc.makeApiClient(CoreV1Api);
  const path = `/api/v1/namespaces/${opts.namespace}/pods`;
  const informer = makeInformer<V1Pod>(
    opts.kc,
    path,
    () => api.listNamespacedPod({ namespace: opts.namespace, labelSelector: opts.labelSelector }),
    opts.labelSelector,
  );
  const base = opts.backoffMs ?? 500;
  const max = opts.maxBackoffMs ?? 30_000;
  let stopped = false;
  let started = false;
  let synced = false;
  let downSinceMs: number | undefined = opts.now();
  let restarts = 0;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let firstSync: (() => void) | undefined;
  const firstSynced = new Promise<void>((resolve) => {
    firstSync = resolve;
  });

  const safe = (event: PodEvent) => (pod: V1Pod) => {
    try {
      opts.onEvent(event, pod);
    } catch (err) {
      opts.log.error(
        { err, event, pod: pod?.metadata?.name, uid: pod?.metadata?.uid },
        'informer event handler failed',
      );
    }
  };
  informer.on('add', safe('added'));
  informer.on('update', safe('updated'));
  informer.on('delete', safe('deleted'));
  informer.on('error', (err: unknown) => {
    if (stopped) return;
    downSinceMs ??= opts.now();
    failures += 1;
    const delay = Math.min(max, base * 2 ** (failures - 1)) * (0.5 + Math.random() / 2);
    const e = err as { code?: number; statusCode?: number; message?: string; body?: unknown };
    opts.log.warn(
      { code: e?.code ?? e?.statusCode, message: e?.message?.split('\n')[0], retryInMs: Math.round(delay) },
      'informer stopped on an error; restarting',
    );
    timer = setTimeout(() => {
      restarts += 1;
      void run();
    }, delay);
  });

  async function run(): Promise<void> {
    if (stopped) return;
    const failuresBefore = failures;
    try {
      await informer.start();
    } catch (err) {
      // start() reports list failures through the 'error' callback; anything thrown here is unexpected.
      opts.log.error({ err }, 'informer start threw');
      return;
    }
    // start() resolves after the list and the watch request, and also after a failed list (reported
    // through 'error', which has scheduled a retry): only a start without a new error counts as synced.
    if (stopped || failures !== failuresBefore) return;
    synced = true;
    downSinceMs = undefined;
    failures = 0;
    opts.onSynced?.();
    firstSync?.();
  }

  return {
    async start() {
      if (!started) {
        started = true;
        void run();
      }
      await firstSynced;
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      firstSync?.();
      await informer.stop();
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
    get(name) {
      return informer.get(name, opts.namespace);
    },
    list() {
      return informer.list(opts.namespace);
    },
  };
}
