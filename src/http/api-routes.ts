/**
 * The JSON API under `/api/v1/` — this replica's view, from its informer caches (no API server call):
 *
 * - `GET /api/v1/leaders` → `{ replica, leaders: { "context:namespace": replicaId | null }, targets: {
 *   "context:namespace": { cluster, leader, assigned?, consuming, refused, waiting, overdue, oldestOverdueSeconds,
 *   oldestOverdue: [{ pod, uid }] } }, balance? }` — the target's cluster (src/kube/cluster-identity.ts), whether
 *   this replica consumes it and, when not although elected or when it refuses it, why
 *   (src/leadership/gated-leadership.ts), the overdue pods as this replica's informer sees them (the self-check,
 *   src/cleaner/self-check.ts); with etcd, each target's `assigned` replica and `balance: { rule, members,
 *   targets, cap, share: { replicaId: { assigned, leading } }, notReady: { "cluster/namespace": [replicaId] } }`:
 *   how leaderships are balanced over the live replicas, as this replica sees it
 *   (src/leadership/leadership-group.ts);
 * - `GET /api/v1/applications?tag=T` → the application of the driver pod labelled `kyuubi-unique-tag=T`,
 *   as Kyuubi's `getApplicationInfoByTag` answers it (newest pod when several carry the tag);
 * - `GET /api/v1/applications/{namespace}/{pod}[?context=C]` → the application of that driver pod;
 * - `GET /api/v1/explain/{namespace}/{pod}[?context=C]` → why that pod is still here (or where it went):
 *   {@link Explanation}, from a live GET, the queue, the tombstone and the election (src/status/explain.ts);
 *   the namespace must be one of this replica's targets (else 404), and it answers only about driver pods: a pod
 *   the `labelSelector` does not select reads as absent, and a pod absent with nothing about it in Redis is a
 *   404, the same answer whether another pod of that name exists or not (no uid, phase or existence of pods
 *   the cleaner does not manage is disclosed to the dashboard's users). Each makes a live GET through the
 *   cleanup's rate limiter, so explains have a budget of their own per replica ({@link EXPLAIN_BUDGET}):
 *   beyond it, `429` with `Retry-After` at once, before anything is asked of the API server (src/http/request-budget.ts).
 *
 * An application is {@link ApplicationView}; an unknown tag or pod is 404 `{ error }`.
 */

import type { FastifyInstance, FastifyReply } from 'fastify';
import { CLUSTER_NAME_CONFLICT, LEADERSHIP_BACKEND_CONFLICT } from '../cleaner/target-gates.ts';
import { type MonotonicClock, monotonicClock, systemClock } from '../clock.ts';
import { parseLabelSelector } from '../config/label-selector.ts';
import type { CleanerConfig } from '../config/schema.ts';
import {
  type ApplicationState,
  type AppStateSettings,
  KYUUBI_STATE_DEFAULTS,
  podState,
} from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import { type TargetRef, targetKey, targetLabel } from '../queue/job-identity.ts';
import { type Explanation, explain } from '../status/explain.ts';
import { gatherFacts } from '../status/explain-facts.ts';
import { createRequestBudget } from './request-budget.ts';
import type { ServedReplica } from './served-replica.ts';

/** The gates' reasons that refuse a target (the rest make an elected replica wait). */
const REFUSED = new Set<string>([CLUSTER_NAME_CONFLICT, LEADERSHIP_BACKEND_CONFLICT]);

/**
 * Explains a replica answers: 5 at once after a quiet period, 1 per second sustained, 2 in flight. Enough for
 * people and scripts asking about pods one by one; a loop takes at most 1 GET/s of the context's API rate.
 */
export const EXPLAIN_BUDGET = { perSecond: 1, burst: 5, concurrency: 2 } as const;

/** Label Kyuubi puts on the driver pods it submits (KyuubiConf `kyuubi.engine.tag`'s pod label). */
export const KYUUBI_TAG_LABEL = 'kyuubi-unique-tag';

/**
 * One application as this replica sees it. The first five fields are Kyuubi's `ApplicationInfo`
 * (`url` is always null: the Spark UI address is not on the pod); the rest locate the driver pod.
 */
export interface ApplicationView {
  /** `spark-app-selector` label (Spark's application id). */
  readonly id: string | null;
  /** `spark-app-name` label. */
  readonly name: string | null;
  readonly state: ApplicationState;
  readonly url: null;
  /** Why it failed (FAILED, KILLED), else null. */
  readonly error: string | null;
  readonly tag: string | null;
  /** The cluster's name (src/kube/cluster-identity.ts). */
  readonly cluster: string;
  readonly context: string;
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string | null;
  /** ISO-8601, when the driver has finished and the status says when. */
  readonly finishedAt: string | null;
  /** Someone has asked the API server to delete the pod (`metadata.deletionTimestamp` is set). */
  readonly deleting: boolean;
  /** `metadata.deletionTimestamp` (RFC 3339), or null. */
  readonly deletionTimestamp: string | null;
}

/**
 * The application view of one cached pod. Pure. A pod being deleted (`deletionTimestamp`) before its driver
 * finished is KILLED, with the deletion as its error: its phase still says Running (or Pending) through the
 * grace period, or for as long as finalizers hold it, but the application is being killed, and a client
 * polling for the end must not wait for a RUNNING that will never finish. A finished driver keeps its state.
 */
export function applicationView(
  pod: DriverPod,
  target: TargetRef,
  appState: AppStateSettings = KYUUBI_STATE_DEFAULTS,
): ApplicationView {
  const labels = pod.metadata?.labels ?? {};
  const s = podState(pod, appState);
  const deletionTimestamp = pod.metadata?.deletionTimestamp ?? null;
  const killed = deletionTimestamp !== null && !s.terminal;
  return {
    id: labels['spark-app-selector'] ?? null,
    name: labels['spark-app-name'] ?? null,
    state: killed ? 'KILLED' : s.state,
    url: null,
    error: killed ? `pod is being deleted (deletionTimestamp ${deletionTimestamp})` : (s.error ?? null),
    tag: labels[KYUUBI_TAG_LABEL] ?? null,
    cluster: target.cluster,
    context: target.context,
    namespace: target.namespace,
    pod: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? null,
    finishedAt: s.finishedAtMs !== undefined ? new Date(s.finishedAtMs).toISOString() : null,
    deleting: deletionTimestamp !== null,
    deletionTimestamp,
  };
}

const created = (p: DriverPod) => {
  const t = p.metadata?.creationTimestamp;
  return t ? new Date(t).getTime() : 0;
};

/**
 * Adds the `/api/v1/` routes. `explain` holds the rules `/api/v1/explain` judges by (the replica's own
 * configuration); without it that route is not served.
 */
export function registerApiRoutes(
  app: FastifyInstance,
  opts: {
    replica: ServedReplica;
    explain?: Pick<CleanerConfig, 'labelSelector' | 'policy' | 'retentionMs'> &
      Partial<Pick<CleanerConfig, 'etcdKeyPrefix' | 'applicationState'>>;
    /** Kyuubi's state settings the applications API maps pods with (default Kyuubi's). */
    appState?: AppStateSettings;
    /** The monotonic clock of the explain budget, ms (default the system's). */
    monotonicNow?: MonotonicClock;
  },
): void {
  const { replica } = opts;

  app.get('/api/v1/leaders', async () => {
    const { owners, ...balance } = replica.leadershipBalance?.() ?? { owners: undefined };
    const rows = await Promise.all(
      replica.cleaners.map(async (c) => {
        const leader = (await c.leadership.currentLeader().catch(() => null)) ?? null;
        const overdue = c.overdue();
        const target = targetLabel(c.target);
        const held = c.leadership.heldBy?.() ?? [];
        const refused = held.find((h) => REFUSED.has(h.reason));
        const waiting = held.find((h) => h.elected && !REFUSED.has(h.reason));
        return {
          target,
          cluster: c.target.cluster,
          leader,
          ...(owners ? { assigned: owners[targetKey(c.target)] ?? null } : {}),
          consuming: c.isLeader,
          refused: refused?.why ?? null,
          waiting: waiting?.why ?? null,
          overdue: overdue.count,
          oldestOverdueSeconds: Math.round(overdue.oldestAgeMs / 1000),
          oldestOverdue: overdue.oldest.map((p) => ({ pod: p.name, uid: p.uid })),
        };
      }),
    );
    return {
      replica: replica.replicaId,
      leaders: Object.fromEntries(rows.map((r) => [r.target, r.leader])),
      targets: Object.fromEntries(rows.map(({ target, ...row }) => [target, row])),
      ...(owners ? { balance } : {}),
      ...(replica.discovery ? { discovery: replica.discovery() } : {}),
    };
  });

  app.get<{ Querystring: { tag?: string } }>('/api/v1/applications', async (req, reply) => {
    const tag = req.query.tag;
    if (!tag) return reply.code(400).send({ error: 'query parameter "tag" is required' });
    const matches = replica.cleaners.flatMap((c) =>
      c.informer
        .list()
        .filter((p) => p.metadata?.labels?.[KYUUBI_TAG_LABEL] === tag)
        .map((p) => ({ pod: p, target: c.target })),
    );
    const newest = matches.sort((a, b) => created(b.pod) - created(a.pod))[0];
    if (!newest) return reply.code(404).send({ error: `no driver pod with ${KYUUBI_TAG_LABEL}=${tag}` });
    return applicationView(newest.pod, newest.target, opts.appState);
  });

  app.get<{ Params: { namespace: string; pod: string }; Querystring: { context?: string } }>(
    '/api/v1/applications/:namespace/:pod',
    async (req, reply) => {
      const { namespace, pod } = req.params;
      const context = req.query.context;
      for (const c of replica.cleaners) {
        if (c.target.namespace !== namespace || (context !== undefined && c.target.context !== context))
          continue;
        const cached = c.informer.get(pod);
        if (cached) return applicationView(cached, c.target, opts.appState);
      }
      return reply
        .code(404)
        .send({ error: `no driver pod ${namespace}/${pod}${context ? ` in context ${context}` : ''}` });
    },
  );

  const rules = opts.explain;
  if (!rules) return;
  const selector = parseLabelSelector(rules.labelSelector);
  const budget = createRequestBudget({
    ...EXPLAIN_BUDGET,
    monotonicNow: opts.monotonicNow ?? monotonicClock,
  });
  const explainPod = async (
    params: { namespace: string; pod: string },
    context: string | undefined,
    reply: FastifyReply,
  ): Promise<Explanation | undefined> => {
    const { namespace, pod } = params;
    const c = replica.cleaners.find(
      (x) => x.target.namespace === namespace && (context === undefined || x.target.context === context),
    );
    if (!c) {
      await reply.code(404).send({
        error: `${context ? `${context}:` : ''}${namespace} is not a target of this replica`,
      });
      return undefined;
    }
    const facts = await gatherFacts(
      {
        target: c.target,
        queue: c.queue.bullQueue,
        redis: replica.redis,
        elections: replica.elections,
        // Only the driver pods the cleaner manages: any other pod of the namespace reads as absent.
        getPod: async (ns, name) => {
          const got = await c.pods.get(ns, name);
          return got && selector.matches(got.metadata?.labels) ? got : undefined;
        },
      },
      { name: pod },
    );
    if (facts.pod.read === 'absent' && !facts.job && facts.tombstoneTtlMs === undefined) {
      await reply.code(404).send({
        error:
          `no driver pod ${targetLabel(c.target)}/${pod}: the API server has none that ${rules.labelSelector} ` +
          'selects, and Redis nothing about it',
      });
      return undefined;
    }
    return explain(facts, {
      selector,
      selectorText: rules.labelSelector,
      policy: rules.policy,
      appState: rules.applicationState ?? KYUUBI_STATE_DEFAULTS,
      retentionMs: rules.retentionMs,
      nowMs: systemClock(),
    });
  };
  app.get<{ Params: { namespace: string; pod: string }; Querystring: { context?: string } }>(
    '/api/v1/explain/:namespace/:pod',
    async (req, reply): Promise<Explanation | undefined> => {
      const admission = budget.tryAdmit();
      if (!admission.admitted) {
        await reply
          .code(429)
          .header('retry-after', String(admission.retryAfterSeconds))
          .send({ error: 'too many explain requests on this replica; retry later' });
        return undefined;
      }
      try {
        return await explainPod(req.params, req.query.context, reply);
      } finally {
        admission.release();
      }
    },
  );
}
