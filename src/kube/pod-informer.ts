/**
 * A target's pod informer: the pods of one (context, namespace) as its cleaner sees them, whatever watches
 * them underneath. Two kinds implement {@link PodInformer}:
 *
 * - {@link createPodInformer} (`informerScope: namespace`, the default): its own list+watch of the namespace
 *   (src/kube/pod-reflector.ts), needing list/watch on pods in that namespace only;
 * - a namespace's view of its context's one cluster-scope informer (`informerScope: cluster`,
 *   src/kube/cluster-pod-informer.ts).
 */
import type { DriverPod } from './driver-pod.ts';
import { createPodReflector, type PodEvent, type PodReflectorOptions } from './pod-reflector.ts';

export type { PodEvent } from './pod-reflector.ts';

/** Told about every event; must not throw (errors are logged) and makes no API calls. */
export type PodEventHandler = (event: PodEvent, pod: DriverPod) => void;

/** A running informer of one namespace. */
export interface PodInformer {
  /**
   * Subscribes `handler` to every event from now on, as client-go's `AddEventHandler`: add handlers before
   * `start()` to see the first list.
   */
  addEventHandler(handler: PodEventHandler): void;
  /** Starts watching; resolves once the first list has been loaded (the cache is synced). Never rejects. */
  start(): Promise<void>;
  /** Aborts the list or watch in flight and stops restarting; resolves once the loop has ended. */
  stop(): Promise<void>;
  /** True once the first list has been loaded (stays true: the cache stays usable while it restarts). */
  readonly synced: boolean;
  /**
   * Since when it has been down (undefined while it runs), on the informer's monotonic clock (ms, not epoch):
   * compare it with a reading of that clock.
   */
  readonly downSinceMs: number | undefined;
  /** How many times it was restarted after an error (410 relists are not counted). */
  readonly restarts: number;
  /** The cached pod of that name (compare its UID!), or undefined. */
  get(name: string): DriverPod | undefined;
  list(): readonly DriverPod[];
}

/** Options of {@link createPodInformer}: a reflector's, for one namespace. */
export type PodInformerOptions = Omit<PodReflectorOptions, 'namespace' | 'acceptNamespace'> & {
  namespace: string;
};

/** Creates the informer of one namespace, with its own list and watch; call `start()`. */
export function createPodInformer(opts: PodInformerOptions): PodInformer {
  const { namespace } = opts;
  const reflector = createPodReflector(opts);
  return {
    addEventHandler(handler) {
      reflector.addEventHandler((event, pod) => handler(event, pod));
    },
    start: () => reflector.start(),
    stop: () => reflector.stop(),
    get synced() {
      return reflector.synced;
    },
    get downSinceMs() {
      return reflector.downSinceMs;
    },
    get restarts() {
      return reflector.restarts;
    },
    get: (name) => reflector.get(namespace, name),
    list: () => reflector.list(namespace),
  };
}
