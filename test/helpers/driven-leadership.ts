/**
 * A {@link Leadership} the test drives: `elect()` and `lose()` flip it and call the events at once, as the
 * etcd leadership does when a lease is lost and re-granted. Fencing follows the flag.
 */

import { FencedError } from '../../src/leadership/fenced-error.ts';
import { type Leadership, leadershipSubscribers } from '../../src/leadership/leadership.ts';

export interface DrivenLeadership extends Leadership {
  /** Becomes the leader and calls `onElected` (a no-op when leading already). */
  elect(): void;
  /** Stops leading and calls `onLost` (a no-op when not leading). */
  lose(reason?: string): void;
  /** How many times each event was called. */
  readonly counts: { elected: number; lost: number; resigned: number };
}

/** Creates the double; `start()` does nothing (the test elects). */
export function drivenLeadership(replicaId = 'test-replica'): DrivenLeadership {
  const events = leadershipSubscribers();
  let leader = false;
  const counts = { elected: 0, lost: 0, resigned: 0 };
  const lose = (reason = 'lost by the test') => {
    if (!leader) return;
    leader = false;
    counts.lost += 1;
    events.onLost(reason);
  };
  return {
    addEventHandler: (e) => events.add(e),
    readyWhen: () => undefined,
    counts,
    start() {},
    elect() {
      if (leader) return;
      leader = true;
      counts.elected += 1;
      events.onElected();
    },
    lose,
    async resign() {
      counts.resigned += 1;
      lose('resigned');
    },
    stepDown(reason) {
      lose(`stepped down: ${reason}`);
    },
    get isLeader() {
      return leader;
    },
    async fence() {
      if (!leader) throw new FencedError('not the leader');
    },
    stillLeader: () => leader,
    // No backend, no session.
    session: undefined,
    async currentLeader() {
      return leader ? replicaId : undefined;
    },
  };
}
