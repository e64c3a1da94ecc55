/**
 * All the leaderships of one replica on one backend (etcd or ZooKeeper, src/leadership/backend.ts): one
 * session with its membership entry, one view of the members and candidates, one bound on concurrent
 * campaign calls, an election per target — and the **balancer** that decides which elections this replica
 * campaigns in. The rule is the same whatever the backend.
 *
 * How leadership is balanced (the same rule on every replica, from its view of the backend):
 * - the live members are the replicas whose membership entry exists (etcd: a key on their session lease;
 *   ZooKeeper: an ephemeral node of their session), so it goes when they leave or their session ends; its
 *   value names the replica's set of targets (a hash), and a replica balances with the members that serve
 *   the same set — its **peers** (two deployments sharing one store, or replicas of a rollout that changes the
 *   targets, are balanced apart; every target still has one leader at a time);
 * - a replica can clean a target once its informer has listed the pods, and until the informer has been down
 *   (unable to list or watch) for a while, or the self-check stepped it down for want of progress (the target
 *   cleaner's readiness probe, `readyWhen`); the targets it cannot clean now are in its membership value
 *   (usually none: `targets:<hash>` alone), so every replica knows; a replica counts its own readiness as it is
 *   now, without waiting for its membership value to come back through the view;
 * - a pure function assigns each target to one live member ready for it, at most ⌈T / R⌉ each
 *   (src/leadership/assignment.ts); a target no member is ready for is assigned as if all were;
 * - a replica campaigns for the targets assigned to it, and for no other — except as a **fallback**: a target
 *   that has had no candidate at all for `fallbackMs` (views disagree, the owner is stuck or does not serve
 *   it) is campaigned for by every replica ready for it (by all when none is), and the ones not elected
 *   withdraw as soon as there is a leader;
 * - a replica leading a target assigned to another live member that has a candidate entry **steps down**: its
 *   term ends (the worker stops, in-flight jobs are aborted before their DELETE), its entry is deleted, and the
 *   owner, already waiting in line, is elected. The backend's election keeps one leader at a time; each DELETE
 *   is fenced on the leader's entry;
 * - a leader that steps down while not ready for the target (the self-check's step-down) withdraws its
 *   campaign at once, so that it is not elected again before the next owner is in line; the balancer campaigns
 *   for it again only if it is still the target's owner (no other replica ready for it).
 * So a replica leads at most ⌈T / R⌉ targets, plus those it still holds while their new owner is on its way
 * in; an added or restarted replica campaigns for its share as soon as its informers have listed; a replica
 * whose informer cannot list or watch hands its targets over to ready replicas and stays out of their line
 * until it is ready again; so does a leader the self-check stepped down, until it has shown it can make
 * progress (src/cleaner/stuck-hold.ts).
 */
import pLimit from 'p-limit';
import type { MonotonicClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import { withTimeout } from '../with-timeout.ts';
import {
  type Assignment,
  assignTargets,
  describeBalance,
  type LeadershipBalance,
  memberValue,
  parseMemberValue,
  targetSetValue,
  unreadyOf,
} from './assignment.ts';
import type { BackendContext, BackendElection, LeadershipBackend } from './backend.ts';

/**
 * What every backend's group takes from its caller and passes to the balancer (`fallbackMs` optional there:
 * each backend defaults it to its session's TTL).
 */
export type BackendGroupOptions = Omit<LeadershipGroupOptions<BackendElection>, 'backend' | 'fallbackMs'> & {
  /** A target with no candidate for this long is campaigned for by every replica, ms (default: one TTL). */
  fallbackMs?: number;
};

/** Options of {@link createLeadershipGroup}. */
export interface LeadershipGroupOptions<E extends BackendElection> {
  /** Creates the backend, given what it needs from the balancer. */
  backend: (ctx: BackendContext) => LeadershipBackend<E>;
  replicaId: string;
  log: Logger;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
  /**
   * Balance leaderships over the live members (default true). False: every started election campaigns, the
   * first candidate leads, as a plain election — for tests of the election itself.
   */
  balanced?: boolean;
  /** At most this many campaign calls to the backend at a time (default 16). */
  campaignConcurrency?: number;
  /** A target with no candidate for this long is campaigned for by every replica, ms. */
  fallbackMs: number;
  /**
   * The `clusters` line of the membership value (src/leadership/assignment.ts `clustersLine`): the
   * fingerprints of the clusters this replica serves, read at each write of the value. Default: none.
   */
  clusters?: () => string | undefined;
}

/** The balance as this replica sees it, for `/api/v1/leaders` (its peers, its targets). */
export type { LeadershipBalance } from './assignment.ts';

/** A replica's leaderships on one backend. */
export interface LeadershipGroup<E extends BackendElection = BackendElection> {
  /**
   * The election of one target; call once per target, before `start()`.
   * @param target the target's key (`cluster/namespace`, src/queue/job-identity.ts `targetKey`), what the
   *   assignment hashes
   * @param prefix its election prefix (ends with `/`)
   */
  election(target: string, prefix: string, log: Logger): E;
  /**
   * An election the balancer does not assign (src/leadership/previous-release-gate.ts): whether this replica
   * is a candidate is the caller's decision (`setWanted`); its stray entries are tidied and it resigns with
   * the group. Not in the membership value.
   */
  sideElection(prefix: string, log: Logger): E;
  /** Starts the session, the view and the balancer (idempotent). */
  start(): void;
  /**
   * Leaves: every term ends (`resigned`), the session ends — all candidate entries and the membership entry go
   * at once, so other replicas take over without waiting for the session to expire. Idempotent; never
   * rejects; bounded by the backend's `closeTimeoutMs` (the terms have ended at once, before any wait).
   */
  close(): Promise<void>;
  /** The balance as this replica sees it. */
  balance(): LeadershipBalance;
  /** The backend (its view, for `/api/v1/leaders` and tests). */
  readonly backend: LeadershipBackend<E>;
}

interface Entry<E> {
  readonly target: string;
  readonly election: E;
  /** Since when (monotonic ms) the view shows no candidate; undefined while there is one. */
  noCandidateSince: number | undefined;
}

/** Creates the leaderships of a replica on the backend `opts.backend` creates. */
export function createLeadershipGroup<E extends BackendElection>(
  opts: LeadershipGroupOptions<E>,
): LeadershipGroup<E> {
  const { replicaId, log, fallbackMs } = opts;
  const balanced = opts.balanced ?? true;
  const entries: Entry<E>[] = [];
  /** The side elections ({@link LeadershipGroup.sideElection}). */
  const sides: E[] = [];
  /** The membership value's target set: a hash of this replica's sorted target labels, fixed at `start()`. */
  let targetSet = '';
  // Campaign calls (candidate creates, predecessor reads, candidate deletes) a few at a time: 1,000 targets
  // campaigning at start in one burst would queue thousands of calls on one connection.
  const limit = pLimit(opts.campaignConcurrency ?? 16);
  const backend = opts.backend({
    limit,
    memberValue: () =>
      memberValue(
        targetSet,
        entries.filter((e) => !e.election.ready).map((e) => e.target),
        entries.length,
        opts.clusters?.(),
      ),
  });
  const view = backend.view;
  /** Parsed membership values, by raw value (they change rarely; parsing a 1,000-label list is not free). */
  const parsed = new Map<string, ReturnType<typeof parseMemberValue>>();
  const parse = (raw: string) => {
    let v = parsed.get(raw);
    if (!v) {
      if (parsed.size > 64) parsed.clear();
      v = parseMemberValue(raw);
      parsed.set(raw, v);
    }
    return v;
  };
  /**
   * Live members serving the same targets as this replica (its peers, itself included), sorted, with the
   * targets each reports not ready.
   */
  const peers = () => {
    const values = view.members().map((m) => [m, parse(view.memberValue(m) ?? '')] as const);
    const same = values.filter(([, v]) => v.targetSet === targetSet);
    const raw = same.map(([m]) => `${m}=${view.memberValue(m)}`).join('\n');
    return {
      members: same.map(([m]) => m),
      key: raw,
      unready: () =>
        unreadyOf(
          same,
          entries.map((e) => e.target),
        ),
    };
  };
  let started = false;
  let closed = false;
  let tick: NodeJS.Timeout | undefined;
  let cached:
    | { key: string; assignment: Assignment; unready: ReadonlyMap<string, ReadonlySet<string>> }
    | undefined;

  /**
   * The assignment over `p` (recomputed only when the members, their values or this replica's readiness
   * changed). This replica's not-ready targets are taken as they are now, not as its membership value last
   * said: a leader stepped down for want of progress must not campaign again while its new value is on its way.
   */
  const assignment = (p: ReturnType<typeof peers>) => {
    const mine = entries.filter((e) => !e.election.ready).map((e) => e.target);
    const key = `${entries.length}|${p.key}|${mine.join('\n')}`;
    if (cached?.key !== key) {
      const unready = p.unready();
      if (p.members.includes(replicaId)) {
        if (mine.length > 0) unready.set(replicaId, new Set(mine));
        else unready.delete(replicaId);
      }
      cached = {
        key,
        unready,
        assignment: assignTargets(
          entries.map((e) => e.target),
          p.members,
          unready,
        ),
      };
    }
    return cached;
  };

  /** Decides, for every election, whether this replica campaigns, and hands over what is not its own. */
  function evaluate(): void {
    if (closed || !started) return;
    if (!balanced) {
      for (const e of entries) if (e.election.active) e.election.setWanted(true);
      return;
    }
    // Readiness changed since the membership entry was written: write it again (coalesced by the backend).
    backend.refreshMemberValue();
    if (!view.synced) return;
    for (const e of sides) if (e.active) backend.tidy(e, schedule);
    const now = opts.monotonicNow();
    const p = peers();
    const members = p.members;
    const live = backend.live && members.includes(replicaId);
    const { assignment: a, unready } = assignment(p);
    const { owners } = a;
    /** This replica may take `target` as a fallback: it is ready for it as published, or no peer is. */
    const mayFallBack = (target: string) =>
      !unready.get(replicaId)?.has(target) || members.every((m) => unready.get(m)?.has(target));
    for (const x of entries) {
      const e = x.election;
      const candidates = view.candidates(e.prefix);
      // Not while a stray entry of this election is being deleted: a campaign now would adopt that very entry.
      const tidying = backend.tidy(e, schedule);
      if (!e.active || tidying) continue;
      if (candidates.length > 0) x.noCandidateSince = undefined;
      else x.noCandidateSince ??= now;
      const owner = owners.get(x.target);
      const fallback =
        x.noCandidateSince !== undefined && now - x.noCandidateSince >= fallbackMs && mayFallBack(x.target);
      if (live && (owner === replicaId || fallback)) {
        if (!e.wanted && owner !== replicaId)
          log.info({ target: x.target, owner }, 'no candidate for this target: campaigning as a fallback');
        e.setWanted(true);
      } else if (e.isLeader) {
        // Keep leading until the owner is in line, so that the target is never without a leader.
        if (owner !== undefined && owner !== replicaId && candidates.some((c) => c.replicaId === owner)) {
          e.setWanted(false);
          e.stepDown(`handing over to ${owner}, its assigned replica`);
        }
      } else if (e.wanted && (!live || (candidates[0] && candidates[0].replicaId !== replicaId))) {
        // Not ours and another replica is first in line: the fallback is no longer needed.
        e.setWanted(false);
      }
    }
  }

  let scheduled = false;
  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      evaluate();
    });
  }
  view.onChange(schedule);
  backend.onLive(schedule);

  return {
    sideElection(prefix, elog) {
      const election = backend.election(prefix, elog);
      sides.push(election);
      return election;
    },
    election(target, prefix, elog) {
      const election = backend.election(prefix, elog);
      entries.push({ target, election, noCandidateSince: undefined });
      // An election started after the group: decide for it at once.
      const start = election.start.bind(election);
      election.start = () => {
        start();
        schedule();
      };
      // Stepping down while not ready for the target (the self-check found it stuck): out of the line at once,
      // or the campaign loop would campaign again, alone in line, and be elected again; the balancer decides.
      const stepDown = election.stepDown.bind(election);
      election.stepDown = (reason) => {
        if (balanced && !election.ready) election.setWanted(false);
        stepDown(reason);
        schedule();
      };
      return election;
    },
    start() {
      if (started || closed) return;
      started = true;
      targetSet = targetSetValue(entries.map((e) => e.target));
      backend.start();
      // The fallback waits on time, not on a change: look again a few times per fallback period.
      tick = setInterval(evaluate, Math.max(250, Math.min(1000, fallbackMs / 4)));
      schedule();
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(tick);
      // Every backend call is bounded on its own; this bounds the whole, whatever a future step adds.
      await withTimeout(
        backend.close([...entries.map((x) => x.election), ...sides]),
        backend.closeTimeoutMs,
        'leadership close',
      ).catch((err: unknown) =>
        log.warn(
          { err: { message: (err as Error).message } },
          'leadership close incomplete; sessions expire',
        ),
      );
    },
    balance() {
      const p = peers();
      const { assignment: a, unready } = assignment(p);
      return describeBalance(
        entries.map((e) => e.target),
        p.members,
        entries.map((x) => view.candidates(x.election.prefix)[0]?.replicaId),
        unready,
        a,
      );
    },
    backend,
  };
}
