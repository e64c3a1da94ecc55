/**
 * The Kubernetes clients of a replica's targets: per context one transport (one connection pool), one rate
 * limiter and one pod API, shared by every target namespace of that context. Each context named by the
 * targets is loaded once, so a kubeconfig's exec credential plugin runs once per context, not per target.
 */
import type { Target } from '../config/schema.ts';
import type { ClusterAccess } from './cluster-access.ts';
import { createKubeHttp, type KubeHttp } from './kube-http.ts';
import { kubeconfigPath, loadClusterAccess } from './kubeconfig.ts';
import { createPodApi, type PodApi, type PodCallObserver } from './pod-api.ts';
import { createRateLimiter } from './rate-limiter.ts';

/** One context's clients. */
export interface ContextClients {
  /** The context's resolved name (`in-cluster` for the service account). */
  readonly context: string;
  /** The context's transport, shared by its informers and pod API. */
  readonly http: KubeHttp;
  readonly pods: PodApi;
}

/** Options of {@link openContexts}. */
export interface OpenContextsOptions {
  /** `--kubeconfig` (a `:`-separated list); undefined → `~/.kube/config`, else in-cluster. */
  kubeconfig: string | undefined;
  /** API requests per second and burst, per context. */
  apiQps: number;
  apiBurst: number;
  /** Client timeout of one GET or DELETE, ms. */
  apiTimeoutMs: number;
  /** Epoch ms. */
  now: () => number;
  /** Telemetry of a context's pod calls; optional. */
  observer?: (context: string) => PodCallObserver | undefined;
}

/**
 * Resolves every target's context — all of them before anything connects, so a bad one is a configuration
 * error — and opens each context's clients once.
 * @returns each target's namespace and its context's clients, in the targets' order, and `close()` for every
 *   connection pool.
 * @throws KubeconfigError when a context cannot be loaded (exit 2).
 */
export function openContexts(
  targets: readonly Target[],
  opts: OpenContextsOptions,
): {
  readonly targets: readonly { readonly namespace: string; readonly clients: ContextClients }[];
  close(): Promise<void>;
} {
  const path = kubeconfigPath(opts.kubeconfig);
  const loaded = new Map<string | undefined, ClusterAccess>();
  const byContext = new Map<string, ContextClients>();
  const opened = targets.map((t) => {
    let access = loaded.get(t.context);
    if (!access) {
      access = loadClusterAccess(path, t.context);
      loaded.set(t.context, access);
    }
    let c = byContext.get(access.context);
    if (!c) {
      const http = createKubeHttp(access);
      const limiter = createRateLimiter({ qps: opts.apiQps, burst: opts.apiBurst, now: opts.now });
      const pods = createPodApi({
        http,
        limiter,
        timeoutMs: opts.apiTimeoutMs,
        observer: opts.observer?.(access.context),
        now: opts.now,
      });
      c = { context: access.context, http, pods };
      byContext.set(access.context, c);
    }
    return { namespace: t.namespace, clients: c };
  });
  return {
    targets: opened,
    async close() {
      await Promise.allSettled([...byContext.values()].map((c) => c.http.close()));
    },
  };
}
