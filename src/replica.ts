/**
 * One replica process: wires the configuration into a {@link TargetCleaner} per target (cluster, namespace:
 * src/queue/job-identity.ts), sharing two Redis
 * connections (BullMQ's and the queues' own commands; each Worker of a target it leads adds its blocking one),
 * one leadership backend session — an etcd lease or a ZooKeeper session — and one view for all elections
 * (src/leadership/leadership-group.ts), and per context one connection pool (src/kube/kube-http.ts), rate
 * limiter and pod API (and, with `informerScope: cluster`, one pod informer: src/kube/target-informers.ts).
 *
 * Shutdown (SIGTERM) resigns every leadership first and at once (the session lease is revoked), so other
 * replicas take over within a second; in-flight jobs are aborted before their DELETE and go back to the queue; nothing is deleted
 * early.
 */
import { cleanupDriverPod } from '../workers/cleanup-driver-pod.ts';
import { backoffMs } from './backoff.ts';
import { createClusterClaims } from './cleaner/cluster-claims.ts';
import { selfCheckSettings } from './cleaner/self-check.ts';
import { createTargetCleaner, type TargetCleaner } from './cleaner/target-cleaner.ts';
import { type PreviousReleaseWait, targetGates } from './cleaner/target-gates.ts';
import type { Clock, MonotonicClock } from './clock.ts';
import { parseLabelSelector } from './config/label-selector.ts';
import type { CleanerConfig } from './config/schema.ts';
import { FAILOVER_TIMERS } from './failover-timers.ts';
import { type ClusterIdentity, fingerprintsNow } from './kube/cluster-identity.ts';
import { openContexts } from './kube/context-clients.ts';
import { kubeconfigPath, loadClusterEndpoint } from './kube/kubeconfig.ts';
import type { PodInformer } from './kube/pod-informer.ts';
import { createTargetInformers } from './kube/target-informers.ts';
import { clustersLine, parseMemberValue } from './leadership/assignment.ts';
import type { ElectionReader, LeadershipBackendKind } from './leadership/election-reader.ts';
import { createGatedLeadership } from './leadership/gated-leadership.ts';
import type { LeadershipBalance } from './leadership/leadership-group.ts';
import { createLocalLeadership } from './leadership/local-leadership.ts';
import { leadershipMarker, openReplicaLeadership } from './leadership/open-backend.ts';
import { previousReleaseWorkerGates } from './leadership/previous-release-gate.ts';
import type { Logger } from './log.ts';
import { createCleanupQueue } from './queue/cleanup-queue.ts';
import { createDataMarker } from './queue/data-marker.ts';
import {
  dataMarkerKey,
  membershipScope,
  type TargetRef,
  targetKey,
  targetLabel,
} from './queue/job-identity.ts';
import {
  createPreviousReleaseWorkers,
  type PreviousReleaseWorkers,
} from './queue/previous-release-workers.ts';
import { checkRedisAccess, redisRefusal } from './queue/redis-access-check.ts';
import { createRedisClient, duplicateClient, type RedisClient } from './queue/redis-client.ts';
import { watchRedisOutage } from './queue/redis-outage.ts';
import type { Telemetry } from './telemetry/telemetry.ts';
import { VERSION } from './version.ts';

/** A running replica. */
export interface Replica {
  readonly replicaId: string;
  readonly cleaners: readonly TargetCleaner[];
  readonly redis: RedisClient;
  /** The leadership backend's elections (for /api/v1/explain); undefined with local leadership. */
  readonly elections: ElectionReader | undefined;
  /** The leadership backend this replica elects through; undefined with local leadership. */
  readonly leadershipBackend: LeadershipBackendKind | undefined;
  /** Whether the leadership backend answers now, within `timeoutMs` (ms); absent with local leadership. */
  leadershipAnswers?(timeoutMs: number): Promise<boolean>;
  /** The clusters of its targets (src/kube/cluster-identity.ts), one per name. */
  readonly clusters: readonly ClusterIdentity[];
  /** How leaderships are balanced over the live replicas; undefined with local leadership. */
  leadershipBalance(): LeadershipBalance | undefined;
  /** Resigns all leaderships, stops workers and informers, closes connections. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a replica.
 * @param deps.now the wall clock, epoch ms: only for deadlines from Kubernetes timestamps (and Retry-After
 *   dates, token expiry times)
 * @param deps.monotonicNow the monotonic clock, ms: every interval (lease freshness, the watchdog, the API
 *   rate limiter, backoffs); src/clock.ts
 * @throws KubeconfigError when a target's context cannot be loaded, LeadershipAccessError or RedisAccessError
 *   when the leadership backend or Redis refuses the configured credentials (configuration errors).
 */
export async function startReplica(
  config: CleanerConfig,
  deps: { log: Logger; now: Clock; monotonicNow: MonotonicClock; telemetry?: Telemetry },
): Promise<Replica> {
  const { log, now, monotonicNow } = deps;
  const selector = parseLabelSelector(config.labelSelector);

  // Every context resolved first: a bad context is a configuration error, before anything connects.
  const contexts = openContexts(config, {
    now,
    monotonicNow,
    observer: (context, cluster) => deps.telemetry?.podCalls(context, cluster),
  });
  const targets = contexts.targets.map(({ namespace, clients }) => ({
    ref: { cluster: clients.cluster.name, context: clients.context, namespace } satisfies TargetRef,
    clients,
  }));
  // The clusters served, one per name, with a context that reaches each (to re-read its CA).
  const clusters = new Map<string, { identity: ClusterIdentity; context: string }>();
  for (const { clients } of contexts.targets)
    if (!clusters.has(clients.cluster.name))
      clusters.set(clients.cluster.name, { identity: clients.cluster, context: clients.context });
  // Replicas register, and balance, with the members of the same clusters (src/queue/job-identity.ts).
  const scope = membershipScope(clusters.keys());
  const path = kubeconfigPath(config.kubeconfig);

  // The leadership backend (src/leadership/open-backend.ts chooses it) must accept our credentials before
  // anything connects: a refusal is a configuration error (LeadershipAccessError, exit 2), while a backend that
  // does not answer is waited for like any outage. One session, one view and a balancer for all targets.
  let lead: Awaited<ReturnType<typeof openReplicaLeadership>>;
  try {
    lead = await openReplicaLeadership(config, {
      replicaId: config.replicaId,
      log,
      monotonicNow,
      scope,
      clusters: () => clusterClaimsLine(),
    });
  } catch (err) {
    await contexts.close();
    throw err;
  }
  const leaderships = lead?.group;

  // One server, Sentinel or Cluster: the factory knows the shape, nothing below asks (src/queue/redis-client.ts).
  const redis = createRedisClient(config.redis, {
    maxRetriesPerRequest: null, // BullMQ requirement: commands wait for the connection instead of failing
    connectionName: `sdc:${config.replicaId}`,
    // ioredis counts reconnect attempts from 1: 200 ms, 400 ms, … at most 5 s, no jitter.
    retryStrategy: (times) => backoffMs(times + 1, { baseMs: 100, maxMs: 5000 }),
  });
  // One line per outage, and one more when its kind changes: Redis refusing our credentials is named as such.
  let redisDownLogged: 'unreachable' | 'refused' | undefined;
  let redisChecked = false;
  redis.on('error', (err) => {
    const refusal = redisRefusal(err, config.redis);
    if (refusal && !redisChecked) return; // at start: checkRedisAccess reports it, and the start stops
    const kind = refusal ? 'refused' : 'unreachable';
    if (redisDownLogged !== kind) {
      if (refusal)
        log.warn(
          { err: { message: err.message }, setting: refusal.setting, fix: refusal.fix },
          'redis refused the credentials; retrying',
        );
      else log.warn({ err: { message: err.message } }, 'redis unreachable; retrying');
    }
    redisDownLogged = kind;
  });
  const redisOutage = watchRedisOutage(redis, monotonicNow);
  redis.on('ready', () => {
    if (redisDownLogged) log.info('redis reachable again');
    redisDownLogged = undefined;
    void checkEvictionPolicy(redis, log);
  });
  // Refused at start (wrong password, none, a database the server lacks): a configuration error, exit 2.
  try {
    await checkRedisAccess(redis, config.redis);
    redisChecked = true;
  } catch (err) {
    redis.disconnect();
    lead?.close();
    await contexts.close();
    throw err;
  }
  // The queues' own commands (enqueue probes, tombstones): one connection for every target, without BullMQ's
  // scripts on it (src/queue/cleanup-queue.ts). With `redis` (BullMQ's Queues and the Workers' commands, shared)
  // that makes two per replica; the only per-target connections are the blocking ones of the Workers of the
  // targets this replica leads: clients = T + 2R across the fleet (docs/sizing.md).
  const commands = duplicateClient(redis, `sdc:${config.replicaId}:commands`);
  commands.on('error', () => undefined); // `redis`'s listener reports Redis outages
  let stopping: Promise<void> | undefined;
  // ioredis can end a connection for good on its own (seen in Sentinel mode while following a failover: every
  // later command fails with "Connection is closed"): outside a shutdown, connect it again.
  for (const [conn, name] of [
    [redis, 'queues'],
    [commands, 'commands'],
  ] as const) {
    conn.on('end', () => {
      if (stopping) return;
      log.warn({ connection: name }, 'redis connection ended by the client; connecting again');
      setTimeout(() => {
        if (!stopping) conn.connect().catch(() => undefined);
      }, 1000).unref();
    });
  }

  // Each cluster name this replica serves, claimed in Redis (and in its membership value) with its
  // cluster's fingerprints: a name another cluster claims is refused (src/cleaner/cluster-claims.ts).
  const rereads = new Map(
    [...clusters.values()].map(({ identity, context }) => [
      identity.name,
      fingerprintsNow(identity, () => loadClusterEndpoint(path, context), monotonicNow),
    ]),
  );
  const claims = createClusterClaims({
    redis: commands,
    prefix: config.queuePrefix,
    clusters: [...clusters.values()].map((c) => c.identity),
    fingerprintsNow: (c) => rereads.get(c.name)?.() ?? c.fingerprints,
    members: () => memberClaims(),
    leadership: leadershipMarker(config),
    namespaces: (name) => targets.filter((t) => t.ref.cluster === name).map((t) => t.ref.namespace),
    log,
  });
  const clusterClaimsLine = () =>
    clustersLine(
      Object.fromEntries(
        [...clusters.values()].map(({ identity }) => [identity.name, claims.fingerprints(identity)]),
      ),
    );

  if (!lead)
    log.warn(
      'no leadership backend (etcdEndpoints, zookeeper): single-server mode, this replica leads every target',
    );
  /** The claims in the live members' values of this replica's scope (parsed once per value). */
  const parsedClaims = new Map<string, ReturnType<typeof parseMemberValue>['clusters']>();
  function memberClaims() {
    const view = leaderships?.backend.view;
    if (!view) return [];
    return view.members().map((replica) => {
      const raw = view.memberValue(replica) ?? '';
      let c = parsedClaims.get(raw);
      if (!c) {
        if (parsedClaims.size > 256) parsedClaims.clear();
        c = parseMemberValue(raw).clusters;
        parsedClaims.set(raw, c);
      }
      return { replica, clusters: c };
    });
  }
  let claimsLook: NodeJS.Immediate | undefined;
  leaderships?.backend.view.onChange(() => {
    claimsLook ??= setImmediate(() => {
      claimsLook = undefined;
      claims.membersChanged();
    });
  });
  // Release 0.1.0 named targets by context: while one of its replicas may consume, this version's leader
  // waits (src/leadership/previous-release-gate.ts). On etcd, 0.1.0 elected there too: its old election. In
  // single-server mode and on ZooKeeper (0.1.0 has none: beside a ZooKeeper fleet, a 0.1.0 replica of a
  // rollback runs in single-server mode), its old queue's workers.
  let workers: PreviousReleaseWorkers | undefined;
  let previousRelease: PreviousReleaseWait;
  if (lead?.previousRelease) previousRelease = { kind: 'election', ...lead.previousRelease };
  else {
    workers = createPreviousReleaseWorkers({ redis: commands, prefix: config.queuePrefix, log });
    previousRelease = { kind: 'queue-workers', ...previousReleaseWorkerGates(workers) };
  }
  const tlogOf = (ref: TargetRef) =>
    log.child({ cluster: ref.cluster, context: ref.context, namespace: ref.namespace });
  // Per target its own informer, or (informerScope: cluster) a view of its context's one shared informer;
  // every list and watch through the context's rate limiter.
  const informers = createTargetInformers(contexts.targets, {
    scope: config.informerScope,
    labelSelector: config.labelSelector,
    log,
    now,
    monotonicNow,
  });
  const cleaners: TargetCleaner[] = [];
  for (const [i, { ref, clients }] of targets.entries()) {
    const tlog = tlogOf(ref);
    const queue = createCleanupQueue({
      target: ref,
      connection: redis,
      commands,
      prefix: config.queuePrefix,
      tombstoneTtlMs: config.tombstoneTtlMs,
      log: tlog,
      now,
    });
    const leadership = createGatedLeadership({
      inner: lead
        ? lead.group.election(targetKey(ref), lead.electionPrefix(ref), tlog)
        : createLocalLeadership({ replicaId: config.replicaId }),
      gates: targetGates(ref, { claims, previousRelease, log: tlog }),
      log: tlog,
      monotonicNow,
    });
    const cleaner = createTargetCleaner({
      target: ref,
      replicaId: config.replicaId,
      selector,
      policy: config.policy,
      appState: config.applicationState,
      retentionMs: config.retentionMs,
      recheck: config.recheck,
      dryRun: config.dryRun,
      concurrency: config.concurrency,
      reconcileIntervalMs: config.reconcileIntervalMs,
      queue,
      handler: cleanupDriverPod,
      connection: redis,
      prefix: config.queuePrefix,
      pods: clients.pods,
      log: tlog,
      now,
      dueNow: clients.serverClock.dueNow,
      stampNow: clients.serverClock.notBehindNow,
      monotonicNow,
      selfCheck: selfCheckSettings(config.electionTtlSeconds, config.overdueGraceMs),
      redisReachable: () =>
        claims.checked(ref.cluster) && redisOutage.downForMs() < FAILOVER_TIMERS.redisDownNotReadyMs,
      backoffMs: config.retryBaseDelayMs,
      maxBackoffMs: config.retryMaxDelayMs,
      warnIfNotAlone: !leaderships,
      telemetry: deps.telemetry?.forTarget(ref),
      informer: informers[i] as PodInformer,
      leadership,
      dataMarker: createDataMarker(commands, dataMarkerKey(config.queuePrefix, ref)),
    });
    cleaners.push(cleaner);
  }

  claims.start();
  workers?.start();
  for (const c of cleaners) await c.start();
  leaderships?.start();
  log.info(
    {
      version: VERSION,
      targets: cleaners.map((c) => targetLabel(c.target)),
      clusters: [...clusters.values()].map(({ identity, context }) => ({
        cluster: identity.name,
        context,
        source: identity.source,
        fingerprints: identity.fingerprints,
      })),
    },
    'replica started',
  );

  return {
    replicaId: config.replicaId,
    cleaners,
    redis,
    clusters: [...clusters.values()].map((c) => c.identity),
    elections: lead?.elections,
    leadershipBackend: lead?.kind,
    ...(lead ? { leadershipAnswers: (timeoutMs: number) => lead.answers(timeoutMs) } : {}),
    leadershipBalance: () => leaderships?.balance(),
    stop() {
      stopping ??= (async () => {
        // All targets at once: revoking the session lease ends every term and removes every candidate key and
        // the membership key in one step, so other replicas take over while we wind down.
        await leaderships?.close();
        claims.stop();
        workers?.stop();
        if (claimsLook) clearImmediate(claimsLook);
        await Promise.allSettled(cleaners.map((c) => c.stop()));
        commands.disconnect();
        redis.disconnect();
        lead?.close();
        await contexts.close();
        log.info('replica stopped');
      })();
      return stopping;
    },
  };
}

/**
 * Warns (once per connection) when Redis may evict keys: BullMQ requires `maxmemory-policy noeviction`, else
 * pending jobs and tombstones can vanish under memory pressure (a pod cleaned late, by the next reconcile, or
 * twice). BullMQ prints its own unstructured warning to stderr; this one is a log line. Managed Redis services
 * that refuse `CONFIG GET` are not checked.
 */
async function checkEvictionPolicy(redis: RedisClient, log: Logger): Promise<void> {
  const reply = (await redis.config('GET', 'maxmemory-policy').catch(() => undefined)) as
    | string[]
    | undefined;
  const policy = reply?.[1];
  if (policy && policy !== 'noeviction') {
    log.warn(
      { policy },
      `redis maxmemory-policy is ${policy}: pending cleanups can be evicted; set maxmemory-policy noeviction`,
    );
  }
}
