/**
 * A replica whose targets include discovered namespaces (`context:*` targets with `namespaceSelector`): per
 * such context one namespace discovery (src/kube/namespace-discovery.ts: one list+watch of namespaces, with
 * its own transport and rate limiter, since it outlives the replicas it starts), and one running
 * {@link startReplica} for the fixed targets plus the namespaces matched now. When the matched set changes
 * (debounced: a burst of namespace events makes one change), the running replica is stopped as on SIGTERM —
 * every leadership resigned at once, in-flight jobs back to the queue — and one is started for the new set.
 * So a namespace that stops matching is no longer led nor cleaned by this replica; its queue stays in Redis
 * and its pending jobs run when it matches again. The price is a pause of cleaning for every target of this
 * replica on each change of the set (docs/deployment.md "Discovered namespaces").
 */
import type { Clock, MonotonicClock } from './clock.ts';
import type { CleanerConfig, TargetSpec } from './config/schema.ts';
import { createKubeHttp, type KubeHttp } from './kube/kube-http.ts';
import { kubeconfigPath, loadClusterAccess } from './kube/kubeconfig.ts';
import {
  createNamespaceDiscovery,
  type DiscoveryView,
  type NamespaceDiscovery,
} from './kube/namespace-discovery.ts';
import { createRateLimiter } from './kube/rate-limiter.ts';
import type { Logger } from './log.ts';
import { type Replica, startReplica } from './replica.ts';
import type { Telemetry } from './telemetry/telemetry.ts';

/** A replica that follows its discovered namespaces: the running {@link Replica}'s view, read at call time. */
export interface SupervisedReplica extends Replica {
  /** Per `context:*` target, what its discovery found. */
  discovery(): readonly DiscoveryView[];
  /** How many times the replica was restarted for a new set of targets. */
  readonly restarts: number;
}

/** Dependencies of {@link startReplicaSupervisor}: those of {@link startReplica}, and the debounce. */
export interface SupervisorDeps {
  log: Logger;
  /** The wall clock, epoch ms (see {@link startReplica}). */
  now: Clock;
  /** The monotonic clock, ms: the debounce, the pause measured, backoffs. */
  monotonicNow: MonotonicClock;
  telemetry?: Telemetry;
  /** Quiet time after a namespace event before the set is compared and the replica restarted, ms (default 2000). */
  debounceMs?: number;
  /** Longest wait for the first list of namespaces before the first replica starts, ms (default 10 000). */
  firstListTimeoutMs?: number;
}

/** The key of a set of targets, to compare two sets. */
const keyOf = (targets: readonly TargetSpec[]): string =>
  targets
    .map((t) => `${t.context ?? ''}\u0000${t.namespace}`)
    .sort()
    .join('\n');
const labelOf = (t: TargetSpec): string => `${t.context ?? '(current)'}:${t.namespace}`;

/**
 * Starts the discoveries, then the replica for the fixed targets and the namespaces matched within
 * `firstListTimeoutMs` (zero matched is fine: the replica runs with what is fixed, perhaps nothing).
 * @throws KubeconfigError when a context cannot be loaded (a configuration error, exit 2).
 */
export async function startReplicaSupervisor(
  config: CleanerConfig,
  deps: SupervisorDeps,
): Promise<SupervisedReplica> {
  const { log, monotonicNow } = deps;
  const debounceMs = deps.debounceMs ?? 2000;
  const selector = config.namespaceSelector ?? '';
  const path = kubeconfigPath(config.kubeconfig);
  const opened: {
    spec: TargetSpec['context'];
    context: string;
    http: KubeHttp;
    discovery: NamespaceDiscovery;
  }[] = config.discover.map((d) => {
    const access = loadClusterAccess(path, d.context, { now: deps.now, monotonicNow });
    const http = createKubeHttp(access);
    const limiter = createRateLimiter({ qps: config.apiQps, burst: config.apiBurst, monotonicNow });
    const discovery = createNamespaceDiscovery({
      http,
      limiter,
      selector,
      log: log.child({ context: access.context, discovery: 'namespaces' }),
      now: deps.now,
      monotonicNow,
    });
    return { spec: d.context, context: access.context, http, discovery };
  });

  // Compared by resolved context name: `spark` (current context kind-a) and a discovered kind-a:spark are one
  // target, cleaned once, as the fixed one.
  const resolved = new Map<string | undefined, string>(opened.map((o) => [o.spec, o.context]));
  for (const t of config.targets)
    if (!resolved.has(t.context))
      resolved.set(t.context, loadClusterAccess(path, t.context, { now: deps.now, monotonicNow }).context);
  const fixed = new Set(config.targets.map((t) => `${resolved.get(t.context)}\u0000${t.namespace}`));
  /** The fixed targets, then the discovered namespaces not already fixed. */
  const desired = (): TargetSpec[] => [
    ...config.targets,
    ...opened.flatMap((o) =>
      o.discovery
        .namespaces()
        .filter((ns) => !fixed.has(`${o.context}\u0000${ns}`))
        .map((namespace) => ({ context: o.spec, namespace })),
    ),
  ];

  const firstList = Promise.all(opened.map((o) => o.discovery.start()));
  const firstListTimeoutMs = deps.firstListTimeoutMs ?? 10_000;
  let timer: NodeJS.Timeout | undefined;
  const listed = await Promise.race([
    firstList.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), firstListTimeoutMs);
    }),
  ]);
  clearTimeout(timer);
  if (!listed)
    log.warn(
      { waitedMs: firstListTimeoutMs },
      'namespaces not listed yet (API server down, or no list/watch on namespaces: docs/deployment.md "Discovered namespaces"); starting with the targets known, following the others once listed',
    );

  let targets = desired();
  let current: Replica = await startReplica({ ...config, targets }, deps).catch(async (err) => {
    await Promise.allSettled(
      opened.map(async (o) => {
        await o.discovery.stop();
        await o.http.close();
      }),
    );
    throw err;
  });
  logTargets(log, targets, opened);

  let stopping: Promise<void> | undefined;
  let restarts = 0;
  let debounce: NodeJS.Timeout | undefined;
  let applying: Promise<void> = Promise.resolve();

  /** Restarts the replica when the set changed; retried after a failure. Runs one at a time. */
  const apply = async (): Promise<void> => {
    const next = desired();
    if (stopping || keyOf(next) === keyOf(targets)) return;
    const before = new Set(targets.map(labelOf));
    const after = new Set(next.map(labelOf));
    const added = [...after].filter((t) => !before.has(t));
    const removed = [...before].filter((t) => !after.has(t));
    log.info(
      { added, removed },
      'discovered namespaces changed: restarting the replica for the new set (leaderships resigned)',
    );
    const startedAt = monotonicNow();
    await current.stop();
    try {
      current = await startReplica({ ...config, targets: next }, deps);
    } catch (err) {
      // Not left idle: back to the set that ran (if that fails too, none), and the new one tried again later.
      log.error(
        { err },
        'replica could not start for the new set of targets; back to the previous set, retrying in 5 s',
      );
      current = await startReplica({ ...config, targets }, deps).catch((again: unknown) => {
        log.error({ err: again }, 'replica could not start for the previous set either');
        targets = [];
        return current;
      });
      schedule(5000);
      return;
    }
    targets = next;
    restarts += 1;
    log.info(
      { added, removed, pauseMs: Math.round(monotonicNow() - startedAt), targets: targets.map(labelOf) },
      'replica restarted for the discovered namespaces',
    );
    logTargets(log, targets, opened);
  };
  const schedule = (ms: number) => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      applying = applying.then(apply).catch((err) => log.error({ err }, 'discovery restart failed'));
    }, ms);
  };
  for (const o of opened) o.discovery.onChange(() => schedule(debounceMs));
  // A change between the first list and the replica's start (or a first list that came late).
  if (keyOf(desired()) !== keyOf(targets)) schedule(debounceMs);
  else void firstList.then(() => schedule(debounceMs));

  return {
    replicaId: config.replicaId,
    get cleaners() {
      return current.cleaners;
    },
    get redis() {
      return current.redis;
    },
    get leadershipBackend() {
      return current.leadershipBackend;
    },
    get elections() {
      return current.elections;
    },
    get clusters() {
      return current.clusters;
    },
    leadershipAnswers: (timeoutMs: number) =>
      current.leadershipAnswers?.(timeoutMs) ?? Promise.resolve(false),
    leadershipBalance: () => current.leadershipBalance(),
    get restarts() {
      return restarts;
    },
    discovery: () =>
      opened.map((o) => ({
        context: o.context,
        namespaceSelector: selector,
        synced: o.discovery.synced,
        namespaces: o.discovery.namespaces(),
      })),
    stop() {
      stopping ??= (async () => {
        clearTimeout(debounce);
        await Promise.allSettled(opened.map((o) => o.discovery.stop()));
        await applying;
        await current.stop();
        await Promise.allSettled(opened.map((o) => o.http.close()));
      })();
      return stopping;
    },
  };
}

/** One line per start: which namespaces are targets now (none matched is said, not an error). */
function logTargets(
  log: Logger,
  targets: readonly TargetSpec[],
  opened: readonly { context: string; discovery: NamespaceDiscovery }[],
): void {
  const discovered = Object.fromEntries(opened.map((o) => [o.context, o.discovery.namespaces()]));
  if (targets.length === 0)
    log.info({ discovered }, 'no target: no namespace matches namespaceSelector yet; waiting for one');
  else log.info({ discovered, targets: targets.map(labelOf) }, 'targets of this replica');
}
