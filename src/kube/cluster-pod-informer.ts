/**
 * One pod informer for a whole context (`informerScope: cluster`): a single list+watch of
 * `/api/v1/pods?labelSelector=…` (src/kube/pod-reflector.ts) fanned out to the context's targets by
 * `metadata.namespace`, instead of one list+watch per target namespace. Pods of namespaces that are not
 * targets are dropped as they arrive (never cached, never reported); they still cross the wire, which is
 * the cost of this scope when the selector also matches pods elsewhere in the cluster.
 *
 * Each target gets a view ({@link PodInformer}, what its cleaner already uses): its namespace's events and
 * cache, with synced/down/restarts state taken from the shared reflector — the one list is every
 * namespace's first list, one 410 relists once for all of them, one failure takes them all down together.
 *
 * Needs `list` and `watch` on pods cluster-wide (a ClusterRole); the cleanup's `get` and `delete` stay
 * namespaced (docs/deployment.md, "Many target namespaces").
 */
import type { DriverPod } from './driver-pod.ts';
import type { PodEventHandler, PodInformer } from './pod-informer.ts';
import { createPodReflector, type PodReflectorOptions } from './pod-reflector.ts';

/** Options of {@link createClusterPodInformer}: a reflector's, with the namespaces to serve. */
export type ClusterPodInformerOptions = Omit<PodReflectorOptions, 'namespace' | 'acceptNamespace'> & {
  /** The context's target namespaces: the only ones whose pods are kept. */
  namespaces: readonly string[];
};

/** A context's shared informer; it stops once every view it handed out has been stopped. */
export interface ClusterPodInformer {
  /**
   * The view of one namespace (the same view for the same namespace).
   * @throws Error when `namespace` is not one of the options' `namespaces`.
   */
  forNamespace(namespace: string): PodInformer;
}

interface View {
  readonly handlers: PodEventHandler[];
  stopped: boolean;
  readonly informer: PodInformer;
}

/** Creates the shared informer; nothing is requested until a view's `start()`. */
export function createClusterPodInformer(opts: ClusterPodInformerOptions): ClusterPodInformer {
  const namespaces = new Set(opts.namespaces);
  const log = opts.log;
  const reflector = createPodReflector({
    ...opts,
    namespace: undefined,
    acceptNamespace: (ns) => namespaces.has(ns),
  });
  const views = new Map<string, View>();

  reflector.addEventHandler((event, pod, namespace) => {
    const view = views.get(namespace);
    if (!view || view.stopped) return;
    for (const handler of view.handlers) {
      try {
        handler(event, pod);
      } catch (err) {
        log.error(
          { err, event, namespace, pod: pod.metadata?.name, uid: pod.metadata?.uid },
          'informer event handler failed',
        );
      }
    }
  });

  function createView(namespace: string): View {
    let stopView: (() => void) | undefined;
    const viewStopped = new Promise<void>((resolve) => {
      stopView = resolve;
    });
    const view: View = {
      handlers: [],
      stopped: false,
      informer: {
        addEventHandler(handler) {
          view.handlers.push(handler);
        },
        async start() {
          if (view.stopped) return;
          await Promise.race([reflector.start(), viewStopped]);
        },
        async stop() {
          if (!view.stopped) {
            view.stopped = true;
            stopView?.();
          }
          if ([...views.values()].every((v) => v.stopped)) await reflector.stop();
        },
        get synced() {
          return reflector.synced;
        },
        get downSinceMs() {
          return reflector.downSinceMs;
        },
        get restarts() {
          return reflector.restarts;
        },
        get: (name: string): DriverPod | undefined => reflector.get(namespace, name),
        list: () => reflector.list(namespace),
      },
    };
    return view;
  }

  return {
    forNamespace(namespace) {
      if (!namespaces.has(namespace))
        throw new Error(`namespace ${namespace} is not one of this cluster informer's namespaces`);
      let view = views.get(namespace);
      if (!view) {
        view = createView(namespace);
        views.set(namespace, view);
      }
      return view.informer;
    },
  };
}
