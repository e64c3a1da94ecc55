/**
 * The DELETE path of one target: what the cleanup handler (workers/cleanup-driver-pod.ts) is given to decide
 * and send a DELETE, in the order it uses them —
 *
 * 1. `acceptedBefore`: a UID whose DELETE this replica saw accepted is `already-deleting`, with no request;
 * 2. `fence` (a read from the leadership backend) before the re-check, and again once the rate limiter gives
 *    the DELETE its token; `stillLeader` (the lease's freshness, no I/O) as the request is written;
 * 3. the re-check: the informer's copy (`cached`) or a live GET, by `recheck` and the cache's trust;
 * 4. the DELETE with the pod's UID (and resourceVersion) as preconditions, one at a time per UID: a run of the
 *    same job whose lock BullMQ lost meanwhile waits for the first DELETE's answer instead of sending its own.
 *
 * Rules: Kubernetes DeleteOptions `preconditions` (the API server answers 409 when the UID or
 * resourceVersion differ), BullMQ's at-least-once job delivery (a job may run twice).
 */

import type { LabelSelector } from '../config/label-selector.ts';
import type { Policy, RecheckMode } from '../config/schema.ts';
import type { AppStateSettings } from '../kube/application-state.ts';
import type { PodApi } from '../kube/pod-api.ts';
import type { PodInformer } from '../kube/pod-informer.ts';
import type { Leadership } from '../leadership/leadership.ts';
import type { CleanupDeps } from '../rules/handler.ts';
import type { AcceptedDeletes } from './accepted-deletes.ts';
import type { CacheTrust } from './cache-trust.ts';
import type { FollowerSide } from './follower-side.ts';

/** Dependencies of {@link createDeletePath}. */
export interface DeletePathOptions {
  /** The target's pod API (rate-limited, shared by the context). */
  pods: PodApi;
  informer: Pick<PodInformer, 'get'>;
  leadership: Pick<Leadership, 'fence' | 'stillLeader'>;
  acceptedDeletes: AcceptedDeletes;
  /** Marks the UID as being deleted by this replica while its DELETE is in flight. */
  follower: Pick<FollowerSide, 'whileDeleting' | 'firstSeenTerminalMs'>;
  cacheTrust: CacheTrust;
  recheck: RecheckMode;
  selector: LabelSelector;
  policy: Policy;
  appState: AppStateSettings;
  /** This replica's retention, ms. */
  retentionMs: number;
  dryRun: boolean;
  /** The clock that judges whether a job is due, epoch ms (src/kube/server-clock.ts `dueNow`). */
  dueNow: () => number;
}

/** Creates the handler's dependencies for one target (see the module comment for their order of use). */
export function createDeletePath(opts: DeletePathOptions): CleanupDeps {
  const { pods, leadership, acceptedDeletes } = opts;
  return {
    pods: {
      get: (namespace, name, signal) => pods.get(namespace, name, signal),
      delete: (namespace, name, preconditions, signal, gates) =>
        opts.follower.whileDeleting(preconditions.uid, () =>
          acceptedDeletes.deleteOnce(preconditions.uid, () =>
            pods.delete(namespace, name, preconditions, signal, gates),
          ),
        ),
    },
    cached: (name) => opts.informer.get(name),
    recheck: opts.recheck,
    cacheUntrusted: () => opts.cacheTrust.untrusted(),
    acceptedBefore: (uid) => acceptedDeletes.acceptedBefore(uid),
    fence: (signal) => leadership.fence(signal),
    stillLeader: () => leadership.stillLeader(),
    selector: opts.selector,
    policy: opts.policy,
    retentionMs: opts.retentionMs,
    firstSeenTerminalMs: (uid) => opts.follower.firstSeenTerminalMs(uid),
    appState: opts.appState,
    dryRun: opts.dryRun,
    now: opts.dueNow,
  };
}
