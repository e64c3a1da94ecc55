/**
 * A leadership that leads only while its gates are open: the target's election (or local leadership) decides
 * who leads, and the gates decide whether that leader may consume now. A term begins when the inner
 * leadership has elected this replica and every gate is open, and ends as soon as either stops being true.
 * The balancer still sees the inner election (it hands it over, steps it down); the target cleaner sees this.
 *
 * The gates of this release (src/replica.ts wires them):
 * - a replica of the previous release still leads the target's old election, or consumes its old queue
 *   (src/leadership/previous-release-gate.ts): wait for it, so that a rolling update never has two leaders
 *   consuming two queues of one target;
 * - another cluster claims the target's cluster name (src/cleaner/cluster-claims.ts): refuse the target.
 *
 * Each DELETE is fenced on the inner leadership and then on every gate ({@link LeadershipGate.fence}).
 */
import { FencedError } from './fenced-error.ts';
import { type Leadership, type LeadershipEvents, leadershipSubscribers } from './leadership.ts';

/** A condition a leader must meet to consume. */
export interface LeadershipGate {
  /** Which condition, as metrics label it (`previous-release`, `cluster-name-conflict`). */
  readonly reason: string;
  /** Why the gate is closed now; undefined while it is open. Cheap: asked at every change. */
  closed(): string | undefined;
  /** Calls `cb` whenever `closed()` may have changed. */
  onChange(cb: () => void): void;
  /**
   * Told when the inner leadership's term begins (true) and ends (false): a gate may campaign for what it
   * needs only while the inner leadership leads (always in that order, so two replicas never wait on each
   * other).
   */
  innerLeading?(leading: boolean): void;
  /**
   * Fencing, before each DELETE: resolves if the gate is open as of a read made after the call (or as of its
   * own state when it has nothing to read).
   * @throws FencedError otherwise.
   */
  fence(signal: AbortSignal): Promise<void>;
  /** Leaves (the leadership resigns): gives up what the gate holds. Never rejects. */
  resign?(): Promise<void>;
  /**
   * How long the gate may stay closed under a leader before its waiting line is logged at warn rather than
   * info, ms (default: never at warn).
   */
  readonly warnAfterMs?: number;
  /** A wait on this gate shorter than this is not logged, ms (default 0: logged at once). */
  readonly quietMs?: number;
}

/**
 * How long the brief waits every start has (the first look at Redis, or for workers of the previous release)
 * may last before they are logged, ms: logged at once, they would make one line per target at every start.
 */
export const BRIEF_WAIT_MS = 2000;

/** Options of {@link createGatedLeadership}. */
export interface GatedLeadershipOptions {
  inner: Leadership;
  gates: readonly LeadershipGate[];
  log: { info(o: object, msg: string): void; warn(o: object, msg: string): void };
  /** The monotonic clock, ms (src/clock.ts): how long a leader has waited. */
  monotonicNow: () => number;
}

/** A gate closed now, as {@link Leadership.heldBy} lists it. */
export interface HeldBy {
  readonly reason: string;
  readonly why: string;
  /** The election has elected this replica: only the gate keeps it from consuming. */
  readonly elected: boolean;
}

/** A {@link Leadership} gated by `gates`; with no gate, the inner one itself. */
export function createGatedLeadership(opts: GatedLeadershipOptions): Leadership {
  const { inner, gates, log } = opts;
  if (gates.length === 0) return inner;
  const events = leadershipSubscribers();
  /** A term of ours is running (elected was told, lost not yet). */
  let leading = false;
  /** The inner leadership leads (between its elected and lost). */
  let innerLeader = false;
  /** Since when (monotonic ms) the inner leader has waited on a gate, and what was last logged. */
  let waitingSince: number | undefined;
  let loggedWhy: string | undefined;
  let warned = false;
  let infoTimer: NodeJS.Timeout | undefined;
  let warnTimer: NodeJS.Timeout | undefined;

  const why = () => {
    for (const g of gates) {
      const w = g.closed();
      if (w !== undefined) return { gate: g, why: w };
    }
    return undefined;
  };
  /** The gate the elected replica waits on now, if any. */
  const waitingOn = () => (innerLeader && !leading ? why() : undefined);

  function stopWaiting() {
    waitingSince = undefined;
    loggedWhy = undefined;
    warned = false;
    clearTimeout(infoTimer);
    clearTimeout(warnTimer);
    infoTimer = undefined;
    warnTimer = undefined;
  }

  /** Logs the wait at info (once past its gate's quiet time), again when its reason changes. */
  function logInfo() {
    const still = waitingOn();
    if (!still || loggedWhy === still.why) return;
    loggedWhy = still.why;
    log.info({ why: still.why }, 'elected, but not consuming: waiting');
  }

  /** Logs the wait: at info past the first seconds or when its reason changes, at warn past the gate's threshold. */
  function logWait(closed: { gate: LeadershipGate; why: string }) {
    const now = opts.monotonicNow();
    waitingSince ??= now;
    const quietMs = closed.gate.quietMs ?? 0;
    if (loggedWhy !== undefined || now - waitingSince >= quietMs) logInfo();
    else if (!infoTimer) {
      infoTimer = setTimeout(logInfo, waitingSince + quietMs - now);
      infoTimer.unref();
    }
    const after = closed.gate.warnAfterMs;
    if (after === undefined || warned || warnTimer) return;
    warnTimer = setTimeout(
      () => {
        warnTimer = undefined;
        const still = waitingOn();
        if (!still) return;
        warned = true;
        log.warn(
          { why: still.why, waitedMs: Math.round(opts.monotonicNow() - (waitingSince ?? 0)) },
          'elected, but still not consuming: waiting',
        );
      },
      Math.max(0, waitingSince + after - now),
    );
    warnTimer.unref();
  }

  /** Begins or ends our term as the inner leadership and the gates now say. */
  function evaluate() {
    const closed = innerLeader ? why() : undefined;
    const want = innerLeader && closed === undefined;
    if (want && !leading) {
      stopWaiting();
      leading = true;
      events.onElected();
    } else if (!want && leading) {
      leading = false;
      events.onLost(closed ? `not consuming: ${closed.why}` : 'leadership ended');
    }
    if (innerLeader && closed) logWait(closed);
    if (!innerLeader) stopWaiting();
  }

  for (const g of gates) g.onChange(evaluate);
  const innerEvents: LeadershipEvents = {
    onElected() {
      innerLeader = true;
      for (const g of gates) g.innerLeading?.(true);
      evaluate();
    },
    onLost(reason) {
      innerLeader = false;
      for (const g of gates) g.innerLeading?.(false);
      if (leading) {
        leading = false;
        events.onLost(reason);
      }
      stopWaiting();
    },
  };
  inner.addEventHandler(innerEvents);

  return {
    addEventHandler: (e) => events.add(e),
    readyWhen: (probe) => inner.readyWhen(probe),
    start: () => inner.start(),
    async resign() {
      await inner.resign();
      await Promise.all(gates.map((g) => g.resign?.() ?? Promise.resolve()));
    },
    stepDown: (reason) => inner.stepDown(reason),
    get isLeader() {
      return leading;
    },
    async fence(signal) {
      if (!leading) throw new FencedError('not the leader');
      await inner.fence(signal);
      for (const g of gates) await g.fence(signal);
      if (!leading) throw new FencedError('stopped consuming during the fencing read');
    },
    stillLeader: () => leading && inner.stillLeader() && why() === undefined,
    heldBy() {
      const out: HeldBy[] = [];
      for (const g of gates) {
        const w = g.closed();
        if (w !== undefined) out.push({ reason: g.reason, why: w, elected: innerLeader });
      }
      return out;
    },
    get session() {
      return inner.session;
    },
    currentLeader: () => inner.currentLeader(),
  };
}
