/**
 * The gates of one target's leadership (src/leadership/gated-leadership.ts): what an elected replica waits
 * for before it consumes.
 * - `cluster-name-unchecked`: the first look at the cluster name's claims in Redis has not answered yet;
 * - `cluster-name-conflict`: another cluster claims the same cluster name (src/cleaner/cluster-claims.ts);
 * - `previous-release`: a replica of release 0.1.0 may still consume the target under its old names
 *   (src/leadership/previous-release-gate.ts): on etcd, its old election; in single-server mode and on ZooKeeper
 *   (which 0.1.0 does not know: a 0.1.0 replica beside a ZooKeeper fleet runs in single-server mode), the
 *   workers of its old queue.
 */
import { FencedError } from '../leadership/fenced-error.ts';
import { BRIEF_WAIT_MS, type LeadershipGate } from '../leadership/gated-leadership.ts';

import type { Logger } from '../log.ts';
import { previousReleaseQueueName, type TargetRef } from '../queue/job-identity.ts';
import type { ClusterClaims } from './cluster-claims.ts';

/** The reason of the gate that refuses a cluster name claimed by another cluster (`sdc_target_refused`). */
export const CLUSTER_NAME_CONFLICT = 'cluster-name-conflict';
/**
 * The reason of the gate that refuses a cluster whose replicas elect through two leadership backends
 * (`sdc_target_refused`).
 */
export const LEADERSHIP_BACKEND_CONFLICT = 'leadership-backend-conflict';

/**
 * How a replica waits for release 0.1.0: `election` — on a leadership backend 0.1.0 ran on, its old election
 * (src/leadership/open-backend.ts `previousRelease`); `queue-workers` — in single-server mode and on ZooKeeper,
 * the workers of its old queue.
 */
export type PreviousReleaseWait =
  | { readonly kind: 'election'; gateFor(target: TargetRef, log: Logger): LeadershipGate }
  | { readonly kind: 'queue-workers'; gateFor(queue: string): LeadershipGate };

/** A gate that is closed while `closed()` says so, fenced on that answer (no I/O). */
function stateGate(
  reason: string,
  closed: () => string | undefined,
  onChange: (cb: () => void) => void,
  quietMs = 0,
) {
  return {
    reason,
    quietMs,
    closed,
    onChange,
    async fence() {
      const why = closed();
      if (why) throw new FencedError(why);
    },
  } satisfies LeadershipGate;
}

/** The gates of `target`, in the order they are checked. */
export function targetGates(
  target: TargetRef,
  deps: { claims: ClusterClaims; previousRelease: PreviousReleaseWait; log: Logger },
): LeadershipGate[] {
  const { claims } = deps;
  const onClaims = (cb: () => void) => claims.onChange(cb);
  const gates: LeadershipGate[] = [
    stateGate(
      'cluster-name-unchecked',
      () =>
        !claims.checked(target.cluster)
          ? `checking in Redis that no other cluster uses the name ${target.cluster}`
          : undefined,
      onClaims,
      BRIEF_WAIT_MS,
    ),
    stateGate(
      LEADERSHIP_BACKEND_CONFLICT,
      () => claims.backendConflict(target.cluster, target.namespace),
      onClaims,
    ),
    stateGate(
      CLUSTER_NAME_CONFLICT,
      () => {
        const r = claims.refusal(target.cluster);
        return r === undefined || r === 'unchecked' ? undefined : r.message;
      },
      onClaims,
    ),
  ];
  const prev = deps.previousRelease;
  if (prev.kind === 'election') gates.push(prev.gateFor(target, deps.log));
  if (prev.kind === 'queue-workers') gates.push(prev.gateFor(previousReleaseQueueName(target)));
  return gates;
}
