/**
 * One target's driver pods kept by Kyuubi's `POD` state source although their driver container has ended
 * (src/rules/kept-by-pod-phase.ts): counted from this replica's informer whenever asked (a scrape:
 * `sdc_pods_kept_by_pod_phase`), and recorded in Redis by the target's leader for `status`
 * (src/queue/kept-pods.ts) — when the count or the names change, else every `refreshMs`: one write per
 * target per change, not per check.
 */

import type { DriverPod } from '../kube/driver-pod.ts';
import type { KeptPods } from '../queue/kept-pods.ts';
import type { DecisionRules } from '../rules/decision.ts';
import { findKeptByPodPhase, type KeptReport, NONE_KEPT } from '../rules/kept-by-pod-phase.ts';

/** What the reporter reads and writes. */
export interface KeptPodsReportOptions {
  readonly rules: DecisionRules;
  /** The informer's cached pods of the target. */
  pods(): Iterable<DriverPod>;
  /** The informer has listed the pods (before that, nothing is counted). */
  synced(): boolean;
  isLeader(): boolean;
  /** Records the count in Redis (never rejects). */
  record(kept: KeptPods): Promise<void>;
  readonly replicaId: string;
  /** Wall clock, epoch ms (the record's `atMs`). */
  now(): number;
  /** Monotonic clock, ms. */
  monotonicNow(): number;
  /** How often an unchanged count is written again, ms. */
  readonly refreshMs: number;
}

/** The kept-pod count of one target. */
export interface KeptPodsReport {
  /** The kept pods now, from the informer (none before its first list, and under `CONTAINER`). */
  report(): KeptReport;
  /** As the leader: writes the count when it changed or is older than `refreshMs`. Call periodically. */
  recordIfLeader(): Promise<void>;
}

/** Creates the kept-pod count of one target. */
export function createKeptPodsReport(opts: KeptPodsReportOptions): KeptPodsReport {
  let written: { text: string; atMs: number } | undefined;
  const report = () => (opts.synced() ? findKeptByPodPhase(opts.pods(), opts.rules) : NONE_KEPT);
  return {
    report,
    async recordIfLeader() {
      if (!opts.isLeader()) {
        written = undefined; // a new term writes at once
        return;
      }
      if (!opts.synced()) return;
      const now = report();
      const text = JSON.stringify(now);
      const mono = opts.monotonicNow();
      if (written && written.text === text && mono - written.atMs < opts.refreshMs) return;
      written = { text, atMs: mono };
      await opts.record({
        count: now.count,
        pods: now.pods,
        container: opts.rules.appState.container,
        atMs: opts.now(),
        replica: opts.replicaId,
      });
    },
  };
}
