/**
 * `check --canary NAMESPACE`: the end-to-end proof on the real cluster. It creates a few canary pods
 * (src/check/canary-pod.ts) in a namespace the fleet cleans, waits for them to finish, waits for the running
 * fleet to act on each — until its deadline plus the fleet's overdue grace at most — and judges each
 * (src/check/canary-verdict.ts): deleted once, by the fleet, after the retention and not before, from the
 * pods' own timestamps (seen on a watch of the canaries) and the fleet's record of each pod (its cleanup job,
 * as `explain` reads it; its outcome is the one each replica counts in `sdc_cleanup_outcomes_total`). In dry
 * run the fleet sends no DELETE: the canary then proves that it would delete each once when due (`would-delete`)
 * and the command deletes them itself.
 *
 * It touches nothing else: it watches, creates and deletes only pods labelled with its run's id, and deletes
 * whatever of them is left at the end (also after a failure or Ctrl-C), with the pod's UID as precondition.
 * Creating pods needs `create` on pods in the namespace, which the shipped RBAC does not grant: asked first with
 * a SelfSubjectAccessReview, and refused with the commands that grant it for the run (docs/operations.md,
 * "Canary").
 */
import { randomBytes } from 'node:crypto';
import type { Job } from 'bullmq';
import { type CheckResult, firstLine, resultsOf } from '../check-result.ts';
import { parseLabelSelector } from '../config/label-selector.ts';
import type { CleanerConfig } from '../config/schema.ts';
import { type AppStateSettings, podState } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import { createPodReflector } from '../kube/pod-reflector.ts';
import { createLogger } from '../log.ts';
import { type TargetRef, targetLabel } from '../queue/job-identity.ts';
import { sleep } from '../sleep.ts';
import { gatherFacts } from '../status/explain-facts.ts';
import type { StateStore } from '../status/state-store.ts';
import { reviewAccess } from './access-review.ts';
import { CANARY_LABEL, CanaryLabelsError, canaryLabels, canaryPod } from './canary-pod.ts';
import { type CanaryObservation, judgeCanary } from './canary-verdict.ts';
import type { OpenedContext } from './context-checks.ts';

/** Options of {@link runCanary}. */
export interface CanaryOptions {
  readonly ctx: OpenedContext;
  readonly target: TargetRef;
  readonly config: Pick<CleanerConfig, 'retentionMs' | 'labelSelector' | 'dryRun' | 'applicationState'>;
  /** The fleet's overdue grace (src/cleaner/self-check.ts), ms: a canary acted on later than this fails. */
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

/** What the watch saw of one canary (mutable while it runs). */
type Seen = { -readonly [K in keyof CanaryObservation]: CanaryObservation[K] } & { failedReason?: string };

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;

/** Runs the canary (see the module comment); never rejects. */
export async function runCanary(o: CanaryOptions): Promise<CheckResult[]> {
  const { target, ctx } = o;
  const ns = target.namespace;
  const group = `canary ${targetLabel(target)}`;
  const r = resultsOf(group);
  const signal = () => AbortSignal.any([o.signal, AbortSignal.timeout(o.requestTimeoutMs)]);
  const selector = parseLabelSelector(o.config.labelSelector);
  const runId = randomBytes(4).toString('hex');
  try {
    canaryLabels(selector, runId, `${runId}-0`);
  } catch (err) {
    if (!(err instanceof CanaryLabelsError)) throw err;
    return [
      r.fail('canary.labels', `canary: ${err.message}`, {
        fix: 'labelSelector must select driver pods: a label it both requires and excludes selects none',
      }),
    ];
  }
  const refusal = await permissionRefusal(o);
  if (refusal) return [refusal];

  const seen = new Map<string, Seen>();
  const watch = createPodReflector({
    http: ctx.http,
    limiter: ctx.limiter,
    namespace: ns,
    labelSelector: `${CANARY_LABEL}=${runId}`,
    log: createLogger({ level: 'silent' }),
    now: o.now,
    backoffMs: 200,
    maxBackoffMs: 2000,
  });
  watch.addEventHandler((event, pod) => record(seen, pod, event === 'deleted', o.config.applicationState));
  await watch.start();
  const out: CheckResult[] = [];
  try {
    out.push(...(await create(o, runId, selector, seen, signal)));
    if (out.some((x) => x.status !== 'pass')) return out;
    const created = [...seen.entries()].map(([uid, s]) => ({ uid, name: s.name }));
    o.progress(`canary: ${created.length} pods created in ${ns}; waiting for them to finish`);

    // Wait for them to finish (scheduling, the image pull).
    const startBy = performance.now() + o.startTimeoutMs;
    const finished = (uid: string) =>
      seen.get(uid)?.finishedAtMs !== undefined || seen.get(uid)?.gone === true;
    while (!created.every((c) => finished(c.uid)) && performance.now() < startBy && !o.signal.aborted)
      await sleep(200, o.signal);
    const unfinished = created.filter((c) => !finished(c.uid));
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
            `${failedRun.length} canaries failed (${seen.get(failedRun[0]?.uid ?? '')?.failedReason})`,
            {
              fix: 'policy COMPLETED keeps failed drivers: use an image whose `true` exits 0',
            },
          ),
    );
    o.progress(
      `canary: finished; waiting for the fleet to ${o.config.dryRun ? 'judge them due (dry run)' : 'delete them'} (retention ${seconds(o.config.retentionMs)})`,
    );

    // Wait for the fleet to act on each, until its deadline + the fleet's overdue grace at most.
    const queue = o.store.queueOf(target);
    const actedOn = async (uid: string) => {
      if (!o.config.dryRun) return seen.get(uid)?.gone === true;
      if (seen.get(uid)?.gone) return true;
      const job = (await queue.getJob(uid)) as Job | undefined;
      return job?.finishedOn !== undefined;
    };
    const deadlineOf = (uid: string) => (seen.get(uid)?.finishedAtMs ?? o.now()) + o.config.retentionMs;
    const giveUpAt = Math.max(...created.map((c) => deadlineOf(c.uid) + o.overdueGraceMs));
    const pending = new Set(created.map((c) => c.uid));
    while (pending.size > 0 && o.now() < giveUpAt && !o.signal.aborted) {
      for (const uid of [...pending]) if (await actedOn(uid)) pending.delete(uid);
      if (pending.size > 0) await sleep(Math.min(500, Math.max(10, giveUpAt - o.now())), o.signal);
    }

    // Judge each from what the watch saw and the fleet's record.
    const lateness: number[] = [];
    for (const c of created) {
      const facts = await gatherFacts(
        { target, queue, redis: o.store.redis, elections: o.store.elections, getPod: undefined },
        { uid: c.uid, name: c.name },
      );
      const verdict = judgeCanary(
        group,
        { ...(seen.get(c.uid) as Seen), uid: c.uid },
        { job: facts.job, tombstoned: facts.tombstoneTtlMs !== undefined, leader: facts.leader },
        {
          retentionMs: o.config.retentionMs,
          overdueGraceMs: o.overdueGraceMs,
          dryRun: o.config.dryRun,
          target: targetLabel(target),
        },
      );
      out.push(verdict);
      const late = verdict.details?.latenessMs;
      if (verdict.status === 'pass' && typeof late === 'number') lateness.push(late);
    }
    if (lateness.length > 0)
      out.push(
        r.pass(
          'canary.lateness',
          `lateness after the deadline (${o.config.dryRun ? "the leader's clock" : '1 s timestamps'}): min ${seconds(Math.min(...lateness))}, max ${seconds(Math.max(...lateness))}`,
          { details: { latenessMs: lateness } },
        ),
      );
    if (o.config.dryRun && out.every((x) => x.status !== 'fail'))
      out.push(
        r.warn(
          'canary.dry-run',
          'dry run: the fleet judged the canaries due but sent no DELETE; the command deletes them',
          {
            fix: 'after the cut-over (dryRun: false), run the canary again to see the fleet’s own DELETE',
          },
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
    // Pushed before the results are handed back: the caller gets this line too.
    out.push(await deleteLeftovers(o, runId, r));
  }
}

/** Records what one event shows of a canary. */
function record(seen: Map<string, Seen>, pod: DriverPod, deleted: boolean, appState: AppStateSettings): void {
  const uid = pod.metadata?.uid;
  if (!uid) return;
  const s = seen.get(uid) ?? { name: pod.metadata?.name ?? '', uid, gone: false };
  const state = podState(pod, appState);
  if (state.terminal) {
    s.finishedAtMs ??= state.finishedAtMs;
    if (state.state !== 'FINISHED') s.failedReason ??= state.error ?? state.state;
  }
  const del = pod.metadata?.deletionTimestamp;
  if (del && s.deletionMs === undefined) s.deletionMs = Date.parse(del);
  if (deleted) s.gone = true;
  seen.set(uid, s);
}

/** May this identity create (and delete) pods in the namespace? Asked, not tried; a result when not. */
async function permissionRefusal(o: CanaryOptions): Promise<CheckResult | undefined> {
  const ns = o.target.namespace;
  const r = resultsOf(`canary ${targetLabel(o.target)}`);
  try {
    const answers = await Promise.all(
      ['create', 'delete'].map((verb) =>
        reviewAccess(
          o.ctx.http,
          o.ctx.limiter,
          { verb, resource: 'pods', namespace: ns },
          o.requestTimeoutMs,
          o.signal,
        ),
      ),
    );
    const refused = ['create', 'delete'].filter((_, i) => !(answers[i]?.answered && answers[i].allowed));
    if (refused.length === 0) return undefined;
    return r.fail(
      'canary.permissions',
      `canary: ${refused.join(' and ')} on pods in ${ns} refused: the canary cannot ${refused.includes('create') ? 'create its pods' : 'delete what it leaves'}`,
      {
        fix: `grant create on pods in ${ns} for the canary only, then take it back: kubectl -n ${ns} create role spark-driver-cleaner-canary --verb=create --resource=pods && kubectl -n ${ns} create rolebinding spark-driver-cleaner-canary --role=spark-driver-cleaner-canary --serviceaccount=spark-driver-cleaner:spark-driver-cleaner; afterwards kubectl -n ${ns} delete rolebinding,role spark-driver-cleaner-canary (docs/operations.md, "Canary")`,
        details: { namespace: ns, refused },
      },
    );
  } catch (err) {
    return r.unreachable('canary.permissions', `canary: the API server did not answer: ${firstLine(err)}`, {
      fix: 'check the API server, then run the canary again',
    });
  }
}

/** Creates the canaries, recording each in `seen`; one result (a failure stops at the first refused pod). */
async function create(
  o: CanaryOptions,
  runId: string,
  selector: ReturnType<typeof parseLabelSelector>,
  seen: Map<string, Seen>,
  signal: () => AbortSignal,
): Promise<CheckResult[]> {
  const ns = o.target.namespace;
  const r = resultsOf(`canary ${targetLabel(o.target)}`);
  const names: string[] = [];
  for (let i = 1; i <= o.count; i++) {
    const name = `sdc-canary-${runId}-${i}`;
    await o.ctx.limiter.take(signal());
    const res = await o.ctx.http.request('POST', `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`, {
      signal: signal(),
      body: canaryPod({ namespace: ns, name, labels: canaryLabels(selector, runId, name), image: o.image }),
    });
    const body = res.body as { metadata?: { uid?: string }; message?: string };
    const uid = body?.metadata?.uid;
    if (res.statusCode !== 201 || !uid)
      return [
        r.fail(
          'canary.create',
          `canary: creating ${name} was refused (${res.statusCode}: ${body?.message ?? 'no message'})`,
          {
            fix: 'a ResourceQuota, LimitRange, admission policy or Pod Security level of the namespace refuses the canary: see the message; --canary-image names a registry the cluster can pull from',
            details: { namespace: ns, code: res.statusCode },
          },
        ),
      ];
    names.push(name);
    if (!seen.has(uid)) seen.set(uid, { name, uid, gone: false });
  }
  return [
    r.pass(
      'canary.create',
      `created ${names.length} canary pods (image ${o.image}) in ${ns}: ${names.join(', ')}`,
      {
        details: { runId, image: o.image, pods: names },
      },
    ),
  ];
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
