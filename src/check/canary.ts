/**
 * `check --canary NAMESPACE`: the end-to-end proof on the real cluster. It creates a few canary pods
 * (src/check/canary-pod.ts) in a namespace the fleet cleans, waits for them to finish, and verifies that the
 * running fleet deletes each once after the retention and not before:
 *
 * - **when**, from the pods' own timestamps: the driver container's `finishedAt` (the kubelet's) gives the
 *   deadline `finishedAt + retention` (src/cleanup/decision.ts), and the `deletionTimestamp` the API server
 *   stamped on the DELETE (seen on the watch) must not be before it, nor later than the fleet's own overdue
 *   grace (`overdueGrace`) after it; the lateness is reported;
 * - **who and how many**, from the fleet's state (the same facts as `explain` and `/api/v1/explain`,
 *   src/status/explain-facts.ts): the pod's cleanup job completed with the outcome `accepted` — the outcome
 *   each replica counts in `sdc_cleanup_outcomes_total` — by a replica of the fleet; jobs are keyed by the
 *   pod's UID, so one job is one accepted DELETE. Any other outcome (`already-absent`: someone else deleted it
 *   first, such as Kyuubi's own cleanup still on) fails.
 *
 * It touches nothing else: it watches, creates and deletes only pods labelled with its run's id, and deletes
 * whatever of them is left at the end (also after a failure or Ctrl-C). Creating pods needs `create` on pods
 * in the namespace, which the shipped RBAC does not grant (docs/operations.md, "Canary").
 */
import { randomBytes } from 'node:crypto';
import { deadlineMs } from '../cleanup/decision.ts';
import { parseLabelSelector } from '../config/label-selector.ts';
import type { CleanerConfig } from '../config/schema.ts';
import { podState } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import { createPodReflector } from '../kube/pod-reflector.ts';
import { createLogger } from '../log.ts';
import type { TargetRef } from '../queue/job-identity.ts';
import { sleep } from '../sleep.ts';
import { gatherFacts } from '../status/explain-facts.ts';
import type { StateStore } from '../status/state-store.ts';
import { reviewAccess } from './access-review.ts';
import { CANARY_LABEL, CanaryLabelsError, canaryLabels, canaryPod } from './canary-pod.ts';
import { type CheckResult, firstLine, resultsOf } from './check-result.ts';
import type { OpenedContext } from './context-checks.ts';

/** Options of {@link runCanary}. */
export interface CanaryOptions {
  readonly ctx: OpenedContext;
  readonly target: TargetRef;
  readonly config: Pick<CleanerConfig, 'retentionMs' | 'labelSelector' | 'dryRun'>;
  /** The fleet's overdue grace (src/cleaner/self-check.ts), ms: a canary deleted later than this fails. */
  readonly overdueGraceMs: number;
  readonly store: StateStore;
  readonly image: string;
  readonly count: number;
  /** How long a canary may take to finish after its creation (scheduling, image pull), ms. */
  readonly startTimeoutMs: number;
  /** How long each API request may take, ms. */
  readonly requestTimeoutMs: number;
  /** Our wall clock, epoch ms (compared with Kubernetes timestamps only). */
  readonly now: () => number;
  /** Aborts the wait (Ctrl-C): the canaries are still deleted. */
  readonly signal: AbortSignal;
  /** Told what the canary is doing, one line at a time (stderr in text mode). */
  readonly progress: (line: string) => void;
}

/** What the watch saw of one canary. Times are epoch ms from the cluster's timestamps. */
interface Seen {
  name: string;
  finishedAtMs?: number;
  failedReason?: string;
  /** The API server's `deletionTimestamp`. */
  deletionMs?: number;
  gone: boolean;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;

/** Runs the canary (see the module comment); never rejects. */
export async function runCanary(o: CanaryOptions): Promise<CheckResult[]> {
  const { target, ctx } = o;
  const ns = target.namespace;
  const r = resultsOf(`canary ${target.context}:${ns}`);
  const out: CheckResult[] = [];
  if (o.config.dryRun)
    return [
      r.fail(
        'canary.dry-run',
        'canary: the configuration is in dry run (dryRun: true): the fleet sends no DELETE, so no canary would be deleted',
        {
          fix: 'run the canary once dry run is off (SDC_DRY_RUN=false), after comparing the dry-run lines with Kyuubi’s deletes',
        },
      ),
    ];
  const signal = () => AbortSignal.any([o.signal, AbortSignal.timeout(o.requestTimeoutMs)]);
  const selector = parseLabelSelector(o.config.labelSelector);
  const runId = randomBytes(4).toString('hex');
  let labelsOf: (i: number) => Record<string, string>;
  try {
    canaryLabels(selector, runId, `${runId}-0`);
    labelsOf = (i) => canaryLabels(selector, runId, `sdc-canary-${runId}-${i}`);
  } catch (err) {
    if (!(err instanceof CanaryLabelsError)) throw err;
    return [
      r.fail('canary.labels', `canary: ${err.message}`, {
        fix: 'labelSelector must select driver pods: a label it both requires and excludes selects none',
      }),
    ];
  }

  // May we create (and delete) pods here? Asked, not tried.
  try {
    const [create, del] = await Promise.all(
      ['create', 'delete'].map((verb) =>
        reviewAccess(ctx.http, ctx.limiter, { verb, resource: 'pods', namespace: ns }, signal()),
      ),
    );
    const refused = [create, del].flatMap((a, i) =>
      a?.answered && a.allowed ? [] : [i === 0 ? 'create' : 'delete'],
    );
    if (refused.length > 0)
      return [
        r.fail(
          'canary.permissions',
          `canary: ${refused.join(' and ')} on pods in ${ns} refused: the canary cannot ${refused.includes('create') ? 'create its pods' : 'delete what it leaves'}`,
          {
            fix: `grant create on pods in ${ns} for the canary only, then take it back: kubectl -n ${ns} create role spark-driver-cleaner-canary --verb=create --resource=pods && kubectl -n ${ns} create rolebinding spark-driver-cleaner-canary --role=spark-driver-cleaner-canary --serviceaccount=spark-driver-cleaner:spark-driver-cleaner; afterwards kubectl -n ${ns} delete rolebinding,role spark-driver-cleaner-canary (docs/operations.md, "Canary")`,
            details: { namespace: ns, refused },
          },
        ),
      ];
  } catch (err) {
    return [
      r.unreachable('canary.permissions', `canary: the API server did not answer: ${firstLine(err)}`, {
        fix: 'check the API server, then run the canary again',
      }),
    ];
  }

  const seen = new Map<string, Seen>();
  const silent = createLogger({ level: 'silent' });
  const watch = createPodReflector({
    http: ctx.http,
    limiter: ctx.limiter,
    namespace: ns,
    labelSelector: `${CANARY_LABEL}=${runId}`,
    log: silent,
    now: o.now,
    backoffMs: 200,
    maxBackoffMs: 2000,
  });
  const record = (pod: DriverPod, deleted: boolean) => {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    const s = seen.get(uid) ?? { name: pod.metadata?.name ?? '', gone: false };
    const state = podState(pod);
    if (state.terminal) {
      s.finishedAtMs ??= state.finishedAtMs;
      if (state.state !== 'FINISHED') s.failedReason ??= state.error ?? state.state;
    }
    const del = pod.metadata?.deletionTimestamp;
    if (del && s.deletionMs === undefined) s.deletionMs = Date.parse(del);
    if (deleted) s.gone = true;
    seen.set(uid, s);
  };
  watch.addEventHandler((event, pod) => record(pod, event === 'deleted'));
  await watch.start();

  const created: { name: string; uid: string }[] = [];
  try {
    // 1. Create the canaries.
    const image = o.image;
    for (let i = 1; i <= o.count; i++) {
      const name = `sdc-canary-${runId}-${i}`;
      await ctx.limiter.take(signal());
      const res = await ctx.http.request('POST', `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`, {
        signal: signal(),
        body: canaryPod({ namespace: ns, name, labels: labelsOf(i), image }),
      });
      const body = res.body as { metadata?: { uid?: string }; message?: string };
      if (res.statusCode !== 201 || !body?.metadata?.uid) {
        out.push(
          r.fail(
            'canary.create',
            `canary: creating ${name} was refused (${res.statusCode}: ${body?.message ?? 'no message'})`,
            {
              fix: 'a ResourceQuota, LimitRange, admission policy or Pod Security level of the namespace refuses the canary: see the message; --canary-image names a registry the cluster can pull from',
              details: { namespace: ns, code: res.statusCode },
            },
          ),
        );
        return out;
      }
      created.push({ name, uid: body.metadata.uid });
      seen.set(body.metadata.uid, seen.get(body.metadata.uid) ?? { name, gone: false });
    }
    out.push(
      r.pass(
        'canary.create',
        `created ${created.length} canary pods (image ${image}) in ${ns}: ${created.map((c) => c.name).join(', ')}`,
        {
          details: { runId, image, pods: created.map((c) => c.name) },
        },
      ),
    );
    o.progress(`canary: ${created.length} pods created in ${ns}; waiting for them to finish`);

    // 2. Wait for them to finish.
    const startBy = performance.now() + o.startTimeoutMs;
    const finished = () =>
      created.every((c) => seen.get(c.uid)?.finishedAtMs !== undefined || seen.get(c.uid)?.gone);
    while (!finished() && performance.now() < startBy && !o.signal.aborted) await sleep(200, o.signal);
    const unfinished = created.filter(
      (c) => seen.get(c.uid)?.finishedAtMs === undefined && !seen.get(c.uid)?.gone,
    );
    if (unfinished.length > 0) {
      out.push(
        r.fail(
          'canary.finish',
          `canary: ${unfinished.map((c) => c.name).join(', ')} did not finish within ${seconds(o.startTimeoutMs)}`,
          {
            fix: `kubectl -n ${ns} describe pod ${unfinished[0]?.name}: scheduling or the image pull (--canary-image); raise --canary-start-timeout for a slow pull`,
            details: { pods: unfinished.map((c) => c.name) },
          },
        ),
      );
      return out;
    }
    const failedRun = created.filter((c) => seen.get(c.uid)?.failedReason);
    out.push(
      failedRun.length === 0
        ? r.pass('canary.finish', `all ${created.length} canaries finished (Succeeded)`)
        : r.warn(
            'canary.finish',
            `${failedRun.length} canaries failed (${seen.get(failedRun[0]?.uid ?? '')?.failedReason}); the fleet must still clean them under policy ALL`,
            {
              fix: 'policy COMPLETED keeps failed drivers: use an image whose `true` exits 0',
            },
          ),
    );
    o.progress(
      `canary: finished; waiting for the fleet to delete them (retention ${seconds(o.config.retentionMs)})`,
    );

    // 3. Wait for the fleet to delete them, each until its deadline + the fleet's overdue grace.
    const deadlineOf = (c: { uid: string }) => {
      const f = seen.get(c.uid)?.finishedAtMs;
      return f === undefined ? undefined : deadlineMs(f, o.config.retentionMs, o.now()).deadlineMs;
    };
    const giveUpAt = Math.max(...created.map((c) => (deadlineOf(c) ?? o.now()) + o.overdueGraceMs));
    while (created.some((c) => !seen.get(c.uid)?.gone) && o.now() < giveUpAt && !o.signal.aborted)
      await sleep(Math.min(500, Math.max(10, giveUpAt - o.now())), o.signal);

    // 4. Judge each from its timestamps and the fleet's record.
    const lateness: number[] = [];
    for (const c of created) {
      const s = seen.get(c.uid) as Seen;
      const deadline = deadlineOf(c);
      if (!s.gone || deadline === undefined) {
        const facts = await gatherFacts(
          {
            target,
            queue: o.store.queueOf(target),
            redis: o.store.redis,
            elections: o.store.elections,
            getPod: undefined,
          },
          { uid: c.uid, name: c.name },
        );
        const why = facts.leader
          ? facts.job
            ? `its job is ${facts.job.state}${facts.job.failedReason ? ` (${facts.job.failedReason})` : ''}`
            : 'no job was queued for it (the fleet did not see it: its informer, or labelSelector)'
          : `no replica leads ${target.context}:${ns} (is the fleet running?)`;
        out.push(
          r.fail(
            'canary.deleted',
            `${c.name}: not deleted ${seconds(o.overdueGraceMs)} after its deadline: ${why}`,
            {
              fix: 'run check without --canary and status: a target without leader, a failing DELETE (RBAC) or replicas down',
              details: {
                pod: c.name,
                uid: c.uid,
                deadlineMs: deadline,
                leader: facts.leader ?? null,
                job: facts.job ?? null,
              },
            },
          ),
        );
        continue;
      }
      const facts = await gatherFacts(
        {
          target,
          queue: o.store.queueOf(target),
          redis: o.store.redis,
          elections: o.store.elections,
          getPod: undefined,
        },
        { uid: c.uid, name: c.name },
      );
      const outcome = facts.job?.outcome?.outcome;
      const by = facts.job?.processedBy;
      const late = s.deletionMs === undefined ? undefined : s.deletionMs - deadline;
      if (late !== undefined) lateness.push(late);
      const details = {
        pod: c.name,
        uid: c.uid,
        finishedAtMs: s.finishedAtMs,
        deadlineMs: deadline,
        deletionTimestampMs: s.deletionMs ?? null,
        latenessMs: late ?? null,
        outcome: outcome ?? null,
        processedBy: by ?? null,
        attempts: facts.job?.attemptsMade ?? null,
      };
      // deletionTimestamp has 1 s resolution: early only when even its second ends before the deadline.
      if (s.deletionMs !== undefined && s.deletionMs + 1000 <= deadline)
        out.push(
          r.fail(
            'canary.deleted',
            `${c.name}: deleted ${seconds(deadline - s.deletionMs)} BEFORE its deadline (finishedAt + ${seconds(o.config.retentionMs)})${by ? ` by ${by}` : ''}`,
            {
              fix: 'a DELETE came before the retention: another cleaner (Kyuubi with cleanupTerminatedDriverPod.kind ALL, a TTL controller) or a skewed clock; see the clock checks and Kyuubi’s settings',
              details,
            },
          ),
        );
      else if (outcome !== 'accepted')
        out.push(
          r.fail(
            'canary.deleted',
            `${c.name}: deleted, but not by the fleet (its job's outcome: ${outcome ?? (facts.tombstoneTtlMs !== undefined ? 'cancelled, tombstoned' : 'none')})`,
            {
              fix: 'something else deletes driver pods: switch Kyuubi’s cleanup off on every server (kyuubi.kubernetes.spark.cleanupTerminatedDriverPod.kind=NONE)',
              details,
            },
          ),
        );
      else if (late !== undefined && late > o.overdueGraceMs)
        out.push(
          r.fail(
            'canary.deleted',
            `${c.name}: deleted once by ${by}, but ${seconds(late)} after its deadline (overdue after ${seconds(o.overdueGraceMs)})`,
            {
              fix: 'the fleet is slow: see status (overdue jobs), the API rate (apiQps) and the leaders’ logs',
              details,
            },
          ),
        );
      else
        out.push(
          r.pass(
            'canary.deleted',
            `${c.name}: deleted once by ${by ?? 'the fleet'} (outcome accepted), ${late === undefined ? 'at an unknown time' : `${seconds(late)} after its deadline`}`,
            { details },
          ),
        );
    }
    if (lateness.length > 0)
      out.push(
        r.pass(
          'canary.lateness',
          `lateness after the deadline (1 s timestamps): min ${seconds(Math.min(...lateness))}, max ${seconds(Math.max(...lateness))}`,
          { details: { latenessMs: lateness } },
        ),
      );
    return out;
  } catch (err) {
    out.push(
      r.unreachable('canary.create', `canary: stopped: ${firstLine(err)}`, {
        fix: 'check the API server, Redis and the leadership backend, then run it again',
      }),
    );
    return out;
  } finally {
    await watch.stop();
    out.push(await deleteLeftovers(o, runId, r));
  }
}

/** Deletes every pod of this run still there (with its UID as precondition); the result says how many. */
async function deleteLeftovers(
  o: CanaryOptions,
  runId: string,
  r: ReturnType<typeof resultsOf>,
): Promise<CheckResult> {
  const ns = o.target.namespace;
  const path = `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`;
  const timeout = () => AbortSignal.timeout(o.requestTimeoutMs);
  try {
    await o.ctx.limiter.take(timeout());
    const list = await o.ctx.http.request(
      'GET',
      `${path}?labelSelector=${encodeURIComponent(`${CANARY_LABEL}=${runId}`)}`,
      {
        signal: timeout(),
      },
    );
    if (list.statusCode !== 200) throw new Error(`listing the canaries answered ${list.statusCode}`);
    const items = (
      (list.body as { items?: { metadata?: { name?: string; uid?: string } }[] }).items ?? []
    ).filter((p) => p.metadata?.name && p.metadata.uid);
    for (const p of items) {
      await o.ctx.limiter.take(timeout());
      const res = await o.ctx.http.request(
        'DELETE',
        `${path}/${encodeURIComponent(p.metadata?.name ?? '')}`,
        {
          signal: timeout(),
          body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: p.metadata?.uid } },
        },
      );
      if (res.statusCode >= 300 && res.statusCode !== 404 && res.statusCode !== 409)
        throw new Error(`DELETE ${p.metadata?.name} answered ${res.statusCode}`);
    }
    return items.length === 0
      ? r.pass('canary.cleanup', 'cleanup: no canary left behind')
      : r.pass(
          'canary.cleanup',
          `cleanup: deleted ${items.length} canary pod${items.length === 1 ? '' : 's'} left behind`,
          {
            details: { deleted: items.map((p) => p.metadata?.name) },
          },
        );
  } catch (err) {
    return r.fail('canary.cleanup', `cleanup: could not delete the canaries: ${firstLine(err)}`, {
      fix: `kubectl -n ${ns} delete pods -l ${CANARY_LABEL}=${runId}`,
    });
  }
}
