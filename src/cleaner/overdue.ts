/**
 * Overdue driver pods: the outcome check every replica makes from its own informer, whether or not it
 * leads. A pod is **overdue** when the cleaner should have deleted it and has not: terminal, selected,
 * eligible under the policy, not being deleted, and past `deadline + grace` (deadline = finish time +
 * retention, as the enqueue side and the handler compute it: src/rules/decision.ts `finishTime`, else when
 * this replica first saw it terminal). Pure: "now" is an argument. In dry run the same rule counts the pods the
 * cleaner *would* have deleted by now (their would-delete deadline passed) and that are still present: nothing
 * else deleted them either.
 *
 * Why the grace: a healthy target deletes a pod within moments of its deadline, but a failover leaves a
 * target without a consuming leader for up to one lease TTL (the old lease expiring) plus the new leader's
 * start (informer sync, reconcile); the default grace is `2 × electionTtl + 30 s` so that one failover never
 * counts as overdue, while a target that stops being cleaned shows up within a minute.
 */

import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy } from '../config/schema.ts';
import { type AppStateSettings, KYUUBI_STATE_DEFAULTS } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import { deadlineMs, decide, finishTime } from '../rules/decision.ts';

/** One overdue pod. Times are epoch ms. */
export interface OverduePod {
  readonly name: string;
  readonly uid: string;
  readonly deadlineMs: number;
  /** How long past `deadline + grace`, ms (≥ 0). */
  readonly overdueMs: number;
}

/** What {@link findOverdue} found in one target. */
export interface OverdueReport {
  readonly count: number;
  /** How long past its deadline the oldest overdue pod is, ms (deadline, not deadline + grace); 0 when none. */
  readonly oldestAgeMs: number;
  /** The overdue pods, oldest deadline first, at most `limit`. */
  readonly oldest: readonly OverduePod[];
}

/** Inputs of {@link findOverdue}. */
export interface OverdueOptions {
  readonly selector: LabelSelector;
  readonly policy: Policy;
  /** Kyuubi's state settings: what counts as finished (src/kube/application-state.ts); default Kyuubi's. */
  readonly appState?: AppStateSettings;
  /** Retention after finishedAt, ms. */
  readonly retentionMs: number;
  /** How long past its deadline a pod may still be present before it counts, ms (≥ 0). */
  readonly graceMs: number;
  /** Epoch ms. */
  readonly nowMs: number;
  /**
   * When this replica first saw a terminal pod without a finish time (an evicted driver), epoch ms; the
   * enqueue side uses the same stand-in. Undefined → the pod is not judged (no deadline known yet).
   */
  readonly firstSeenTerminalMs?: (uid: string) => number | undefined;
  /** How many pods {@link OverdueReport.oldest} lists (default 5). */
  readonly limit?: number;
}

/** An empty report. */
export const NONE_OVERDUE: OverdueReport = { count: 0, oldestAgeMs: 0, oldest: [] };

/**
 * The overdue pods among `pods` (a target's informer cache). A pod the cleaner cannot classify, one it
 * leaves alone (not selected, not terminal, kept by the policy) and one being deleted are never overdue.
 */
export function findOverdue(pods: Iterable<DriverPod>, opts: OverdueOptions): OverdueReport {
  const found: OverduePod[] = [];
  const rules = {
    selector: opts.selector,
    policy: opts.policy,
    appState: opts.appState ?? KYUUBI_STATE_DEFAULTS,
  };
  for (const pod of pods) {
    const decision = decide(pod, rules);
    if (decision.action !== 'enqueue') continue;
    const uid = pod.metadata?.uid ?? '';
    const finishedAtMs = finishTime(pod, decision.state, opts.nowMs).ms ?? opts.firstSeenTerminalMs?.(uid);
    if (finishedAtMs === undefined) continue;
    const deadline = deadlineMs(finishedAtMs, opts.retentionMs, opts.nowMs).deadlineMs;
    const overdueMs = opts.nowMs - (deadline + opts.graceMs);
    if (overdueMs < 0) continue;
    found.push({ name: pod.metadata?.name ?? '', uid, deadlineMs: deadline, overdueMs });
  }
  if (found.length === 0) return NONE_OVERDUE;
  found.sort((a, b) => a.deadlineMs - b.deadlineMs);
  const oldest = found[0] as OverduePod;
  return {
    count: found.length,
    oldestAgeMs: opts.nowMs - oldest.deadlineMs,
    oldest: found.slice(0, opts.limit ?? 5),
  };
}
