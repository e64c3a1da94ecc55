/**
 * A rolling update from release 0.1.0 without two leaders consuming at once. 0.1.0 names a target by its
 * context, not its cluster: its queue is `{<context>.<namespace>}` and its election
 * `<etcdKeyPrefix>election/<context>/<namespace>/` (src/queue/job-identity.ts `previousRelease…`), and its
 * replicas register as `<etcdKeyPrefix>members/<id>`. During a rollout both versions run side by side, each
 * with its own queue, so both leaders would DELETE the same pods.
 *
 * The gates here hold this version's leader until no 0.1.0 leader can consume:
 * - **etcd** ({@link createPreviousReleaseGates}): while any 0.1.0 member is alive in etcd, the leader of a
 *   target also campaigns in the target's 0.1.0 election — only once it leads the target's own election, so
 *   two replicas never wait on each other — and consumes only while it holds both. A 0.1.0 leader is thus
 *   never beside one of this version. With no 0.1.0 member alive, the old election is not needed; a leader
 *   that holds it keeps it until its term ends, so that a 0.1.0 replica starting then (a rollback) waits
 *   behind it. Each DELETE is fenced on the old election too, or on a fresh read that finds no 0.1.0 member.
 * - **single-server mode**: no election to share; the leader waits while a worker of the old queue is connected
 *   to Redis (src/queue/previous-release-workers.ts), {@link previousReleaseWorkerGate}.
 *
 * Jobs left in the old queue are not read: the new leader's reconcile enqueues every terminated driver pod its
 * informer lists. The old queue is never deleted automatically (another cluster's 0.1.0 fleet may use it):
 * docs/deployment.md "Upgrading" has the command. On an etcd shared with another cluster's 0.1.0 fleet whose
 * contexts have the same name, the two cannot be told apart: upgrade every fleet sharing the etcd.
 */
import type { Etcd3 } from 'etcd3';
import type { Logger } from '../log.ts';
import { type PreviousReleaseTarget, previousReleaseElectionPrefix } from '../queue/job-identity.ts';
import type { PreviousReleaseWorkers } from '../queue/previous-release-workers.ts';
import { withTimeout } from '../with-timeout.ts';
import type { BackendElection } from './backend.ts';
import { FencedError } from './fenced-error.ts';
import { createFreshRead } from './fresh-read.ts';
import { BRIEF_WAIT_MS, type LeadershipGate } from './gated-leadership.ts';

/** The gate's reason, as `sdc_target_waiting` labels it. */
export const PREVIOUS_RELEASE = 'previous-release';

/** A leader waiting this long on a 0.1.0 leader or worker is logged at warn, ms (a rollout takes less). */
export const PREVIOUS_RELEASE_WARN_AFTER_MS = 5 * 60_000;

/** What the etcd gates need of the replica's leaderships. */
export interface PreviousReleaseSources {
  client: Etcd3;
  /** `etcdKeyPrefix`. */
  root: string;
  /** The ids of the live 0.1.0 members, as the replica's view has them (src/leadership/etcd/view.ts). */
  members(): readonly string[];
  /** Calls `cb` after each change of the view. */
  onChange(cb: () => void): void;
  /** An election the balancer does not assign (src/leadership/leadership-group.ts `sideElection`). */
  sideElection(prefix: string, log: Logger): BackendElection;
  /** Timeout of the fencing read, ms. */
  readTimeoutMs: number;
}

/** Creates the etcd gate factory of a replica: one shared fencing read of the 0.1.0 members. */
export function createPreviousReleaseGates(src: PreviousReleaseSources): {
  gateFor(target: PreviousReleaseTarget, log: Logger): LeadershipGate;
} {
  const membersPrefix = `${src.root}members/`;
  // Coalesced: a burst of DELETEs costs about two reads of one key range, whatever the number of targets.
  const freshMembers = createFreshRead(() =>
    withTimeout(src.client.getAll().prefix(membersPrefix).limit(1).keys(), src.readTimeoutMs, 'read'),
  );
  return {
    gateFor(target, log) {
      const prefix = previousReleaseElectionPrefix(target, src.root);
      const old = src.sideElection(prefix, log.child({ election: 'release 0.1.0' }));
      const listeners: (() => void)[] = [];
      const notify = () => {
        for (const cb of listeners) cb();
      };
      let leading = false;
      const alive = () => src.members().length > 0;
      /** Campaigns in the old election while we lead and a 0.1.0 member lives (or while we hold it). */
      const update = () => {
        const want = leading && (alive() || old.isLeader);
        if (want !== old.wanted) old.setWanted(want);
      };
      old.addEventHandler({ onElected: notify, onLost: notify });
      src.onChange(() => {
        update();
        notify();
      });
      old.start();
      return {
        reason: PREVIOUS_RELEASE,
        warnAfterMs: PREVIOUS_RELEASE_WARN_AFTER_MS,
        closed() {
          if (old.isLeader) return undefined;
          const members = src.members();
          if (members.length === 0) return undefined;
          return (
            `replicas of release 0.1.0 are alive in etcd (${members.slice(0, 3).join(', ')}` +
            `${members.length > 3 ? ', …' : ''}) and one may lead this target's 0.1.0 election ${prefix}: ` +
            'consuming once this replica leads that election too, or no 0.1.0 replica is left (upgrade every ' +
            'fleet sharing this etcd)'
          );
        },
        onChange(cb) {
          listeners.push(cb);
        },
        innerLeading(l) {
          leading = l;
          update();
          if (!l) old.stepDown('the target’s own term ended');
        },
        async fence(signal) {
          if (old.isLeader) return old.fence(signal);
          let keys: string[];
          try {
            keys = await freshMembers(signal);
          } catch (err) {
            throw new FencedError(
              `cannot confirm that no release 0.1.0 replica is alive: ${(err as Error).message}`,
            );
          }
          if (keys.length > 0)
            throw new FencedError(
              'a release 0.1.0 replica is alive and this replica does not lead its election',
            );
        },
        resign: () => old.resign(),
      };
    },
  };
}

/**
 * The single-server gates of a replica's targets: each closed while a worker of its 0.1.0 queue is connected
 * to Redis, and before the first look. Fencing looks again (one CLIENT LIST shared by every DELETE that waits
 * for it, src/leadership/fresh-read.ts), so that a 0.1.0 replica started beside this one (a rollback) stops
 * this one's DELETEs at once rather than at the next periodic look.
 */
export function previousReleaseWorkerGates(
  workers: Pick<PreviousReleaseWorkers, 'consuming' | 'onChange' | 'look'>,
): {
  gateFor(queue: string): LeadershipGate;
} {
  const fresh = createFreshRead(() => workers.look());
  return { gateFor: (queue) => previousReleaseWorkerGate(workers, queue, fresh) };
}

/** The single-server gate of the target whose 0.1.0 queue is `queue` (see {@link previousReleaseWorkerGates}). */
function previousReleaseWorkerGate(
  workers: Pick<PreviousReleaseWorkers, 'consuming' | 'onChange'>,
  queue: string,
  look: (signal: AbortSignal) => Promise<void>,
): LeadershipGate {
  const closed = () => {
    const c = workers.consuming(queue);
    if (c === undefined) return `looking for workers of release 0.1.0 on its queue ${queue}`;
    if (c)
      return (
        `a worker of release 0.1.0 consumes this target's 0.1.0 queue ${queue}: consuming once it stops ` +
        '(upgrade every replica sharing this Redis)'
      );
    return undefined;
  };
  return {
    reason: PREVIOUS_RELEASE,
    warnAfterMs: PREVIOUS_RELEASE_WARN_AFTER_MS,
    // Every start waits for the first look: not worth a line per target.
    quietMs: BRIEF_WAIT_MS,
    closed,
    onChange: (cb) => workers.onChange(cb),
    async fence(signal) {
      try {
        await look(signal);
      } catch (err) {
        throw new FencedError(`cannot look for workers of release 0.1.0: ${(err as Error).message}`);
      }
      const why = closed();
      if (why) throw new FencedError(why);
    },
  };
}
