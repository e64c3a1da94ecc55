/**
 * Prometheus metrics of one replica (prom-client, one registry per replica so that two replicas in one
 * test process do not mix). Names are snake_case with the `sdc_` prefix and their unit (`_seconds`,
 * `_total`); every cleanup series carries `cluster` (the cluster's name, src/kube/cluster-identity.ts),
 * `context` and `namespace` (the target), so that one Prometheus can scrape several clusters.
 *
 * Recorded as things happen: outcomes, API request durations, DELETE lateness, reconciles.
 * Read at scrape time from the replica ({@link CleanerMetrics.watch}): leadership, the leadership session's
 * freshness (one gauge per backend), informer restarts and sync — so a scrape shows the state *now*, not a stale copy. Queue job counts are read
 * from Redis by each target's leader only, at most every {@link QUEUE_COUNTS_MAX_AGE_MS} (see there).
 *
 * One file, long, because it is the whole metrics surface, one definition after another, so that a name, its
 * labels and its help text are found in one place (docs/operations.md lists the same).
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { SessionHealth } from '../leadership/leadership.ts';
import type { TargetRef } from '../queue/job-identity.ts';
import type { Outcome } from '../rules/outcome.ts';
import { VERSION } from '../version.ts';

/**
 * BullMQ job states counted per target (`Queue.getJobCounts`: BullMQ's getCounts script, one read per state,
 * two for `waiting`: 7 commands). The states this service never uses are left out: `prioritized` (no job has a
 * priority), `waiting-children` (no flows), `paused` (BullMQ 6 keeps a paused queue's jobs in `waiting`).
 */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'completed', 'failed'] as const;

/**
 * How old the exported queue counts may be, ms. Each target's counts are read by its leader only, at a scrape
 * that finds them older than this (or at the first one of its term), and served from that read until then:
 * one read per target per 30 s at most, whatever the number of replicas and of scrapes (rather than
 * every replica reading every queue at every scrape, 11 commands each). Followers export no `sdc_queue_jobs` series
 * for the target: a copy they could not refresh would look current.
 */
export const QUEUE_COUNTS_MAX_AGE_MS = 30_000;

/** What the scrape-time gauges read from one target's cleaner (a `TargetCleaner` is one). */
export interface MetricsSource {
  readonly target: TargetRef;
  readonly isLeader: boolean;
  /** This replica can clean the target now (src/cleaner/target-cleaner.ts `ready`). */
  readonly ready: boolean;
  /** Why it cannot (`informer`, `stepped-down`, `redis`; src/cleaner/target-cleaner.ts `notReadyReasons`); absent: none given. */
  readonly notReadyReasons?: readonly string[];
  readonly informer: { readonly restarts: number; readonly synced: boolean };
  /**
   * The leadership session's freshness, per backend, and what holds this replica from consuming
   * (src/leadership/leadership.ts `session`, `heldBy`).
   */
  readonly leadership: {
    readonly session: SessionHealth | undefined;
    heldBy?(): readonly { readonly reason: string; readonly elected: boolean }[];
  };
  readonly queue: {
    readonly bullQueue: { getJobCounts(...types: string[]): Promise<Record<string, number>> };
  };
  /**
   * The self-check's overdue pods of the target (src/cleaner/overdue.ts): count, and the oldest's age in ms; in
   * dry run, the pods past their would-delete deadline.
   */
  overdue(): { readonly count: number; readonly oldestAgeMs: number };
  /** Pods kept by Kyuubi's `POD` state source although their driver has ended (src/rules/kept-by-pod-phase.ts). */
  keptByPodPhase?(): { readonly count: number };
}

/** The replica as the metrics see it. */
export interface MetricsReplica {
  readonly cleaners: readonly MetricsSource[];
  /** Redis connection state; job counts are skipped while it is not `ready` (the scrape must not hang). */
  readonly redis: { readonly status: string };
  /**
   * Whether Redis and etcd answer now (src/http/backend-health.ts `checkBackends`), exported as
   * `sdc_backend_up`; `etcd` (`zookeeper`) absent when the replica does not use it. Not exported when absent.
   */
  backends?(): Promise<{ readonly redis: boolean; readonly etcd?: boolean; readonly zookeeper?: boolean }>;
}

/**
 * How a deletion by another client was seen: the informer saw the pod deleted while its cleanup job was still
 * pending (`deletion-seen`), or the job found it gone (`already-absent`) or being deleted (`already-deleting`).
 */
export type DeletedByOthersSeen = 'deletion-seen' | 'already-absent' | 'already-deleting';

/** HTTP verb of a pod call. */
export type PodVerb = 'GET' | 'DELETE';

/** The metrics of one replica. */
export interface CleanerMetrics {
  readonly registry: Registry;
  /** Counts one outcome of a cleanup job; an `accepted` one also records its lateness. */
  outcome(target: TargetRef, outcome: Outcome): void;
  /**
   * Records one GET/DELETE: `statusCode` undefined means no HTTP response (timeout, network error),
   * labelled `code="error"`. `seconds` from just after the rate limiter to the answer.
   */
  apiRequest(target: TargetRef, verb: PodVerb, statusCode: number | undefined, seconds: number): void;
  /** Counts one reconcile run and the jobs it added and re-queued. */
  reconciled(target: TargetRef, counts: { added: number; retried: number }): void;
  /** Counts one loss of the target's Redis data, by reason (`marker-missing`, `master-changed`). */
  redisDataLost(target: TargetRef, reason: string): void;
  /** Counts one driver pod deleted by another client before its cleanup did (`sdc_pods_deleted_by_others_total`). */
  deletedByOthers(target: TargetRef, seen: DeletedByOthersSeen): void;
  /** Reads the scrape-time series from this replica from now on (call once). */
  watch(replica: MetricsReplica): void;
  /** The exposition text (Prometheus text format 0.0.4) and its content type. */
  scrape(): Promise<{ text: string; contentType: string }>;
}

/** Options of {@link createMetrics}. */
export interface MetricsOptions {
  /** Also export Node's process metrics (`sdc_process_*`, `sdc_nodejs_*`); default true. */
  processMetrics?: boolean;
  /** Longest wait for the job counts of one queue at scrape time, ms (default 1000). */
  queueCountTimeoutMs?: number;
  /** How old served queue counts may be, ms (default {@link QUEUE_COUNTS_MAX_AGE_MS}). */
  queueCountsMaxAgeMs?: number;
  /** The monotonic clock, ms (default `performance.now()`): the age of the queue counts. */
  monotonicNow?: () => number;
  /** The configured leadership lease TTL, s: exported as `sdc_election_ttl_seconds` (not exported when unset). */
  electionTtlSeconds?: number;
  /** The replica's dry-run setting: exported as `sdc_dry_run` (not exported when unset). */
  dryRun?: boolean;
}

/** One target's last queue counts read by this replica as its leader. */
interface CachedCounts {
  /** Monotonic ms of the read. */
  readonly atMs: number;
  readonly counts: Readonly<Record<string, number>>;
}

const TARGET = ['cluster', 'context', 'namespace'] as const;
const labelsOf = (t: TargetRef) => ({ cluster: t.cluster, context: t.context, namespace: t.namespace });
/** A target's key in the maps of this module. */
const keyOf = (t: TargetRef) => `${t.cluster}/${t.namespace}`;

/** The reasons of `sdc_target_refused` and `sdc_target_waiting`. */
const REFUSED_REASONS = ['cluster-name-conflict', 'leadership-backend-conflict'] as const;
const WAITING_REASONS = ['previous-release'] as const;

/** Creates the registry and every metric of the replica. */
export function createMetrics(opts: MetricsOptions): CleanerMetrics {
  const registry = new Registry();
  const registers = [registry];
  const countTimeoutMs = opts.queueCountTimeoutMs ?? 1000;
  const countsMaxAgeMs = opts.queueCountsMaxAgeMs ?? QUEUE_COUNTS_MAX_AGE_MS;
  const monotonicNow = opts.monotonicNow ?? (() => performance.now());
  let replica: MetricsReplica | undefined;
  /** Per target key (`cluster/namespace`): its last counts, and the read in flight (concurrent scrapes share it). */
  const counted = new Map<string, CachedCounts>();
  const counting = new Map<string, Promise<CachedCounts | undefined>>();

  /**
   * The target's counts no older than the maximum age: the cached ones, or a fresh read (at most
   * `countTimeoutMs`). Undefined when the read fails or times out: nothing stale is served.
   */
  function countsOf(c: MetricsSource): Promise<CachedCounts | undefined> {
    const key = keyOf(c.target);
    const cached = counted.get(key);
    if (cached && monotonicNow() - cached.atMs < countsMaxAgeMs) return Promise.resolve(cached);
    let reading = counting.get(key);
    if (!reading) {
      let timer: NodeJS.Timeout | undefined;
      reading = Promise.race([
        c.queue.bullQueue.getJobCounts(...QUEUE_STATES).then(
          (counts) => ({ atMs: monotonicNow(), counts }),
          () => undefined,
        ),
        new Promise<undefined>((r) => {
          timer = setTimeout(() => r(undefined), countTimeoutMs);
        }),
      ]).then((read) => {
        clearTimeout(timer);
        counting.delete(key);
        if (read) counted.set(key, read);
        else counted.delete(key);
        return read;
      });
      counting.set(key, reading);
    }
    return reading;
  }
  if (opts.processMetrics ?? true) {
    collectDefaultMetrics({ register: registry, prefix: 'sdc_' });
    // prom-client names three gauges `…_total`, which promtool rejects (a `_total` must be a counter);
    // their unsuffixed twins (`sdc_nodejs_active_handles`, …) carry the same numbers by type.
    for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) {
      registry.removeSingleMetric(`sdc_nodejs_${name}`);
    }
  }

  // The release, as Prometheus's own `prometheus_build_info`: a rollout shows as two versions side by side.
  new Gauge({
    name: 'sdc_build_info',
    help: 'Always 1; `version` is the release of this replica (CHANGELOG.md).',
    labelNames: ['version'],
    registers,
  }).set({ version: VERSION }, 1);

  // The alert on late keepalives compares their age with this TTL, whatever it is configured to.
  if (opts.electionTtlSeconds !== undefined) {
    new Gauge({
      name: 'sdc_election_ttl_seconds',
      help: 'The configured TTL of the etcd leadership lease, or the ZooKeeper session timeout asked for (electionTtlSeconds), s.',
      registers,
    }).set(opts.electionTtlSeconds);
  }

  // Dry run left on after Kyuubi's cleanup was switched off deletes nothing: the dry-run alert reads this.
  if (opts.dryRun !== undefined) {
    new Gauge({
      name: 'sdc_dry_run',
      help: '1 when this replica runs in dry run (dryRun): it logs would-delete and sends no DELETE; sdc_overdue_pods then counts the pods past their would-delete deadline, which nothing deletes unless Kyuubi still does.',
      registers,
    }).set(opts.dryRun ? 1 : 0);
  }

  const outcomes = new Counter({
    name: 'sdc_cleanup_outcomes_total',
    help: 'Cleanup job outcomes by target and outcome (accepted, already-absent, replaced, already-deleting, skipped, would-delete, failed, not-yet, fenced, aborted).',
    labelNames: [...TARGET, 'outcome'],
    registers,
  });
  const lateness = new Histogram({
    name: 'sdc_delete_lateness_seconds',
    help: 'How long after its deadline (finishedAt + retention) an accepted DELETE was answered.',
    labelNames: TARGET,
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800],
    registers,
  });
  const requests = new Histogram({
    name: 'sdc_kube_request_duration_seconds',
    help: 'Duration of the pod GET and DELETE requests to the API server, by verb and HTTP status code (code="error": no response).',
    labelNames: [...TARGET, 'verb', 'code'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const reconcileRuns = new Counter({
    name: 'sdc_reconcile_runs_total',
    help: 'Reconcile runs of the leader (on election and periodically).',
    labelNames: TARGET,
    registers,
  });
  const reconcileAdded = new Counter({
    name: 'sdc_reconcile_enqueued_pods_total',
    help: 'Cleanup jobs that reconcile runs added because no replica had enqueued them.',
    labelNames: TARGET,
    registers,
  });
  const dataLost = new Counter({
    name: 'sdc_redis_data_loss_total',
    help: 'Losses of the target queue’s Redis data seen by its leader, each followed by a reconcile: reason="marker-missing" (flushed, restarted empty, failover to a replica without it) or "master-changed" (failover or restart: writes not yet replicated are lost).',
    labelNames: [...TARGET, 'reason'],
    registers,
  });
  const deletedByOthers = new Counter({
    name: 'sdc_pods_deleted_by_others_total',
    help: 'Driver pods of the target deleted by another client (Kyuubi’s own cleanup, a person, a script) before their cleanup job did, by how it was seen: seen="deletion-seen" (the informer saw the deletion while the job was pending), "already-absent" or "already-deleting" (the job found it so). Counted once across replicas. A steady rate means another deleter is active on the target.',
    labelNames: [...TARGET, 'seen'],
    registers,
  });
  const reconcileRetried = new Counter({
    name: 'sdc_reconcile_retried_jobs_total',
    help: 'Failed cleanup jobs that reconcile runs queued again.',
    labelNames: TARGET,
    registers,
  });

  const cleaners = () => replica?.cleaners ?? [];
  new Gauge({
    name: 'sdc_queue_jobs',
    help: 'Cleanup jobs in the target queue by BullMQ state, exported by the target’s leader only, read at most every 30 s (absent on followers and while Redis is unreachable).',
    labelNames: [...TARGET, 'state'],
    registers,
    async collect() {
      this.reset();
      const ready = replica?.redis.status === 'ready';
      await Promise.all(
        cleaners().map(async (c) => {
          if (!ready || !c.isLeader) {
            // A follower's or a past term's counts are never served: the next term reads anew.
            counted.delete(keyOf(c.target));
            return;
          }
          const read = await countsOf(c);
          if (!read) return;
          for (const state of QUEUE_STATES)
            this.set({ ...labelsOf(c.target), state }, read.counts[state] ?? 0);
        }),
      );
    },
  });
  new Gauge({
    name: 'sdc_backend_up',
    help: '1 when this replica reaches the backend now (redis: a PING answered, etcd: a status call answered, each within 1 s), else 0. Information: a backend down does not fail /readyz.',
    labelNames: ['backend'],
    registers,
    async collect() {
      this.reset();
      const up = await replica?.backends?.();
      if (!up) return;
      this.set({ backend: 'redis' }, up.redis ? 1 : 0);
      if (up.etcd !== undefined) this.set({ backend: 'etcd' }, up.etcd ? 1 : 0);
      if (up.zookeeper !== undefined) this.set({ backend: 'zookeeper' }, up.zookeeper ? 1 : 0);
    },
  });
  new Gauge({
    name: 'sdc_leader',
    help: '1 when this replica is the cleanup leader of the target, else 0.',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) this.set(labelsOf(c.target), c.isLeader ? 1 : 0);
    },
  });
  // One name per backend, each meaning what it says; both registered, only the replica's own backend has
  // samples. Absent while the replica holds no session: the backend-unreachable alert reads the absence.
  new Gauge({
    name: 'sdc_lease_keepalive_age_seconds',
    help: 'etcd: seconds since the last successful keepalive of the leadership lease was sent (keepalives go every TTL/3; a leader fences itself at TTL − min(1 s, TTL/5)); absent while the replica holds no lease, and on other backends.',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) {
        const s = c.leadership.session;
        if (s?.backend === 'etcd') this.set(labelsOf(c.target), Math.max(0, s.keepaliveAgeMs) / 1000);
      }
    },
  });
  new Gauge({
    name: 'sdc_zookeeper_disconnected_seconds',
    help: 'ZooKeeper: seconds the leadership session has been without a connection, 0 while connected (a leader stops its DELETEs when the connection drops); absent while the replica holds no session (never connected, or given up after a session timeout), and on other backends.',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) {
        const s = c.leadership.session;
        if (s?.backend === 'zookeeper') this.set(labelsOf(c.target), Math.max(0, s.disconnectedMs) / 1000);
      }
    },
  });
  new Gauge({
    name: 'sdc_overdue_pods',
    help: 'Terminated driver pods of the target still present past their deadline plus the grace (overdueGrace), counted by this replica from its informer, leader or not (0 before the first list). In dry run (sdc_dry_run 1): the pods past their would-delete deadline plus the grace.',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) this.set(labelsOf(c.target), c.overdue().count);
    },
  });
  new Gauge({
    name: 'sdc_pods_kept_by_pod_phase',
    help: 'Driver pods of the target whose state container (applicationStateContainer) has terminated while the pod is not (a sidecar keeps it Running): under applicationStateSource POD, Kyuubi’s default, they count as running and are never cleaned, as Kyuubi would not either; CONTAINER (in Kyuubi and here) cleans them. Counted by this replica from its informer; 0 under CONTAINER.',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) this.set(labelsOf(c.target), c.keptByPodPhase?.().count ?? 0);
    },
  });
  new Gauge({
    name: 'sdc_overdue_oldest_age_seconds',
    help: 'How long past its deadline the oldest overdue driver pod of the target is (0 when none is overdue).',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) this.set(labelsOf(c.target), c.overdue().oldestAgeMs / 1000);
    },
  });
  new Counter({
    name: 'sdc_informer_restarts_total',
    help: 'Restarts of the pod informer after it stopped on an error.',
    labelNames: TARGET,
    registers,
    collect() {
      // The informer counts; the counter mirrors it (reset + inc is prom-client's way to set a counter).
      this.reset();
      for (const c of cleaners()) this.inc(labelsOf(c.target), c.informer.restarts);
    },
  });
  new Gauge({
    name: 'sdc_informer_synced',
    help: '1 when the pod informer has loaded its list and watches, else 0.',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) this.set(labelsOf(c.target), c.informer.synced ? 1 : 0);
    },
  });
  new Gauge({
    name: 'sdc_target_ready',
    help: '1 when this replica can clean the target (its informer has listed the pods and has not been unable to list or watch for more than 10 s, the self-check has not stepped it down for want of progress without it showing progress since, and its Redis has answered since it started and its connection to Redis has not been down for more than 10 s), else 0. Only a ready replica campaigns for the target.',
    labelNames: TARGET,
    registers,
    collect() {
      this.reset();
      for (const c of cleaners()) this.set(labelsOf(c.target), c.ready ? 1 : 0);
    },
  });
  new Gauge({
    name: 'sdc_target_not_ready',
    help: 'Why this replica cannot clean the target, one series of value 1 per reason that holds (none while it can): reason="informer" (its informer has not listed the pods, or has been unable to list or watch them for more than 10 s), reason="stepped-down" (the self-check stepped it down for want of progress; it stays out of the target until its queue answers again), reason="redis" (its Redis has not answered since it started, or its connection to Redis has been down for more than 10 s).',
    labelNames: [...TARGET, 'reason'],
    registers,
    collect() {
      this.reset();
      for (const c of cleaners())
        for (const reason of c.notReadyReasons ?? []) this.set({ ...labelsOf(c.target), reason }, 1);
    },
  });

  // Exported only while they hold (absent otherwise): a zero per target and replica would add T × R series
  // that say nothing, at hundreds of targets.
  new Gauge({
    name: 'sdc_target_refused',
    help: '1 while this replica refuses the target (absent otherwise): reason="cluster-name-conflict" — another cluster claims the same cluster name (clusterName, clusterNames) on the shared Redis, etcd or ZooKeeper, so nothing of that name is cleaned until one is renamed; reason="leadership-backend-conflict" — replicas that serve the same namespace of the cluster elect through another leadership backend (a rollback to a release without this backend, or a fleet configured two ways), so the target is not cleaned until one backend is left.',
    labelNames: [...TARGET, 'reason'],
    registers,
    collect() {
      this.reset();
      for (const c of cleaners())
        for (const h of c.leadership.heldBy?.() ?? [])
          if ((REFUSED_REASONS as readonly string[]).includes(h.reason))
            this.set({ ...labelsOf(c.target), reason: h.reason }, 1);
    },
  });
  new Gauge({
    name: 'sdc_target_waiting',
    help: '1 while this replica is elected for the target but does not consume (absent otherwise): reason="previous-release" — a replica of release 0.1.0 still leads its old election or consumes its old queue (a rolling update in progress, or a fleet sharing the store not upgraded).',
    labelNames: [...TARGET, 'reason'],
    registers,
    collect() {
      this.reset();
      for (const c of cleaners())
        for (const h of c.leadership.heldBy?.() ?? [])
          if (h.elected && (WAITING_REASONS as readonly string[]).includes(h.reason))
            this.set({ ...labelsOf(c.target), reason: h.reason }, 1);
    },
  });

  return {
    registry,
    outcome(target, o) {
      outcomes.inc({ ...labelsOf(target), outcome: o.outcome });
      if (o.outcome === 'accepted') lateness.observe(labelsOf(target), o.latenessMs / 1000);
    },
    apiRequest(target, verb, statusCode, seconds) {
      requests.observe(
        { ...labelsOf(target), verb, code: statusCode ? String(statusCode) : 'error' },
        seconds,
      );
    },
    reconciled(target, counts) {
      reconcileRuns.inc(labelsOf(target));
      reconcileAdded.inc(labelsOf(target), counts.added);
      reconcileRetried.inc(labelsOf(target), counts.retried);
    },
    redisDataLost(target, reason) {
      dataLost.inc({ ...labelsOf(target), reason });
    },
    deletedByOthers(target, seen) {
      deletedByOthers.inc({ ...labelsOf(target), seen });
    },
    watch(r) {
      replica = r;
    },
    async scrape() {
      return { text: await registry.metrics(), contentType: registry.contentType };
    },
  };
}
