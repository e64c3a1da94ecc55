/**
 * The candidate and term bookkeeping both election backends share (src/leadership/etcd-leadership.ts,
 * src/leadership/zookeeper-election.ts): whether the election runs, is wanted, has resigned, is busy in a
 * campaign or term, and leads; the readiness probe; the subscribers told of each term; the wake-up of the
 * campaign loop; how a term ends; and the {@link BackendElection} object built over them. A backend keeps
 * what is its own: the campaign loop, fencing, deleting its candidate key or node, and resign's call.
 */
import type { Logger } from '../log.ts';
import type { BackendElection } from './backend.ts';
import { leadershipSubscribers } from './leadership.ts';

/** Options of {@link createCandidateState}. */
export interface CandidateStateOptions {
  log: Logger;
  /** Logs at debug each campaign interrupted before it was elected (default false). */
  logInterruptions?: boolean;
}

/** What a backend adds to its {@link CandidateState} to make its election. */
export interface BackendPart
  extends Pick<BackendElection, 'prefix' | 'stillLeader' | 'fence' | 'currentLeader'> {
  /** The campaign loop: started once by `start()`, runs while {@link CandidateState.running}. */
  campaign(): Promise<void>;
  /**
   * Called by `resign()` once the flags are cleared and before the term ends, to capture what the term holds
   * (its key or node, its lease or connection): returns the backend call that deletes the term's entry if
   * there is one still of the live session, run once the term has ended and the campaign loop is woken.
   * The call never rejects.
   */
  onResign(): () => Promise<void>;
  /** The session's age for {@link BackendElection.keepaliveAgeMs}, ms; asked only while running. */
  sessionAgeMs(): number | undefined;
}

/** One election's candidacy and current term, for its backend's campaign loop. */
export interface CandidateState {
  /** Started and not resigned: the campaign loop runs while true. */
  readonly running: boolean;
  /** Whether this replica should be a candidate (the balancer's `setWanted`). */
  readonly wanted: boolean;
  /** True during a term this replica won, until {@link CandidateState.endTerm}. */
  readonly leader: boolean;
  /** In a campaign or term (from waiting for the session to deleting the entry after it); set by the loop. */
  busy: boolean;
  /** Resolves at the next wake-up of the campaign loop (wanted changed, resigned). */
  readonly woken: Promise<void>;
  /** True once the current term (campaign or leadership) has been ended by {@link CandidateState.endTerm}. */
  readonly termEnded: boolean;
  /** Begins a term (a campaign, then leadership): the returned signal aborts when it ends. */
  beginTerm(): AbortSignal;
  /**
   * The term's candidate won: becomes leader, logs `elected leader` with `fields`, tells the subscribers, and
   * resolves when the term ends (`term`: the signal {@link CandidateState.beginTerm} returned).
   */
  lead(term: AbortSignal, fields: Record<string, unknown>): Promise<void>;
  /**
   * Ends the current term (if leader, exactly once) and wakes whatever the term waits for. `lost`: the
   * session or the entry is gone — a real failure, logged at warn; `ended`: we resigned, stepped down or
   * handed over (every rolling update does it), logged at info.
   */
  endTerm(reason: string, how: 'lost' | 'ended'): void;
  /** The election: this state's accessors and flags, with `backend`'s own calls. */
  election(backend: BackendPart): BackendElection;
}

/** Creates the state of one election: not running, not wanted, not leading. */
export function createCandidateState(opts: CandidateStateOptions): CandidateState {
  const { log } = opts;
  const events = leadershipSubscribers();
  let running = false;
  let resigned = false;
  let wanted = false;
  let leader = false;
  let busy = false;
  let readyProbe: (() => boolean) | undefined;
  /** Aborted when the current term (campaign or leadership) ends; created before anything waits. */
  let termEnd: AbortController | undefined;
  /** Wakes the campaign loop (wanted, resigned). */
  let wake = Promise.withResolvers<void>();
  const poke = () => {
    wake.resolve();
    wake = Promise.withResolvers<void>();
  };

  function endTerm(reason: string, how: 'lost' | 'ended') {
    if (termEnd && !termEnd.signal.aborted) {
      if (opts.logInterruptions && !leader) log.debug({ reason }, 'campaign interrupted');
      termEnd.abort(new Error(`campaign interrupted: ${reason}`));
    }
    if (leader) {
      leader = false;
      if (how === 'lost') log.warn({ reason }, 'leadership lost');
      else log.info({ reason }, 'leadership ended');
      events.onLost(reason);
    }
  }

  return {
    get running() {
      return running;
    },
    get wanted() {
      return wanted;
    },
    get leader() {
      return leader;
    },
    get busy() {
      return busy;
    },
    set busy(b) {
      busy = b;
    },
    get woken() {
      return wake.promise;
    },
    get termEnded() {
      return termEnd?.signal.aborted ?? false;
    },
    beginTerm() {
      termEnd = new AbortController();
      return termEnd.signal;
    },
    async lead(term, fields) {
      leader = true;
      log.info(fields, 'elected leader');
      events.onElected();
      await new Promise<void>((resolve) => {
        if (term.aborted) resolve();
        term.addEventListener('abort', () => resolve(), { once: true });
      });
    },
    endTerm,
    election: (backend) => ({
      prefix: backend.prefix,
      get active() {
        return running;
      },
      get wanted() {
        return wanted;
      },
      get ready() {
        return readyProbe?.() ?? true;
      },
      readyWhen(probe) {
        readyProbe = probe;
      },
      get idle() {
        return !busy;
      },
      setWanted(w) {
        if (w === wanted) return;
        wanted = w;
        // A campaign not yet elected withdraws; a term already won ends only by stepDown or resign.
        if (!w && !leader) endTerm('withdrawn', 'ended');
        poke();
      },
      addEventHandler: (e) => events.add(e),
      start() {
        if (running || resigned) return;
        running = true;
        void backend.campaign();
      },
      async resign() {
        resigned = true;
        running = false;
        wanted = false;
        const release = backend.onResign();
        endTerm('resigned', 'ended');
        poke();
        await release();
      },
      stepDown(reason) {
        // The campaign loop then deletes our entry and, if still wanted, campaigns again behind the others.
        if (leader) endTerm(`stepped down: ${reason}`, 'ended');
      },
      get isLeader() {
        return leader;
      },
      get keepaliveAgeMs() {
        return running ? backend.sessionAgeMs() : undefined;
      },
      stillLeader: backend.stillLeader,
      fence: backend.fence,
      currentLeader: backend.currentLeader,
    }),
  };
}
