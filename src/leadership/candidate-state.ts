/**
 * The candidate and term bookkeeping both election backends share (src/leadership/etcd/election.ts,
 * src/leadership/zookeeper/election.ts): whether the election runs, is wanted, has resigned, is busy in a
 * campaign or term, and leads; the readiness probe; the subscribers told of each term; the wake-up of the
 * campaign loop and the loop itself; how a term ends; and the {@link BackendElection} object built over them.
 * A backend keeps what is its own: the steps of a campaign ({@link CampaignSteps}: its session's next lease
 * or connection, a term on it, deleting its candidate key or node), fencing, and resign's call.
 */
import { backoffMs } from '../backoff.ts';
import type { Logger } from '../log.ts';
import { sleep } from '../sleep.ts';
import type { BackendElection } from './backend.ts';
import { leadershipSubscribers, type SessionHealth } from './leadership.ts';

/** Options of {@link createCandidateState}. */
export interface CandidateStateOptions {
  log: Logger;
  /** Logs at debug each campaign interrupted before it was elected (default false). */
  logInterruptions?: boolean;
}

/**
 * A backend's steps of the shared campaign loop. `S` is what a term stands on: the session's lease (etcd) or
 * connection (ZooKeeper), one per term.
 */
export interface CampaignSteps<S> {
  /** The session's next live `S`; rejects when `signal` aborts (a wake-up of the loop) or the session closes. */
  next(signal: AbortSignal): Promise<S>;
  /** Whether the session is closed: the loop then stops. */
  closed(): boolean;
  /**
   * One term on `s`: its campaign and, if elected, its leadership ({@link CandidateState.lead}); `end` aborts
   * when the term ends. Rejects when the campaign fails.
   */
  term(s: S, end: AbortSignal): Promise<void>;
  /** Aborted when `s` is lost: a campaign that fails after it is not counted as a failure. */
  lost(s: S): AbortSignal;
  /**
   * Run once the term on `s` has ended (also after a failure): forgets the term and deletes its own key or
   * node unless `s` is lost. Never rejects.
   */
  afterTerm(s: S): Promise<void>;
  /** Cuts the backoff after a failed campaign on `s` short when it aborts (undefined: never). */
  backoffUntil(s: S): AbortSignal | undefined;
}

/** What a backend adds to its {@link CandidateState} to make its election. */
export interface BackendPart<S>
  extends Pick<BackendElection, 'prefix' | 'stillLeader' | 'fence' | 'currentLeader'> {
  /** The steps of the campaign loop, which `start()` starts once and which runs while the election runs. */
  campaign: CampaignSteps<S>;
  /**
   * Called by `resign()` once the flags are cleared and before the term ends, to capture what the term holds
   * (its key or node, its lease or connection): returns the backend call that deletes the term's entry if
   * there is one still of the live session, run once the term has ended and the campaign loop is woken.
   * The call never rejects.
   */
  onResign(): () => Promise<void>;
  /** The session's freshness for {@link BackendElection.session}; asked only while running. */
  session(): SessionHealth | undefined;
}

/** One election's candidacy and current term, for its backend's campaign steps. */
export interface CandidateState {
  /** Started and not resigned: the campaign loop runs while true. */
  readonly running: boolean;
  /** True during a term this replica won, until {@link CandidateState.endTerm}. */
  readonly leader: boolean;
  /**
   * The term's candidate won: becomes leader, logs `elected leader` with `fields`, tells the subscribers, and
   * resolves when the term ends (`term`: the signal {@link CampaignSteps.term} was given).
   */
  lead(term: AbortSignal, fields: Record<string, unknown>): Promise<void>;
  /**
   * Ends the current term (if leader, exactly once) and wakes whatever the term waits for. `lost`: the
   * session or the entry is gone — a real failure, logged at warn; `ended`: we resigned, stepped down or
   * handed over (every rolling update does it), logged at info.
   */
  endTerm(reason: string, how: 'lost' | 'ended'): void;
  /** The election: this state's accessors and flags and the campaign loop, with `backend`'s own steps. */
  election<S>(backend: BackendPart<S>): BackendElection;
}

/** Creates the state of one election: not running, not wanted, not leading. */
export function createCandidateState(opts: CandidateStateOptions): CandidateState {
  const { log } = opts;
  const events = leadershipSubscribers();
  let running = false;
  let resigned = false;
  let wanted = false;
  let leader = false;
  /** In a campaign or term (from waiting for the session to deleting the entry after it). */
  let busy = false;
  let readyProbe: (() => boolean) | undefined;
  /** Aborted when the current term (campaign or leadership) ends; created before anything waits. */
  let termEnd: AbortController | undefined;
  /**
   * Wakes the campaign loop (wanted, resigned): aborted at each wake-up, then replaced. An attempt hands its
   * signal to the wait for the session's next lease or connection, which removes its listener when it ends,
   * so nothing of an attempt outlives it (a promise's reactions would stay until the next wake-up).
   */
  let wake = new AbortController();
  const poke = () => {
    wake.abort();
    wake = new AbortController();
  };
  /** Resolves at the next wake-up. */
  const woken = () => {
    const { signal } = wake;
    return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
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

  /**
   * The campaign loop: while running, waits until wanted; takes the session's next lease or connection (a
   * wake-up abandons the wait: the loop decides again); runs a term on it, ends the term, and has the backend
   * delete the term's entry. A failed campaign is logged and retried after 200 ms, doubling per failure up to
   * 5 s, with jitter; none after a normal end. Stops when the session is closed.
   */
  async function campaign<S>(steps: CampaignSteps<S>): Promise<void> {
    let failures = 0;
    while (running) {
      if (!wanted) {
        await woken();
        continue;
      }
      busy = true;
      const woke = wake.signal;
      let s: S;
      try {
        s = await steps.next(woke);
      } catch {
        busy = false;
        if (steps.closed()) break;
        continue; // woken (no longer wanted, resigned): the loop decides
      }
      // Withdrawn or resigned while the session answered (a live one answers within a microtask): no term on
      // it, or a withdrawn candidate would stand in line, and could be elected, with nothing to end its term.
      if (woke.aborted || !running || !wanted) {
        busy = false;
        continue;
      }
      try {
        termEnd = new AbortController();
        await steps.term(s, termEnd.signal);
        failures = 0;
      } catch (err) {
        if (running && wanted && !steps.lost(s).aborted && !termEnd?.signal.aborted) {
          failures += 1;
          log.warn({ err: { message: (err as Error).message } }, 'campaign failed; retrying');
        }
      } finally {
        endTerm('term ended', 'ended');
        await steps.afterTerm(s);
        busy = false;
      }
      if (running && failures > 0)
        await sleep(backoffMs(failures, { baseMs: 200, maxMs: 5000, jitter: true }), steps.backoffUntil(s));
    }
  }

  return {
    get running() {
      return running;
    },
    get leader() {
      return leader;
    },
    async lead(term, fields) {
      // A term that ended before it was led (a backend that did not check): no phantom `elected`.
      if (term.aborted) return;
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
        void campaign(backend.campaign);
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
      get session() {
        return running ? backend.session() : undefined;
      },
      stillLeader: backend.stillLeader,
      fence: backend.fence,
      currentLeader: backend.currentLeader,
    }),
  };
}
