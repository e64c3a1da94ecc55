/**
 * The cleanup handler's contract: its dependencies and its signature. The handler itself is
 * workers/cleanup-driver-pod.ts; the composition root (src/replica.ts) hands it to each target cleaner, so
 * nothing else in src/ imports workers/.
 */

import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy, RecheckMode } from '../config/schema.ts';
import type { AppStateSettings } from '../kube/application-state.ts';
import type { DriverPod } from '../kube/driver-pod.ts';
import type { PodApi } from '../kube/pod-api.ts';
import type { CleanupJobData } from './job-data.ts';
import type { Outcome } from './outcome.ts';

/** What the handler needs. Test doubles implement the same shapes. */
export interface CleanupDeps {
  pods: PodApi;
  /** The informer's cached pod of that name (`cache` and `resource-version` modes). */
  cached: (name: string) => DriverPod | undefined;
  recheck: RecheckMode;
  /**
   * True when the informer's cache may be behind the API server (its list or watch failing for longer than a
   * threshold): the re-check then GETs the pod whatever `recheck` says. Absent: the cache is trusted.
   */
  cacheUntrusted?: () => boolean;
  /**
   * True when this replica already saw a DELETE of that pod UID accepted (src/cleaner/accepted-deletes.ts):
   * the job is then `already-deleting`, with no fence and no request. Redis (jobs, tombstones) can lose that
   * memory and a lagging informer cache can still show the pod undeleted. Absent: nothing is remembered.
   */
  acceptedBefore?: (uid: string) => boolean;
  /**
   * Resolves when this replica may still DELETE for the target; rejects with {@link FencedError} otherwise. A
   * read from the leadership backend: asked before the re-check, and again once the DELETE has its rate
   * limiter's token.
   */
  fence: (signal: AbortSignal) => Promise<void>;
  /**
   * Synchronous, I/O-free part of the fence (lease freshness on the monotonic clock), checked again as the
   * DELETE is written. A pause of the whole machine (a VM stopped) does not advance that clock: only `fence`
   * sees it.
   */
  stillLeader: () => boolean;
  selector: LabelSelector;
  policy: Policy;
  /**
   * This replica's retention, ms: the handler's own deadline is the re-checked pod's finish time plus this
   * (src/rules/decision.ts `finishTime`), whatever retention the replica that enqueued the job had.
   */
  retentionMs: number;
  /**
   * When this replica first saw the pod (by UID) terminal, epoch ms: its finish time when the pod carries none
   * of its own (no `finishedAt`, no condition times). Absent, or undefined for the UID: the stored deadline stands.
   */
  firstSeenTerminalMs?: (uid: string) => number | undefined;
  /**
   * Kyuubi's state settings: the re-check judges "finished" as the enqueue side did (the target cleaner
   * passes its own). Absent: Kyuubi's defaults.
   */
  appState?: AppStateSettings;
  dryRun: boolean;
  /**
   * The clock that judges whether a job is due, epoch ms: the earlier of this replica's wall clock and a lower
   * bound of the API server's (src/kube/server-clock.ts `dueNow`), so a replica whose clock is ahead does
   * not delete early. Also the outcome's `latenessMs`.
   */
  now: () => number;
}

/**
 * Processes one cleanup job: `(job, deps, signal) → Outcome`.
 * `signal` is aborted when leadership is lost or the replica shuts down. Never throws for API failures
 * (they are `failed` outcomes); a throw is a bug, recorded by BullMQ.
 */
export type CleanupHandler = (
  job: CleanupJobData,
  deps: CleanupDeps,
  signal: AbortSignal,
) => Promise<Outcome>;
