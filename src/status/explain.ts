/**
 * `explain`: what each part of the cleaner knows about one pod, in plain words, and one sentence that
 * answers "why is this pod still here?" (or "where did it go?"). Pure: the facts are gathered elsewhere
 * (src/status/explain-facts.ts) and "now" is an argument, so every verdict is a table-driven case.
 *
 * The verdict follows the cleaner's own story, in its order: is it a driver pod we select? is it being
 * deleted? is it finished, and does the policy let us delete it? when is its deadline? is a job waiting
 * for it, and does a replica lead the target to run it? what did the job end with?
 */

import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy } from '../config/schema.ts';
import { type AppStateSettings, podState } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import { type TargetRef, targetLabel } from '../queue/job-identity.ts';
import { deadlineMs, decide, finishTime } from '../rules/decision.ts';
import { type KeptByPodPhase, keptByPodPhase } from '../rules/kept-by-pod-phase.ts';
import { when } from './status-format.ts';

/** A pod's cleanup job as Redis has it. Times are epoch ms. */
export interface JobFacts {
  /** BullMQ state: delayed, waiting, active, completed, failed, prioritized, unknown. */
  readonly state: string;
  /** The job name: the pod's name. */
  readonly pod: string;
  readonly deadlineMs: number | undefined;
  readonly attemptsMade: number;
  /** The handler's outcome of a completed job (its `returnvalue`), e.g. `{ outcome: 'accepted' }`. */
  readonly outcome: { readonly outcome?: string; readonly reason?: string } | undefined;
  /** Why its last attempt failed (the API Status reason, code and message), when it did. */
  readonly failedReason: string | undefined;
  /** When it finished (completed or failed). */
  readonly finishedOnMs: number | undefined;
  /** The replica that processed it last. */
  readonly processedBy: string | undefined;
  /** When a delayed job runs next (its due time). */
  readonly nextRunMs: number | undefined;
}

/** Everything `explain` knows about one pod. */
export interface ExplainFacts {
  readonly target: TargetRef;
  /** The pod's name, when known (given, or the job's name). */
  readonly name: string | undefined;
  /** The UID asked about or found (the GET's, or the job id). */
  readonly uid: string | undefined;
  /**
   * The pod as read: `present` with the object, `absent` (404, or a pod of that name with another UID), or
   * `unread` with why (no name known, offline, the API server unreachable).
   */
  readonly pod:
    | { readonly read: 'present'; readonly object: DriverPod }
    | { readonly read: 'absent'; readonly otherUid?: string }
    | { readonly read: 'unread'; readonly why: string };
  readonly job: JobFacts | undefined;
  /** The tombstone's remaining life, ms, when the UID is tombstoned. */
  readonly tombstoneTtlMs: number | undefined;
  /** The target's leader (etcd's, or the consuming worker's without etcd); undefined when none. */
  readonly leader: string | undefined;
  /** Where the leader was read from, for the leader line. */
  readonly leaderFrom: 'etcd' | 'zookeeper' | 'redis-workers';
}

/** The configuration `explain` judges with: the replicas' own. */
export interface ExplainRules {
  readonly selector: LabelSelector;
  /** The selector as configured, quoted in the verdict. */
  readonly selectorText: string;
  readonly policy: Policy;
  /** Kyuubi's state settings (`applicationStateSource`, `applicationStateContainer`). */
  readonly appState: AppStateSettings;
  readonly retentionMs: number;
  /** Epoch ms. */
  readonly nowMs: number;
}

/** The kind of verdict: scripts and tests branch on it, people read `verdict`. */
export type VerdictKind =
  | 'deleted'
  | 'gone'
  | 'pending'
  | 'deleting-now'
  | 'kept'
  | 'not-matching'
  | 'being-deleted'
  | 'stuck'
  | 'unknown';

/** The explanation: one line per part, then the verdict. */
export interface Explanation {
  /** `context:namespace`. */
  readonly target: string;
  /** The target's cluster name (src/kube/cluster-identity.ts). */
  readonly cluster: string;
  readonly pod: string | null;
  readonly uid: string | null;
  readonly parts: {
    readonly apiServer: string;
    readonly classification: string;
    readonly job: string;
    readonly tombstone: string;
    readonly leader: string;
  };
  readonly kind: VerdictKind;
  readonly verdict: string;
}

/** Explains one pod from its facts. */
export function explain(f: ExplainFacts, r: ExplainRules): Explanation {
  const now = r.nowMs;
  const t = (ms: number | undefined) => when(ms, now);
  const pod = f.pod.read === 'present' ? f.pod.object : undefined;
  const rules = { selector: r.selector, policy: r.policy, appState: r.appState };
  const decision = pod ? decide(pod, rules) : undefined;
  const state = pod ? podState(pod, r.appState) : undefined;
  const kept = pod ? keptByPodPhase(pod, rules) : undefined;
  // The pod's own finish time, as the handler judges it; without one, the deadline its job was stored with.
  const finished = pod && state?.terminal ? finishTime(pod, state, now).ms : undefined;
  const deadline =
    finished !== undefined ? deadlineMs(finished, r.retentionMs, now).deadlineMs : f.job?.deadlineMs;
  const job = f.job;
  const outcome = job?.outcome?.outcome;
  const noLeader = `stuck: no leader for this target (${f.leaderFrom === 'redis-workers' ? 'no worker consumes its queue' : `no replica campaigns in ${f.leaderFrom}`})`;

  const apiServer =
    f.pod.read === 'present'
      ? `present: phase ${pod?.status?.phase ?? '?'}, uid ${pod?.metadata?.uid}` +
        (pod?.metadata?.deletionTimestamp ? `, deletionTimestamp ${pod.metadata.deletionTimestamp}` : '')
      : f.pod.read === 'absent'
        ? f.pod.otherUid
          ? `absent: a new pod of that name has uid ${f.pod.otherUid}`
          : 'absent (404)'
        : `not read: ${f.pod.why}`;
  const classification =
    (!decision
      ? '-'
      : decision.action === 'enqueue'
        ? `${decision.state.state}, eligible under policy ${r.policy}; deadline ${t(deadline)} (finishedAt + ${r.retentionMs / 1000} s)`
        : decision.action === 'cancel'
          ? 'being deleted (deletionTimestamp set): the cleaner cancels its job and tombstones it'
          : `left alone: ${decision.reason} (state ${state?.state})`) +
    (state?.unreadable.length ? `; unreadable: ${state.unreadable.join('; ')}` : '');
  const jobLine = !job
    ? 'none'
    : [
        `${job.state}`,
        `attempts ${job.attemptsMade}`,
        job.deadlineMs !== undefined ? `deadline ${t(job.deadlineMs)}` : undefined,
        job.state === 'delayed' ? `next run ${t(job.nextRunMs)}` : undefined,
        outcome ? `outcome ${outcome}${job.outcome?.reason ? ` (${job.outcome.reason})` : ''}` : undefined,
        job.failedReason ? `last failure: ${job.failedReason}` : undefined,
        job.finishedOnMs !== undefined ? `finished ${t(job.finishedOnMs)}` : undefined,
        job.processedBy ? `by ${job.processedBy}` : undefined,
      ]
        .filter(Boolean)
        .join(', ');
  const tombstone =
    f.tombstoneTtlMs === undefined
      ? 'none'
      : `present for another ${Math.round(f.tombstoneTtlMs / 1000)} s: a replica saw the pod being deleted ` +
        '(deletionTimestamp or DELETE event), so no replica enqueues this UID again';
  const leader = f.leader
    ? `${f.leader} (${f.leaderFrom === 'redis-workers' ? 'the worker consuming the queue' : `${f.leaderFrom} election`})`
    : 'none';

  const [kind, verdict] = ((): [VerdictKind, string] => {
    const deletedByUs = outcome === 'accepted';
    if (deletedByUs && !pod?.metadata?.deletionTimestamp && f.pod.read !== 'present')
      return ['deleted', `deleted at ${t(job?.finishedOnMs)} by ${job?.processedBy ?? 'the leader'}`];
    if (pod?.metadata?.deletionTimestamp) {
      if (deletedByUs)
        return [
          'deleted',
          `deleted at ${t(job?.finishedOnMs)} by ${job?.processedBy ?? 'the leader'}; the API server is finishing it (grace period or finalizers)`,
        ];
      return [
        'being-deleted',
        `being deleted by someone else since ${pod.metadata.deletionTimestamp}: the cleaner leaves it to them (grace period or finalizers keep it)`,
      ];
    }
    if (decision?.action === 'none') {
      switch (decision.reason) {
        case 'not-selected':
          return ['not-matching', `not a driver pod: labels do not match ${r.selectorText}`];
        case 'policy':
          return ['kept', `kept: policy COMPLETED keeps failed drivers (state ${state?.state})`];
        case 'not-terminal':
          if (kept) return ['kept', keptSentence(kept, r.appState, t)];
          return [
            'kept',
            `kept: not finished (state ${state?.state}); its cleanup starts when the driver terminates`,
          ];
        default:
          return ['kept', 'kept: the pod has no uid, name or namespace; the cleaner cannot handle it'];
      }
    }
    if (f.pod.read === 'absent') {
      if (outcome) return ['gone', `gone: its job ended ${outcome} at ${t(job?.finishedOnMs)}`];
      if (f.tombstoneTtlMs !== undefined) return ['gone', 'gone: deleted by someone else (tombstoned)'];
      return ['gone', 'not on the API server, and nothing about it in Redis'];
    }
    // A selected, finished, eligible pod (or one not read: judged by its job alone).
    if (!job) {
      if (f.tombstoneTtlMs !== undefined)
        return ['being-deleted', 'being deleted by someone else: tombstoned, so the cleaner leaves it'];
      if (!f.leader) return ['stuck', `${noLeader}, and no replica has enqueued it`];
      if (f.pod.read === 'unread') return ['unknown', 'unknown: no job in Redis and the pod was not read'];
      return [
        'stuck',
        `not enqueued: no replica has a job for it (is a replica watching ${targetLabel(f.target)}?)`,
      ];
    }
    switch (job.state) {
      case 'completed':
        if (outcome === 'accepted')
          return ['deleted', `deleted at ${t(job.finishedOnMs)} by ${job.processedBy}`];
        return [
          'kept',
          `kept: its job ran at ${t(job.finishedOnMs)} and ended ${outcome ?? '?'}${job.outcome?.reason ? ` (${job.outcome.reason})` : ''}`,
        ];
      case 'failed':
        return [
          'stuck',
          `stuck: the cleanup failed ${job.attemptsMade} times (${job.failedReason ?? '?'}); the leader's periodic reconcile retries it`,
        ];
      case 'active':
        return ['deleting-now', `being deleted now by ${job.processedBy ?? f.leader ?? 'the leader'}`];
      default: {
        if (!f.leader)
          return [
            'stuck',
            `${noLeader}; its deadline ${deadline !== undefined && deadline <= now ? 'passed' : 'is'} ${t(deadline)}`,
          ];
        const at = Math.max(deadline ?? 0, job.nextRunMs ?? 0);
        if (at > now) return ['pending', `will be deleted at ${t(at)} by ${f.leader}`];
        // Due: a healthy leader takes it within moments; one that lasts is what `status` counts as overdue.
        return [
          'pending',
          `due since ${t(at)}: ${f.leader} deletes it when its worker takes the job (if this lasts, see status and ${f.leader}'s log)`,
        ];
      }
    }
  })();

  return {
    target: targetLabel(f.target),
    cluster: f.target.cluster,
    pod: f.name ?? null,
    uid: f.uid ?? null,
    parts: { apiServer, classification, job: jobLine, tombstone, leader },
    kind,
    verdict,
  };
}

/**
 * The verdict of a pod kept by the `POD` state source although its driver container has ended: which setting
 * keeps it, and what to set in both places to clean such pods.
 */
function keptSentence(k: KeptByPodPhase, s: AppStateSettings, t: (ms: number | undefined) => string): string {
  const ended = `exit code ${k.exitCode ?? '?'}${k.finishedAtMs !== undefined ? ` at ${t(k.finishedAtMs)}` : ''}`;
  const holder = k.running.length ? ` (${k.running.join(', ')} still running)` : '';
  return (
    `kept: its driver container ${k.container} has ended (${ended}) but the pod is ${k.phase ?? 'not terminal'}${holder}, ` +
    `and applicationStateSource is ${s.source}: like Kyuubi with kyuubi.kubernetes.application.state.source=POD (its default), ` +
    'the cleaner reads the pod phase and counts the application as running, so it never cleans this pod. ' +
    'To clean drivers when their container ends, set kyuubi.kubernetes.application.state.source=CONTAINER ' +
    `(and kyuubi.kubernetes.application.state.container=${s.container}) on every Kyuubi server and ` +
    `applicationStateSource=CONTAINER (SDC_APPLICATION_STATE_SOURCE) with applicationStateContainer=${s.container} here; ` +
    'or make the sidecar exit when the driver does'
  );
}

/** The explanation as text, one line per part, the verdict last. */
export function formatExplanation(e: Explanation): string {
  return [
    `${e.target}/${e.pod ?? '?'} (uid ${e.uid ?? '?'}, cluster ${e.cluster})`,
    `  API server:     ${e.parts.apiServer}`,
    `  classification: ${e.parts.classification}`,
    `  cleanup job:    ${e.parts.job}`,
    `  tombstone:      ${e.parts.tombstone}`,
    `  leader:         ${e.parts.leader}`,
    `=> ${e.verdict}`,
    '',
  ].join('\n');
}
