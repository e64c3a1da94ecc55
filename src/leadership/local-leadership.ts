/**
 * Single-server fallback: with no etcd configured, this replica leads every target. Running several
 * replicas this way is uncoordinated (each would DELETE): the target cleaner warns when it sees another
 * worker on the same queue.
 */
import { FencedError } from './fenced-error.ts';
import { type Leadership, leadershipSubscribers } from './leadership.ts';

/** Creates local leadership for one target: elected on `start()`, lost on `resign()`. */
export function createLocalLeadership(opts: { replicaId: string }): Leadership {
  let leader = false;
  let resigned = false;
  const events = leadershipSubscribers();
  return {
    addEventHandler: (e) => events.add(e),
    // Alone, it leads whether its informer is ready or not: its term waits for the first list.
    readyWhen: () => undefined,
    start() {
      if (leader || resigned) return;
      leader = true;
      events.onElected();
    },
    async resign() {
      resigned = true;
      if (!leader) return;
      leader = false;
      events.onLost('resigned');
    },
    stepDown(reason) {
      // Alone, there is no one to hand over to: end the term and begin a new one with a fresh worker.
      if (!leader) return;
      events.onLost(`stepped down: ${reason}`);
      events.onElected();
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
      return leader ? opts.replicaId : undefined;
    },
  };
}
