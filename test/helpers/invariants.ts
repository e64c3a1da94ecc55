/**
 * The nemesis's invariants, judged from what the sandbox API server saw — its log of every DELETE (with
 * the pod it found and the pod it deleted, by the server's clock) and its store — never from the product's
 * own counters or logs. Pure functions: the test gathers the records, these say what is wrong.
 *
 * 1. Every pod DELETEd at most once: at most one DELETE the server applied, always; and at most one DELETE
 *    request answered normally (2xx, 404, 409) unless API faults hit that pod's DELETEs (a rejected,
 *    reset or abandoned DELETE is retried by design: there only applied ones count).
 * 2. Never before its deadline (finishedAt + retention, by the server's clock when the DELETE arrived). The
 *    retention is that of the replica process that sent the DELETE: in a fleet whose replicas disagree on it
 *    (a rolling update changing it), a pod is kept at least the retention of the replica that deletes it.
 * 3. Never a DELETE that deleted a non-terminal or unselected pod, never one of a UID the harness did not
 *    create, never one without `preconditions.uid` (the guard against re-created pods).
 * 4. None leaked: no selected terminal pod still present `settleMs` after its deadline.
 * 5. `sdc_overdue_pods` non-zero during every long enough window where pods were in fact overdue.
 * And no DELETE from a replica in a target the store has shown another replica leading for a second or more
 * (judged along ZooKeeper follower cuts, where the store is sampled).
 *
 * The pod is judged here on its own terms (labels, phase, the driver container's `finishedAt`), not with
 * the product's classification code, so a bug there cannot hide itself.
 */
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { DeleteRecord } from '../../harness/sandbox/apiserver/request-log.ts';

/** The invariant a violation breaks. */
export type InvariantName =
  | 'repeated-delete'
  | 'early-delete'
  | 'wrong-delete'
  | 'no-precondition'
  | 'terminating-delete'
  | 'leak'
  | 'overdue-metric-missed'
  | 'replica-exit'
  | 'stale-leader-delete';

/** One broken invariant, with what is needed to diagnose it. */
export interface Violation {
  invariant: InvariantName;
  /** The pod (`namespace/name`) and its UID, when the violation is about one pod. */
  pod?: string;
  uid?: string;
  /** Epoch ms (sandbox clock) of the offending request or observation. */
  atMs?: number;
  detail: string;
}

/** The driver container's name in Spark driver pods. */
const DRIVER_CONTAINER = 'spark-kubernetes-driver';

/** How the harness sees a pod, independently of the product: may the cleaner delete it, and from when. */
export interface PodJudgement {
  /** `spark-role=driver` and a `kyuubi-unique-tag` label (the product's default selector). */
  selected: boolean;
  /**
   * Kyuubi's rule: phase Succeeded/Failed; with the `CONTAINER` state source also the driver container
   * terminated (a sidecar may keep the phase Running).
   */
  terminal: boolean;
  /**
   * The finish time + retention, epoch ms: the driver container's finishedAt when it decides (`CONTAINER`), else
   * the last container's; undefined when not terminal, unknown, or the pod has no UID (never deleted).
   */
  deadlineMs: number | undefined;
}

/**
 * Judges one pod for a retention period (ms), under Kyuubi's `kyuubi.kubernetes.application.state.source`
 * (default `POD`, Kyuubi's).
 */
export function judgePod(pod: V1Pod, retentionMs: number, source: 'POD' | 'CONTAINER' = 'POD'): PodJudgement {
  // A malformed object (a test's on purpose: labels or statuses of the wrong type) is judged by what it has.
  const rawLabels: unknown = pod.metadata?.labels;
  const labels = (typeof rawLabels === 'object' && rawLabels !== null ? rawLabels : {}) as Record<
    string,
    string
  >;
  const selected = labels['spark-role'] === 'driver' && 'kyuubi-unique-tag' in labels;
  const rawStatuses: unknown = pod.status?.containerStatuses;
  const statuses = (Array.isArray(rawStatuses) ? rawStatuses : []) as V1ContainerStatus[];
  const driver = statuses.find((c) => c?.name === DRIVER_CONTAINER);
  const phase = pod.status?.phase;
  const byDriver = source === 'CONTAINER' && driver?.state?.terminated !== undefined;
  const terminal = byDriver || phase === 'Succeeded' || phase === 'Failed';
  const ends = (byDriver ? [driver] : statuses)
    .map((c) => c?.state?.terminated?.finishedAt)
    .filter((t) => t !== undefined)
    .map((t) => Date.parse(String(t)));
  const finishedMs = ends.length ? Math.max(...ends) : Number.NaN;
  // No UID, no DELETE: the cleaner deletes only under a UID precondition, so such a pod is never due.
  const uid: unknown = pod.metadata?.uid;
  const deletable = typeof uid === 'string' && uid !== '';
  return {
    selected,
    terminal,
    deadlineMs: terminal && deletable && Number.isFinite(finishedMs) ? finishedMs + retentionMs : undefined,
  };
}

const podName = (p: V1Pod) => `${p?.metadata?.namespace}/${p?.metadata?.name}`;

/** HTTP codes that mean the DELETE met an injected fault or no answer (0), not the pod. */
const FAULTED = new Set([0, 401, 403, 429, 500, 503]);

/** Options of {@link checkDeletes}. */
export interface DeleteCheckOptions {
  retentionMs: number;
  /**
   * The retention of the replica process that sent a DELETE, ms (the sender's own setting); undefined, or
   * absent: `retentionMs`, the fleet's.
   */
  retentionOf?: (rec: DeleteRecord) => number | undefined;
  /**
   * Windows (sandbox clock, epoch ms) of API faults that can hit DELETEs (verb delete or all), widened by
   * the client timeout: a pod with a DELETE arriving inside one counts applied DELETEs only.
   */
  apiFaultWindows: readonly { fromMs: number; toMs: number }[];
  /** UIDs of every pod the harness created. */
  knownUids: ReadonlySet<string>;
  /** Which replica sent a DELETE (from the per-replica recording proxies), for the messages. */
  sender?: (rec: DeleteRecord) => string | undefined;
  /**
   * UIDs of which a replica abandoned a DELETE before its answer arrived (its client timeout, seen by its
   * recording proxy): retried by design, like a DELETE hit by an API fault, so only applied ones count. A
   * sandbox slowed by the machine's load does that outside any injected fault.
   */
  abandonedUids?: ReadonlySet<string>;
}

/** Checks invariants 1–3 over every DELETE the server logged. */
export function checkDeletes(records: readonly DeleteRecord[], opts: DeleteCheckOptions): Violation[] {
  const out: Violation[] = [];
  const who = (r: DeleteRecord) => {
    const s = opts.sender?.(r);
    return s ? ` from ${s}` : '';
  };
  const byUid = new Map<string, DeleteRecord[]>();
  for (const r of records) {
    const uid = r.preconditionUid ?? r.uid ?? `unknown:${r.path}`;
    byUid.set(uid, [...(byUid.get(uid) ?? []), r]);
    // A faulted request was refused before the server read its body: the proxies check those (checkSent).
    if (r.preconditionUid === undefined && !FAULTED.has(r.code)) {
      out.push({
        invariant: 'no-precondition',
        pod: r.path,
        uid: r.uid,
        atMs: r.atMs,
        detail: `DELETE ${r.path}${who(r)} without preconditions.uid (code ${r.code})`,
      });
    } else if (r.preconditionUid !== undefined && !opts.knownUids.has(r.preconditionUid)) {
      out.push({
        invariant: 'wrong-delete',
        pod: r.path,
        uid: r.preconditionUid,
        atMs: r.atMs,
        detail: `DELETE ${r.path}${who(r)} of a UID the harness never created (code ${r.code})`,
      });
    }
    const found = r.found;
    if (found && found.metadata?.uid === r.preconditionUid) {
      const j = judgePod(found, opts.retentionOf?.(r) ?? opts.retentionMs);
      if (j.deadlineMs !== undefined && r.atMs < j.deadlineMs) {
        out.push({
          invariant: 'early-delete',
          pod: podName(found),
          uid: r.preconditionUid,
          atMs: r.atMs,
          detail: `DELETE${who(r)} arrived ${j.deadlineMs - r.atMs} ms before the deadline (code ${r.code})`,
        });
      }
    }
    if (r.applied) {
      const j = judgePod(r.applied, opts.retentionMs);
      if (!j.selected || !j.terminal) {
        const why = [j.selected ? '' : 'not selected', j.terminal ? '' : 'not terminal'].filter(Boolean);
        out.push({
          invariant: 'wrong-delete',
          pod: podName(r.applied),
          uid: r.applied.metadata?.uid,
          atMs: r.atMs,
          detail: `DELETE${who(r)} deleted a pod that was ${why.join(' and ')} (phase ${r.applied.status?.phase})`,
        });
      }
    }
  }
  const inWindow = (at: number) => opts.apiFaultWindows.some((w) => at >= w.fromMs && at <= w.toMs);
  for (const [uid, recs] of byUid) {
    const applied = recs.filter((r) => r.applied);
    const codes = recs.map((r) => `${r.code}${who(r)}`).join(', ');
    const found = recs.find((r) => r.found)?.found;
    const name = found ? podName(found) : recs[0]?.path;
    if (applied.length > 1) {
      out.push({
        invariant: 'repeated-delete',
        pod: name,
        uid,
        atMs: applied[1]?.atMs,
        detail: `${applied.length} DELETEs applied (codes ${codes})`,
      });
      continue;
    }
    const faulted =
      opts.abandonedUids?.has(uid) === true || recs.some((r) => FAULTED.has(r.code) || inWindow(r.atMs));
    // A DELETE its precondition refused (409) changed nothing: a re-run of a job interrupted between that
    // answer and its re-check (a leader killed then) sends it again, harmlessly.
    const answered = recs.filter((r) => !FAULTED.has(r.code) && r.code !== 409);
    if (!faulted && answered.length > 1) {
      out.push({
        invariant: 'repeated-delete',
        pod: name,
        uid,
        atMs: answered[1]?.atMs,
        detail: `${answered.length} DELETE requests outside API-fault windows (codes ${codes})`,
      });
    }
  }
  return out;
}

/**
 * Invariant 5: no DELETE of the product lands on a pod a person started deleting before its deadline. The
 * product's job only runs from the deadline on, so its re-check always comes after that deletion and must
 * see the `deletionTimestamp` — whatever its informer's cache (maybe stalled) still shows. A DELETE the API
 * server refused (409: the `resourceVersion` precondition caught the change) or that met a fault is fine.
 * @param personDeletedAt UID → when a person deleted it (epoch ms, sandbox clock)
 */
export function checkTerminatingDeletes(
  records: readonly DeleteRecord[],
  personDeletedAt: ReadonlyMap<string, number>,
  retentionMs: number,
  retentionOf?: (rec: DeleteRecord) => number | undefined,
): Violation[] {
  const out: Violation[] = [];
  for (const r of records) {
    if (r.code !== 200 && r.code !== 202) continue;
    const found = r.found;
    const uid = r.preconditionUid;
    if (!found || !uid || found.metadata?.uid !== uid || !found.metadata.deletionTimestamp) continue;
    const deletedAt = personDeletedAt.get(uid);
    const deadline = judgePod(found, retentionOf?.(r) ?? retentionMs).deadlineMs;
    if (deletedAt === undefined || deadline === undefined || deletedAt >= deadline) continue;
    out.push({
      invariant: 'terminating-delete',
      pod: podName(found),
      uid,
      atMs: r.atMs,
      detail: `DELETE (code ${r.code}) of a pod a person had deleted ${r.atMs - deletedAt} ms before, ${deadline - deletedAt} ms before its deadline`,
    });
  }
  return out;
}

/** A DELETE as a replica's recording proxy saw it leave. */
export interface SentDelete {
  replica: string;
  path: string;
  /** Epoch ms (system clock). */
  atMs: number;
  /** The body's `preconditions.uid`, `''` without one; undefined when the body never arrived whole. */
  uid?: string;
}

/** Invariant 3, from the replicas' side: every DELETE a replica sent carried `preconditions.uid`. */
export function checkSent(sent: readonly SentDelete[]): Violation[] {
  return sent
    .filter((d) => d.uid === '')
    .map((d) => ({
      invariant: 'no-precondition',
      pod: d.path,
      atMs: d.atMs,
      detail: `${d.replica} sent DELETE ${d.path} without preconditions.uid`,
    }));
}

/**
 * Who the store said led a namespace: its first candidate, read from the quorum's side by a read sent at
 * `fromMs` and answered at `toMs` (epoch ms, system clock, as the replicas' recording proxies): the answer
 * holds at some instant between the two.
 */
export interface LeaderSample {
  fromMs: number;
  toMs: number;
  namespace: string;
  /** The replica id, undefined when no replica was in line. */
  leader: string | undefined;
  /**
   * The sampling window it belongs to (one follower cut): spans never join two windows, as the leader may have
   * changed and changed back between them (another process of the same replica id, even). Default: one window.
   */
  window?: number;
}

/**
 * Invariant 8: no replica sends a DELETE in a target while the store has shown another replica leading it
 * for `marginMs` or more (judged where the store was sampled: along ZooKeeper follower cuts, where a leader
 * that confirmed itself with a plain read would go on deleting). Consecutive samples of a namespace naming the
 * same replica say it led from the first one's answer to the last one's sending; a DELETE of another replica
 * from `marginMs` after the first to the last is a violation. Nothing is judged across a change of leader
 * between two samples (when it happened is unknown), nor between two sampling windows.
 */
export function checkStaleLeaderDeletes(
  samples: readonly LeaderSample[],
  sent: readonly SentDelete[],
  marginMs = 1000,
): Violation[] {
  /** Per namespace, the spans in which one replica led throughout: [from, to]. */
  const spans: { namespace: string; leader: string; fromMs: number; toMs: number }[] = [];
  const byNs = new Map<string, LeaderSample[]>();
  for (const x of samples) {
    const key = `${x.namespace}\0${x.window ?? 0}`;
    byNs.set(key, [...(byNs.get(key) ?? []), x]);
  }
  for (const list of byNs.values()) {
    const namespace = list[0]?.namespace ?? '';
    list.sort((a, b) => a.fromMs - b.fromMs);
    let first: LeaderSample | undefined;
    let last: LeaderSample | undefined;
    const close = () => {
      if (first?.leader !== undefined && last && last.fromMs > first.toMs)
        spans.push({ namespace, leader: first.leader, fromMs: first.toMs, toMs: last.fromMs });
    };
    for (const x of list) {
      if (first && x.leader === first.leader) last = x;
      else {
        close();
        first = x;
        last = x;
      }
    }
    close();
  }
  const out: Violation[] = [];
  for (const d of sent) {
    const namespace = /\/namespaces\/([^/]+)\/pods\//.exec(d.path)?.[1];
    const span = spans.find(
      (x) =>
        x.namespace === namespace &&
        x.leader !== d.replica &&
        d.atMs >= x.fromMs + marginMs &&
        d.atMs <= x.toMs,
    );
    if (span)
      out.push({
        invariant: 'stale-leader-delete',
        pod: d.path,
        uid: d.uid,
        atMs: d.atMs,
        detail: `${d.replica} sent DELETE ${d.path} while the store showed ${span.leader} leading ${namespace}, since ${d.atMs - span.fromMs} ms or more`,
      });
  }
  return out;
}

/** Options of {@link findLeaks} and {@link overduePods}. */
export interface OverdueOptions {
  retentionMs: number;
  /** How long past its deadline a pod may still be present, ms. */
  graceMs: number;
  /** Epoch ms, sandbox clock. */
  nowMs: number;
}

/** Selected terminal pods, not being deleted, present more than `graceMs` after their deadline. */
export function overduePods(pods: readonly V1Pod[], opts: OverdueOptions): { pod: V1Pod; lateMs: number }[] {
  const out: { pod: V1Pod; lateMs: number }[] = [];
  for (const pod of pods) {
    if (pod.metadata?.deletionTimestamp) continue;
    const j = judgePod(pod, opts.retentionMs);
    if (!j.selected || j.deadlineMs === undefined) continue;
    const lateMs = opts.nowMs - j.deadlineMs;
    if (lateMs > opts.graceMs) out.push({ pod, lateMs });
  }
  return out;
}

/** Invariant 4: every pod still present `graceMs` (the settle time) after its deadline is a leak. */
export function findLeaks(pods: readonly V1Pod[], opts: OverdueOptions): Violation[] {
  return overduePods(pods, opts).map(({ pod, lateMs }) => ({
    invariant: 'leak',
    pod: podName(pod),
    uid: pod.metadata?.uid,
    atMs: opts.nowMs,
    detail: `still present ${lateMs} ms after its deadline (settle time ${opts.graceMs} ms)`,
  }));
}

/** One sample of a target: how many pods were in fact overdue, and what each replica's /metrics said. */
export interface OverdueSample {
  /** Epoch ms, sandbox clock. */
  atMs: number;
  /** `context:namespace`. */
  target: string;
  /** Overdue pods by the server's store (same grace as the product's metric). */
  actual: number;
  /** `sdc_overdue_pods` of the target per replica that answered; absent replicas did not answer or lack it. */
  reported: Record<string, number>;
}

/** Options of {@link checkOverdueMetric}. */
export interface OverdueMetricOptions {
  /** Windows shorter than this are not judged (the metric is sampled, not continuous), ms. */
  minWindowMs: number;
  /** The metric may lag the facts by this much (its refresh plus the scrape period), ms. */
  lagMs: number;
}

/** Maximal runs of samples with `actual > 0`, per target: [first, last] sample times. */
export function overdueWindows(
  samples: readonly OverdueSample[],
): Map<string, { fromMs: number; toMs: number }[]> {
  const out = new Map<string, { fromMs: number; toMs: number }[]>();
  const open = new Map<string, { fromMs: number; toMs: number }>();
  for (const s of [...samples].sort((a, b) => a.atMs - b.atMs)) {
    const cur = open.get(s.target);
    if (s.actual > 0) {
      if (cur) cur.toMs = s.atMs;
      else open.set(s.target, { fromMs: s.atMs, toMs: s.atMs });
    } else if (cur) {
      out.set(s.target, [...(out.get(s.target) ?? []), cur]);
      open.delete(s.target);
    }
  }
  for (const [target, w] of open) out.set(target, [...(out.get(target) ?? []), w]);
  return out;
}

/** Invariant 5: in every window of overdue pods at least `minWindowMs` long, some replica reported > 0. */
export function checkOverdueMetric(
  samples: readonly OverdueSample[],
  opts: OverdueMetricOptions,
): Violation[] {
  const out: Violation[] = [];
  for (const [target, windows] of overdueWindows(samples)) {
    for (const w of windows) {
      if (w.toMs - w.fromMs < opts.minWindowMs) continue;
      const seen = samples.some(
        (s) =>
          s.target === target &&
          s.atMs >= w.fromMs &&
          s.atMs <= w.toMs + opts.lagMs &&
          Object.values(s.reported).some((v) => v > 0),
      );
      if (!seen) {
        const peak = Math.max(
          ...samples
            .filter((s) => s.target === target && s.atMs >= w.fromMs && s.atMs <= w.toMs)
            .map((s) => s.actual),
        );
        out.push({
          invariant: 'overdue-metric-missed',
          pod: target,
          atMs: w.fromMs,
          detail: `up to ${peak} pods overdue for ${w.toMs - w.fromMs} ms, but no replica reported sdc_overdue_pods > 0`,
        });
      }
    }
  }
  return out;
}
