/**
 * The self-check: every replica watches the outcome of cleaning, not just its own work, so that a target
 * that silently stops being cleaned is visible in a metric and a log line without anyone counting pods.
 *
 * - **Overdue pods** ({@link findOverdue}) are computed from this replica's informer whenever they are asked
 *   for (a scrape, the leaders API) and once per check period.
 * - **The leader checks itself**: it leads the target but its worker has not been running for longer than
 *   `leaderStuckMs`; or every job its worker ran has been `fenced` for that long (it cannot confirm its
 *   leadership: a warn line at half that, at most {@link FENCED_WARN_MS}); or it has made no progress for that
 *   long although pods were overdue **and** its queue shows work its worker should be taking and is not (a job
 *   waiting, a delayed job past due and not promoted, an overdue pod without a job, or a queue it cannot
 *   read) → one error line and it **steps down**: it ends this term and reports the target not ready until it
 *   has shown it can make progress again (src/cleaner/stuck-hold.ts), so the next replica by the assignment
 *   takes over and reconciles, and this one stays out of the target's line. Progress is a job processed,
 *   whatever its outcome (`failed` included) but `fenced` and `aborted`, or a pod handled by the term's
 *   reconcile. A leader whose jobs run and fail (403, 5xx) is **failing, not stuck**: its jobs wait out their
 *   retry backoff (delayed, not yet due) or have used up their attempts (failed, retried by the periodic
 *   reconcile); another leader would fail the same way, and stepping down would only reset their attempts. It
 *   keeps leadership; the `failed` outcomes are counted (`sdc_cleanup_outcomes_total`) and alerted on.
 * - **A follower** that sees pods overdue for longer than `followerAlarmMs` past their deadline logs an
 *   error naming the leader (at most once per `followerAlarmMs` per target).
 * - **In dry run** nothing is deleted, so the overdue pods are those past their *would-delete* deadline: pods
 *   that nothing else (Kyuubi's own cleanup) deleted either. They say nothing about the leader (its jobs end
 *   `would-delete` and the pods stay), so they never make it step down nor a follower alarm; the leader logs one
 *   warning instead (at most once per `followerAlarmMs`): dry run left on after Kyuubi's cleanup was switched off
 *   cleans nothing.
 *
 * Intervals between two moments of this process use the monotonic clock (`monotonicNow`); only deadlines
 * from Kubernetes timestamps use a wall clock (`now`): the one the handler judges "due" by, never ahead of the
 * API server's (src/kube/server-clock.ts), so a replica whose clock is ahead sees no false overdue pods, and
 * a pod counts as overdue only once the cleaner itself would have deleted it `grace` earlier.
 */

import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy } from '../config/schema.ts';
import { FAILOVER_TIMERS, leaseTimers } from '../failover-timers.ts';
import type { AppStateSettings } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import type { Logger } from '../log.ts';
import type { QueueLook } from '../queue/queue-look.ts';
import { withTimeout } from '../with-timeout.ts';
import { findOverdue, NONE_OVERDUE, type OverdueReport } from './overdue.ts';

/**
 * How long past its due time a delayed job may still be delayed before the worker counts as not taking it,
 * ms: a consuming worker promotes a due job within milliseconds; this leaves room for the two processes'
 * wall clocks (BullMQ scores delayed jobs by the adding process's clock).
 */
export const DUE_JOB_SLACK_MS = 10_000;

/** The longest the self-check waits for its look at the queue, ms; past it the queue counts as unreadable. */
export const QUEUE_LOOK_TIMEOUT_MS = 5000;

/**
 * A leader fenced on every job this long (or half its stuck threshold, if that is shorter) gets one warn line,
 * ms: a handover fences a job or two for a moment; a leader that still leads and cannot pass its fence for
 * seconds cannot delete anything.
 */
export const FENCED_WARN_MS = FAILOVER_TIMERS.fencedWarnMs;

/** Thresholds of the self-check, ms. */
export interface SelfCheckSettings {
  /** A pod is overdue this long after its deadline (config `overdueGrace`). */
  readonly graceMs: number;
  /**
   * A leader that has not run its worker, or made no progress while pods were overdue and jobs were there for
   * its worker to take, this long steps down.
   */
  readonly leaderStuckMs: number;
  /** A follower alarms when a pod is this far past its deadline. */
  readonly followerAlarmMs: number;
  /** How often the check runs. */
  readonly intervalMs: number;
}

/**
 * The self-check's thresholds from the election TTL: grace `2 × TTL + 30 s` unless given (one failover —
 * the old lease expiring, the new leader syncing and reconciling — never counts as overdue), the leader's
 * stuck threshold equal to the grace, the follower's alarm at twice the grace, a check every 5 s.
 * @param electionTtlSeconds the lease TTL, s.
 * @param graceMs the configured grace, ms (undefined: the default).
 */
export function selfCheckSettings(electionTtlSeconds: number, graceMs?: number): SelfCheckSettings {
  const t = leaseTimers(electionTtlSeconds, graceMs);
  return {
    graceMs: t.overdueGraceMs,
    leaderStuckMs: t.leaderStuckMs,
    followerAlarmMs: t.followerAlarmMs,
    intervalMs: FAILOVER_TIMERS.selfCheckIntervalMs,
  };
}

/** What the self-check reads from one target's cleaner. */
export interface SelfCheckSubject {
  /** The informer's cached pods of the target. */
  pods(): readonly DriverPod[];
  /** The informer has loaded its first list (before that, nothing is judged). */
  readonly informerSynced: boolean;
  readonly isLeader: boolean;
  /** This replica's worker for the target is consuming. */
  readonly workerRunning: boolean;
  /**
   * Monotonic ms of the last progress: a job the worker finished processing (any outcome, `failed` included,
   * but `fenced` and `aborted`) or a pod the term's reconcile handled; undefined if none yet.
   */
  readonly lastProgressMs: number | undefined;
  /**
   * The worker's jobs fenced one after another with no job making progress in between: since when and last
   * when (monotonic ms), and the last fence's reason; undefined once a job made progress (or none was fenced).
   */
  readonly fenced: { readonly sinceMs: number; readonly lastMs: number; readonly reason: string } | undefined;
  /**
   * Looks at the target's queue (a few Redis reads), asked only when a leader made no progress while pods were
   * overdue. Rejects when Redis cannot be read.
   * @param overdueUids UIDs of the oldest overdue pods
   */
  lookAtQueue(overdueUids: readonly string[]): Promise<QueueLook>;
  /**
   * Monotonic ms since when this replica leads: when the current term began, or an earlier term of this
   * replica that was lost shortly before this one began (a lease lost and won back gives no fresh grace);
   * undefined when not leading.
   */
  readonly leaderSinceMs: number | undefined;
  /** When this replica first saw a terminal pod without a finish time, epoch ms. */
  firstSeenTerminalMs(uid: string): number | undefined;
  /**
   * Ends this term so that another replica leads, and reports the target not ready on this replica until it
   * has shown it can make progress again (src/cleaner/stuck-hold.ts).
   */
  stepDown(reason: string): void;
  /** The current leader's replica id, if known. */
  currentLeader(): Promise<string | undefined>;
}

/** Options of {@link createSelfCheck}. */
export interface SelfCheckOptions {
  readonly subject: SelfCheckSubject;
  readonly selector: LabelSelector;
  readonly policy: Policy;
  /** Kyuubi's state settings (src/kube/application-state.ts); default Kyuubi's. */
  readonly appState?: AppStateSettings;
  readonly retentionMs: number;
  /** A pod counts as overdue this long after its deadline, ms (default in the config: 2 × electionTtl + 30 s). */
  readonly graceMs: number;
  /** A leader stuck this long steps down, ms (the config uses `graceMs`). */
  readonly leaderStuckMs: number;
  /** A follower alarms when the oldest overdue pod is this far past its deadline, ms (the config: 2 × grace). */
  readonly followerAlarmMs: number;
  /** Dry run deletes nothing: the overdue pods are those past their would-delete deadline (see the module). */
  readonly dryRun: boolean;
  readonly log: Logger;
  /** Epoch ms (deadlines from Kubernetes timestamps): the due clock, `ServerClock.dueNow`. */
  readonly now: () => number;
  /** Monotonic ms (intervals). */
  readonly monotonicNow: () => number;
}

/** One target's self-check. */
export interface SelfCheck {
  /**
   * The overdue pods now, from the informer's cache (empty before it synced); in dry run, the pods past their
   * would-delete deadline plus the grace.
   */
  overdue(): OverdueReport;
  /**
   * One check: the leader's stuck test and the follower's alarm (in dry run, the leader's warning instead of the
   * alarm). Call periodically (the replica does, every few seconds); returns what it did, for tests.
   */
  check(): Promise<'ok' | 'stepped-down' | 'alarmed'>;
}

/** Creates the self-check of one target. */
export function createSelfCheck(opts: SelfCheckOptions): SelfCheck {
  const s = opts.subject;
  /** Monotonic ms since when the leader's worker has not been running (undefined while it runs). */
  let workerDownSinceMs: number | undefined;
  /** Monotonic ms of the last follower alarm. */
  let lastAlarmMs: number | undefined;

  function overdue(): OverdueReport {
    if (!s.informerSynced) return NONE_OVERDUE;
    return findOverdue(s.pods(), {
      selector: opts.selector,
      policy: opts.policy,
      appState: opts.appState,
      retentionMs: opts.retentionMs,
      graceMs: opts.graceMs,
      nowMs: opts.now(),
      firstSeenTerminalMs: (uid) => s.firstSeenTerminalMs(uid),
    });
  }

  /** The last "failing, not stuck" verdict was logged (once per stretch without progress). */
  let failingLoggedSince: number | undefined;
  /** The stretch of fenced jobs last warned about (its start). */
  let fencedWarnedSince: number | undefined;
  const fencedWarnMs = Math.min(FENCED_WARN_MS, opts.leaderStuckMs / 2);

  /** Why the leader is stuck on its fence, or undefined; warns once per stretch past {@link FENCED_WARN_MS}. */
  function fencedReason(leaderSinceMs: number): string | undefined {
    const f = s.fenced;
    // Jobs fenced at the end of an earlier term (a handover) say nothing about this one.
    if (!f || f.lastMs < leaderSinceMs) return undefined;
    const since = Math.max(f.sinceMs, leaderSinceMs);
    const forMs = Math.round(f.lastMs - since);
    if (forMs >= opts.leaderStuckMs) return `leader fenced on every job for ${forMs} ms (${f.reason})`;
    if (forMs >= fencedWarnMs && fencedWarnedSince !== f.sinceMs) {
      fencedWarnedSince = f.sinceMs;
      opts.log.warn(
        { fencedMs: forMs, why: f.reason, stepDownAfterMs: opts.leaderStuckMs },
        'self-check: every job fenced while leading: this leader cannot confirm its leadership; it steps down if this goes on',
      );
    }
    return undefined;
  }

  /** Why the leader is stuck, or undefined when it is not. */
  async function stuckReason(report: OverdueReport, mono: number): Promise<string | undefined> {
    // Before the informer's first list the term waits for it by design (and warns): nothing to judge.
    if (!s.isLeader || s.leaderSinceMs === undefined || !s.informerSynced) {
      workerDownSinceMs = undefined;
      return undefined;
    }
    if (s.workerRunning) workerDownSinceMs = undefined;
    else workerDownSinceMs ??= Math.max(mono, s.leaderSinceMs);
    if (workerDownSinceMs !== undefined && mono - workerDownSinceMs >= opts.leaderStuckMs) {
      return `leader without a running worker for ${Math.round(mono - workerDownSinceMs)} ms`;
    }
    const fenced = fencedReason(s.leaderSinceMs);
    if (fenced) return fenced;
    if (report.count === 0) return undefined;
    const since = Math.max(s.lastProgressMs ?? Number.NEGATIVE_INFINITY, s.leaderSinceMs);
    if (mono - since < opts.leaderStuckMs) return undefined;
    const idle = `leader made no progress for ${Math.round(mono - since)} ms while ${report.count} pods were overdue`;
    let look: QueueLook;
    try {
      look = await withTimeout(
        s.lookAtQueue(report.oldest.map((p) => p.uid)),
        QUEUE_LOOK_TIMEOUT_MS,
        'queue look',
      );
    } catch (err) {
      // The worker cannot read it either; another replica may reach Redis (a partition).
      return `${idle}, and its queue cannot be read: ${(err as Error).message}`;
    }
    if (look.waiting > 0) return `${idle}: ${look.waiting} jobs are due and waiting, its worker takes none`;
    if (look.earliestDelayedPastDueMs !== undefined && look.earliestDelayedPastDueMs >= DUE_JOB_SLACK_MS)
      return `${idle}: a delayed job is ${Math.round(look.earliestDelayedPastDueMs)} ms past due, not promoted`;
    if (look.missing > 0) return `${idle}: ${look.missing} of the oldest overdue pods have no job`;
    // Every job is in its retry backoff or out of attempts: failing, not stuck (the failed outcomes say why).
    if (failingLoggedSince !== since) {
      failingLoggedSince = since;
      opts.log.info(
        { overdue: report.count, why: idle },
        "self-check: the overdue pods' jobs are failing and retried with backoff; not stuck, keeping leadership",
      );
    }
    return undefined;
  }

  async function check(): Promise<'ok' | 'stepped-down' | 'alarmed'> {
    const report = overdue();
    const mono = opts.monotonicNow();
    // In dry run the pods stay however well the leader works: only its worker running is judged.
    const stuck = await stuckReason(opts.dryRun ? NONE_OVERDUE : report, mono);
    const fields = {
      overdue: report.count,
      oldestOverdueMs: report.oldestAgeMs,
      oldest: report.oldest.map((p) => ({ pod: p.name, uid: p.uid })),
    };
    if (stuck) {
      opts.log.error(
        { ...fields, why: stuck },
        'self-check: leader is stuck; stepping down, not ready for this target until it shows it can make progress',
      );
      workerDownSinceMs = undefined;
      s.stepDown(`self-check: ${stuck}`);
      return 'stepped-down';
    }
    if (opts.dryRun) return dryRunWarning(report, mono, fields);
    if (!s.isLeader && report.count > 0 && report.oldestAgeMs >= opts.followerAlarmMs) {
      if (lastAlarmMs === undefined || mono - lastAlarmMs >= opts.followerAlarmMs) {
        lastAlarmMs = mono;
        const leader = await s.currentLeader().catch(() => undefined);
        opts.log.error(
          { ...fields, leader: leader ?? null },
          leader
            ? `self-check: pods overdue; the leader ${leader} is not cleaning this target`
            : 'self-check: pods overdue and this target has no leader',
        );
        return 'alarmed';
      }
    }
    return 'ok';
  }

  /**
   * In dry run, the leader (one line per target, not one per replica) warns when pods stay `followerAlarmMs` past
   * their would-delete deadline: nothing deletes them.
   */
  function dryRunWarning(
    report: OverdueReport,
    mono: number,
    fields: Record<string, unknown>,
  ): 'ok' | 'alarmed' {
    if (!s.isLeader || report.count === 0 || report.oldestAgeMs < opts.followerAlarmMs) return 'ok';
    if (lastAlarmMs !== undefined && mono - lastAlarmMs < opts.followerAlarmMs) return 'ok';
    lastAlarmMs = mono;
    opts.log.warn(
      {
        ...fields,
        dryRun: true,
        fix: "if Kyuubi's cleanup is off (kind=NONE), turn dry run off (dryRun=false, SDC_DRY_RUN=false); if it is on, its settings differ from the cleaner's (policy, retention, labelSelector)",
      },
      'self-check: dry run is on and pods are past their would-delete deadline: nothing deletes them',
    );
    return 'alarmed';
  }

  return { overdue, check };
}
