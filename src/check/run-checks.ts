/**
 * The story of `check`: with the replicas' own configuration, contact everything they use and say, line by
 * line, whether it works — the configuration, each Kubernetes context (src/check/context-checks.ts), Redis
 * (src/check/redis-checks.ts), etcd or ZooKeeper (src/leadership/etcd/checks.ts, src/leadership/zookeeper/checks.ts),
 * the running fleet (src/check/fleet-checks.ts), and with a canary namespace the end-to-end proof
 * (src/check/canary.ts). Independent parts run at once; a part that needs another that did not answer is
 * skipped, saying so. Nothing is deleted but the canaries' own pods.
 */

import { type CheckResult, firstLine, resultsOf } from '../check-result.ts';
import { selfCheckSettings } from '../cleaner/self-check.ts';
import { monotonicClock } from '../clock.ts';
import { formatDurationMs } from '../config/duration.ts';
import { type CleanerConfig, discoveryLabel, parseTarget } from '../config/schema.ts';
import { configWarnings } from '../config/warnings.ts';
import type { ClusterAccess } from '../kube/cluster-access.ts';
import type { ClusterIdentity } from '../kube/cluster-identity.ts';
import { resolveIdentities } from '../kube/context-clients.ts';
import { assertDistinctTargets } from '../kube/distinct-targets.ts';
import { createKubeHttp } from '../kube/kube-http.ts';
import { kubeconfigPath, loadClusterAccess } from '../kube/kubeconfig.ts';
import { createRateLimiter } from '../kube/rate-limiter.ts';
import { checkLeadership, describeLeadership, leadershipBackendOf } from '../leadership/open-backend.ts';
import { type TargetRef, targetLabel } from '../queue/job-identity.ts';
import { discoveredTargets } from '../status/discovered-targets.ts';
import { ANSWER_TIMEOUT_MS, checkReachable, openStateStore } from '../status/state-store.ts';
import { runCanary } from './canary.ts';
import { type ContextNeeds, checkContext, type OpenedContext } from './context-checks.ts';
import { checkFleet } from './fleet-checks.ts';
import { listPodUids } from './pod-uids.ts';
import { checkRedis, redisAddress } from './redis-checks.ts';

/** The canary to run, when asked. */
export interface CanaryRequest {
  /** `namespace` or `context:namespace`: a namespace the fleet cleans. */
  readonly target: string;
  readonly image: string;
  readonly count: number;
  /** How long a canary may take to finish, ms. */
  readonly startTimeoutMs: number;
}

/** Options of {@link runChecks}. */
export interface CheckOptions {
  /** Largest clock skew accepted between us and an API server, ms. */
  readonly maxClockSkewMs: number;
  /** How long each server has to answer one request, ms. */
  readonly timeoutMs: number;
  readonly canary?: CanaryRequest;
  /** Our wall clock, epoch ms. */
  readonly now: () => number;
  /** Aborts a canary's wait (its pods are still deleted). */
  readonly signal: AbortSignal;
  /** Told what a long check is doing (stderr in text mode). */
  readonly progress: (line: string) => void;
}

/** A configuration the checks cannot start with (a context that cannot be resolved, a bad --canary): exit 2. */
export class CheckConfigError extends Error {
  override name = 'CheckConfigError';
}

/** One context the replicas use: its access, its cluster and what the replicas need of it. */
interface ResolvedContext {
  access: ClusterAccess;
  cluster: ClusterIdentity;
  needs: ContextNeeds;
}

/** Each context once, with its cluster resolved as the replicas resolve it (src/kube/cluster-identity.ts). */
function resolveContexts(config: CleanerConfig): Map<string, ResolvedContext> {
  const path = kubeconfigPath(config.kubeconfig);
  const byConfigured = new Map<string | undefined, ClusterAccess>();
  const accessOf = (context: string | undefined) => {
    let a = byConfigured.get(context);
    if (!a) {
      a = loadClusterAccess(path, context);
      byConfigured.set(context, a);
    }
    return a;
  };
  const resolved = config.targets.map((t) => accessOf(t.context));
  const discovered = config.discover.map((d) => accessOf(d.context));
  const identities = resolveIdentities(path, [...resolved, ...discovered], config.naming);
  const clusterOf = (access: ClusterAccess) => identities.get(access.context) as ClusterIdentity;
  const out = new Map<string, ResolvedContext>();
  const entry = (access: ClusterAccess) => {
    let e = out.get(access.context);
    if (!e) {
      e = {
        access,
        cluster: clusterOf(access),
        needs: { namespaces: [], informerScope: config.informerScope },
      };
      out.set(access.context, e);
    }
    return e;
  };
  assertDistinctTargets(
    config.targets,
    resolved.map((a) => ({ context: a.context, cluster: clusterOf(a) })),
  );
  config.targets.forEach((t, i) => {
    const e = entry(resolved[i] as ClusterAccess);
    e.needs = { ...e.needs, namespaces: [...e.needs.namespaces, t.namespace] };
  });
  for (const [i] of config.discover.entries()) {
    const e = entry(discovered[i] as ClusterAccess);
    if (config.namespaceSelector !== undefined)
      e.needs = { ...e.needs, namespaceSelector: config.namespaceSelector };
  }
  return out;
}

/** The canary's target: a fixed target, or a namespace of a `context:*` context. @throws CheckConfigError. */
function canaryTarget(
  request: string,
  config: CleanerConfig,
  contexts: ReadonlyMap<string, ResolvedContext>,
): TargetRef {
  const spec = parseTarget(request);
  if (typeof spec === 'string')
    throw new CheckConfigError(`--canary ${spec}; expected namespace or context:namespace`);
  const candidates = [...contexts.entries()]
    .filter(
      ([name, e]) =>
        (spec.context === undefined || spec.context === name) &&
        (e.needs.namespaces.includes(spec.namespace) || e.needs.namespaceSelector !== undefined),
    )
    .map(([name]) => name);
  if (candidates.length === 1) {
    const context = candidates[0] as string;
    const cluster = (contexts.get(context) as ResolvedContext).cluster.name;
    return { cluster, context, namespace: spec.namespace };
  }
  const targets = [
    ...config.targets.map((t) => (t.context ? `${t.context}:${t.namespace}` : t.namespace)),
    ...config.discover.map(discoveryLabel),
  ];
  if (candidates.length === 0)
    throw new CheckConfigError(
      `--canary ${request}: not a namespace the fleet cleans (targets: ${targets.join(', ')}); name one of them`,
    );
  throw new CheckConfigError(
    `--canary ${request}: in several contexts (${candidates.join(', ')}); write context:namespace`,
  );
}

/**
 * Runs every check (see the module comment).
 * @returns the results in report order.
 * @throws KubeconfigError or CheckConfigError for a configuration the checks cannot start with (exit 2).
 */
export async function runChecks(config: CleanerConfig, opts: CheckOptions): Promise<CheckResult[]> {
  const contexts = resolveContexts(config);
  const canary = opts.canary ? canaryTarget(opts.canary.target, config, contexts) : undefined;
  const results: CheckResult[] = [configurationLine(config)];
  for (const w of configWarnings(config))
    results.push(
      resultsOf('configuration').warn('configuration.warning', `${w.field} ${w.value}: ${w.message}`),
    );

  const opened = new Map<string, OpenedContext>();
  for (const [name, { access }] of contexts)
    opened.set(name, {
      access,
      http: createKubeHttp(access, { http2: config.apiHttp2 === 'on' }),
      limiter: createRateLimiter({
        qps: config.apiQps,
        burst: config.apiBurst,
        monotonicNow: monotonicClock,
      }),
    });
  try {
    const kind = leadershipBackendOf(config);
    const backend = kind
      ? checkLeadership(config, opts.timeoutMs)
      : Promise.resolve({
          results: [
            resultsOf('leadership').warn(
              'leadership.local',
              'leadership: neither etcd nor ZooKeeper is set: one replica must clean every target alone (single-server mode)',
              { fix: 'with several replicas, set etcdEndpoints or zookeeper' },
            ),
          ],
          answered: true,
        });
    const probeTarget = [...contexts.values()].flatMap((e) =>
      e.needs.namespaces.map((namespace) => ({
        cluster: e.cluster.name,
        context: e.access.context,
        namespace,
      })),
    )[0];
    const [contextResults, redis, leadership] = await Promise.all([
      Promise.all(
        [...contexts.entries()].map(([name, e]) =>
          checkContext(opened.get(name) as OpenedContext, e.needs, opts),
        ),
      ),
      checkRedis(config, probeTarget, opts.timeoutMs),
      backend,
    ]);
    results.push(...contextResults.flat(), ...redis.results, ...leadership.results);
    const answeringContexts = new Set(
      [...contexts.keys()].filter((_name, i) => !contextResults[i]?.some((x) => x.status === 'unreachable')),
    );

    // The fleet's state is read as `status` reads it: it needs Redis and the backend answering and accepting us.
    const blocking = new Set(['redis.acl', 'etcd.auth', 'etcd.prefix', 'zookeeper.auth', 'zookeeper.root']);
    const usable = (part: { results: CheckResult[]; answered: boolean }) =>
      part.answered &&
      !part.results.some((x) => x.status === 'unreachable' || (x.status === 'fail' && blocking.has(x.id)));
    if (!usable(redis) || !usable(leadership)) {
      results.push(
        resultsOf('fleet').skip(
          'fleet.running',
          'fleet: skipped: Redis or the leadership backend did not answer, or refused this client (above)',
        ),
      );
      if (canary)
        results.push(
          resultsOf(`canary ${targetLabel(canary)}`).skip(
            'canary.create',
            'canary: skipped: Redis or the leadership backend did not answer, or refused this client (above)',
          ),
        );
      return results;
    }
    const store = openStateStore(config);
    try {
      const { graceMs } = selfCheckSettings(config.electionTtlSeconds, config.overdueGraceMs);
      let targets: TargetRef[] = [...contexts.values()].flatMap((e) =>
        e.needs.namespaces.map((namespace) => ({
          cluster: e.cluster.name,
          context: e.access.context,
          namespace,
        })),
      );
      try {
        await checkReachable(store, config);
        if (store.elections && config.discover.length > 0)
          targets = [
            ...targets,
            ...(await discoveredTargets(
              store.elections,
              [...contexts.values()]
                .filter((e) => e.needs.namespaceSelector !== undefined)
                .map((e) => ({ context: e.access.context, cluster: e.cluster.name })),
              targets,
              ANSWER_TIMEOUT_MS,
            )),
          ];
        results.push(
          ...(await checkFleet({
            store,
            targets,
            nowMs: opts.now(),
            overdueGraceMs: graceMs,
            podUids: async (t) => {
              const ctx = opened.get(t.context);
              if (!ctx || !answeringContexts.has(t.context)) return undefined;
              return listPodUids(ctx, t.namespace, config.labelSelector, opts.timeoutMs).catch(
                () => undefined,
              );
            },
          })),
        );
      } catch (err) {
        results.push(
          resultsOf('fleet').unreachable(
            'fleet.running',
            `fleet: Redis or the leadership backend stopped answering: ${firstLine(err)}`,
            {
              fix: 'check them, then run check again',
            },
          ),
        );
      }
      if (canary) {
        const ctx = opened.get(canary.context) as OpenedContext;
        if (!answeringContexts.has(canary.context))
          results.push(
            resultsOf(`canary ${targetLabel(canary)}`).skip(
              'canary.create',
              'canary: skipped: the API server did not answer',
            ),
          );
        else
          results.push(
            ...(await runCanary({
              ctx,
              target: canary,
              config,
              overdueGraceMs: graceMs,
              store,
              image: opts.canary?.image ?? '',
              count: opts.canary?.count ?? 3,
              startTimeoutMs: opts.canary?.startTimeoutMs ?? 120_000,
              requestTimeoutMs: opts.timeoutMs,
              now: opts.now,
              signal: opts.signal,
              progress: opts.progress,
            })),
          );
      }
    } finally {
      await store.close();
    }
    return results;
  } finally {
    await Promise.allSettled([...opened.values()].map((c) => c.http.close()));
  }
}

/** The configuration line: what is checked, in one sentence. */
function configurationLine(config: CleanerConfig): CheckResult {
  const targets = [
    ...config.targets.map((t) => (t.context ? `${t.context}:${t.namespace}` : t.namespace)),
    ...config.discover.map(discoveryLabel),
  ];
  const leadership = describeLeadership(config);
  return resultsOf('configuration').pass(
    'configuration.valid',
    `configuration: ${targets.length} target${targets.length === 1 ? '' : 's'} (${targets.slice(0, 6).join(', ')}${targets.length > 6 ? ', …' : ''}), ` +
      `policy ${config.policy}, retention ${formatDurationMs(config.retentionMs)}, ${config.dryRun ? 'dry run, ' : ''}` +
      `Redis ${config.redis.mode} (${redisAddress(config.redis)}), leadership ${leadership}, queue prefix ${config.queuePrefix}`,
    { details: { targets, policy: config.policy, retentionMs: config.retentionMs, dryRun: config.dryRun } },
  );
}
