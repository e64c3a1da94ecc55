/**
 * The pod informers of a replica's targets, by `informerScope`:
 *
 * - `namespace` (default): per target its own list+watch of its namespace — T lists and T watches per
 *   replica at every start, T watch connections held;
 * - `cluster`: per context one list+watch of all pods (src/kube/cluster-pod-informer.ts), each target a view
 *   of its namespace — one list and one watch per context and replica, whatever the number of targets.
 *
 * Either way every list page and watch goes through the context's rate limiter (src/kube/rate-limiter.ts).
 */
import type { Clock, MonotonicClock } from '../clock.ts';
import type { CleanerConfig } from '../config/schema.ts';
import type { Logger } from '../log.ts';
import { type ClusterPodInformer, createClusterPodInformer } from './cluster-pod-informer.ts';
import type { ContextClients } from './context-clients.ts';
import { createPodInformer, type PodInformer } from './pod-informer.ts';

/** How pods are watched: one informer per target namespace, or one per context. */
export type InformerScope = CleanerConfig['informerScope'];

/** Options of {@link createTargetInformers}. */
export interface TargetInformersOptions {
  scope: InformerScope;
  /** Server-side label selector of the lists and watches. */
  labelSelector: string;
  /** The replica's logger: informers log with `context` and `namespace` (`scope: cluster` for a shared one). */
  log: Logger;
  /** The wall clock, epoch ms (`Retry-After` dates). */
  now: Clock;
  /** The monotonic clock, ms (backoffs, down-since). */
  monotonicNow?: MonotonicClock;
  /** First restart delay of a failed list/watch, ms (default 500). */
  backoffMs?: number;
}

/**
 * Creates (does not start) the informer of each target, in the targets' order.
 * @param targets each target's namespace and its context's clients (src/kube/context-clients.ts).
 */
export function createTargetInformers(
  targets: readonly { readonly namespace: string; readonly clients: ContextClients }[],
  opts: TargetInformersOptions,
): PodInformer[] {
  const common = {
    labelSelector: opts.labelSelector,
    now: opts.now,
    monotonicNow: opts.monotonicNow,
    backoffMs: opts.backoffMs,
  };
  if (opts.scope === 'namespace') {
    return targets.map(({ namespace, clients }) =>
      createPodInformer({
        ...common,
        http: clients.http,
        limiter: clients.limiter,
        namespace,
        log: opts.log.child({ cluster: clients.cluster.name, context: clients.context, namespace }),
      }),
    );
  }
  const byContext = new Map<ContextClients, ClusterPodInformer>();
  for (const { clients } of targets) {
    if (byContext.has(clients)) continue;
    byContext.set(
      clients,
      createClusterPodInformer({
        ...common,
        http: clients.http,
        limiter: clients.limiter,
        namespaces: targets.filter((t) => t.clients === clients).map((t) => t.namespace),
        log: opts.log.child({ cluster: clients.cluster.name, context: clients.context, scope: 'cluster' }),
      }),
    );
  }
  return targets.map(
    ({ namespace, clients }) => byContext.get(clients)?.forNamespace(namespace) as PodInformer,
  );
}
