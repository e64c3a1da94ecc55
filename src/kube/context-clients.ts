/**
 * The Kubernetes clients of a replica's targets: per context one transport (one connection pool), one rate
 * limiter (for every request: GET, DELETE, LIST, WATCH) and one pod API, shared by every target namespace of
 * that context. Each context named by the
 * targets is loaded once, so a kubeconfig's exec credential plugin runs once per context, not per target.
 */
import { type Clock, type MonotonicClock, monotonicClock } from '../clock.ts';
import type { CleanerConfig } from '../config/schema.ts';
import type { ClusterAccess } from './cluster-access.ts';
import {
  type ClusterIdentity,
  clusterIdentity,
  explicitClusterName,
  namingConflict,
} from './cluster-identity.ts';
import { assertDistinctTargets } from './distinct-targets.ts';
import { createKubeHttp, type KubeHttp } from './kube-http.ts';
import { KubeconfigError, kubeconfigPath, loadClusterAccess, loadClusterEndpoint } from './kubeconfig.ts';
import { createPodApi, type PodApi, type PodCallObserver } from './pod-api.ts';
import { createRateLimiter, type RateLimiter } from './rate-limiter.ts';
import { createServerClock, type ServerClock } from './server-clock.ts';

/** One context's clients. */
export interface ContextClients {
  /** The context's resolved name (`in-cluster` for the service account). */
  readonly context: string;
  /** The cluster it reaches (src/kube/cluster-identity.ts): every shared name of its targets has its name. */
  readonly cluster: ClusterIdentity;
  /** The context's transport, shared by its informers and pod API. */
  readonly http: KubeHttp;
  /**
   * The context's API rate limit (`apiQps`, `apiBurst`), shared by its pod API (GET, DELETE) and its
   * informers (LIST, WATCH): src/kube/rate-limiter.ts.
   */
  readonly limiter: RateLimiter;
  readonly pods: PodApi;
  /** The context's API server clock, as its answers' `Date` headers show it: judges when a cleanup is due. */
  readonly serverClock: ServerClock;
}

/**
 * What {@link openContexts} reads of the configuration: the targets, `kubeconfig` (a `:`-separated list;
 * undefined → `~/.kube/config`, else in-cluster), the API rate limit per context (`apiQps` requests/s,
 * `apiBurst`), `apiTimeoutMs` (client timeout of one GET or DELETE, ms) and `apiHttp2` (`on`: offer HTTP/2,
 * src/kube/kube-http.ts; undefined: `off`).
 */
export type ContextsConfig = Pick<
  CleanerConfig,
  'targets' | 'kubeconfig' | 'apiQps' | 'apiBurst' | 'apiTimeoutMs'
> &
  Partial<Pick<CleanerConfig, 'apiHttp2' | 'naming'>>;

/** Dependencies of {@link openContexts}. */
export interface OpenContextsDeps {
  /** The wall clock, epoch ms: `Retry-After` dates and exec token expiry times. */
  now: Clock;
  /**
   * The monotonic clock, ms: the rate limiter, token-file re-reads, the exec plugin's backoff (default the
   * system's monotonic clock).
   */
  monotonicNow?: MonotonicClock;
  /** Telemetry of a context's pod calls (`cluster`: the name of the cluster it reaches); optional. */
  observer?: (context: string, cluster: string) => PodCallObserver | undefined;
}

/**
 * Resolves every target's context and the cluster it reaches — all of them before anything connects, so a bad
 * one is a configuration error — and opens each context's clients once.
 * @returns each target's namespace and its context's clients, in the targets' order, and `close()` for every
 *   connection pool.
 * @throws KubeconfigError when a context cannot be loaded or `clusterName` and `clusterNames` disagree, or
 *   DuplicateTargetError (a KubeconfigError) when two targets resolve to one (cluster, namespace) (exit 2).
 */
export function openContexts(
  config: ContextsConfig,
  deps: OpenContextsDeps,
): {
  readonly targets: readonly { readonly namespace: string; readonly clients: ContextClients }[];
  close(): Promise<void>;
} {
  const path = kubeconfigPath(config.kubeconfig);
  const clocks = { now: deps.now, monotonicNow: deps.monotonicNow ?? monotonicClock };
  const loaded = new Map<string | undefined, ClusterAccess>();
  const byContext = new Map<string, ContextClients>();
  const accesses = config.targets.map((t) => {
    let access = loaded.get(t.context);
    if (!access) {
      access = loadClusterAccess(path, t.context, clocks);
      loaded.set(t.context, access);
    }
    return access;
  });
  const identities = resolveIdentities(path, accesses, config.naming);
  assertDistinctTargets(
    config.targets,
    accesses.map((a) => ({ context: a.context, cluster: identities.get(a.context) as ClusterIdentity })),
  );
  const opened = config.targets.map((t, i) => {
    const access = accesses[i] as ClusterAccess;
    let c = byContext.get(access.context);
    if (!c) {
      const serverClock = createServerClock(clocks);
      const http = createKubeHttp(access, { serverClock, http2: config.apiHttp2 === 'on' });
      const limiter = createRateLimiter({
        qps: config.apiQps,
        burst: config.apiBurst,
        monotonicNow: clocks.monotonicNow,
      });
      const pods = createPodApi({
        http,
        limiter,
        timeoutMs: config.apiTimeoutMs,
        observer: deps.observer?.(access.context, identities.get(access.context)?.name ?? ''),
        now: deps.now,
      });
      const cluster = identities.get(access.context) as ClusterIdentity;
      c = { context: access.context, cluster, http, limiter, pods, serverClock };
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

/**
 * The identity of each context's cluster (src/kube/cluster-identity.ts), by resolved context name.
 * `clusterName` names the default context's cluster: the default context is resolved only when it is set.
 * @throws KubeconfigError when the default context cannot be resolved for `clusterName`, or `clusterName` and
 *   `clusterNames` name its cluster differently.
 */
export function resolveIdentities(
  path: string | undefined,
  accesses: readonly Pick<ClusterAccess, 'context' | 'server' | 'tls'>[],
  naming: CleanerConfig['naming'] = { clusterName: undefined, clusterNames: [] },
): Map<string, ClusterIdentity> {
  let defaultContext: string | undefined;
  if (naming.clusterName !== undefined) {
    try {
      defaultContext = loadClusterEndpoint(path, undefined).context;
    } catch (err) {
      throw new KubeconfigError(
        `clusterName (--cluster-name, SDC_CLUSTER_NAME) names the cluster of the default context, which cannot be resolved (${(err as Error).message}); name contexts with clusterNames (context=name) instead`,
      );
    }
    const conflict = namingConflict(naming, defaultContext);
    if (conflict) throw new KubeconfigError(conflict);
  }
  const out = new Map<string, ClusterIdentity>();
  for (const a of accesses)
    if (!out.has(a.context))
      out.set(a.context, clusterIdentity(a, explicitClusterName(a.context, naming, defaultContext)));
  return out;
}
