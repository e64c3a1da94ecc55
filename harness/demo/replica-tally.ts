/**
 * What the demo learns from its replicas' JSON log lines, counted as they arrive (not from the bounded
 * line buffers, so long runs lose nothing): cleanup outcomes, lateness of accepted DELETEs, elections
 * and losses of leadership per target, and each replica's HTTP URL.
 *
 * The same lines come from coordinated replicas (`run`) and baseline replicas (`baseline-replica`):
 * `outcome` accepted / a no-op name / failed, `latenessMs`, 'elected leader', 'leadership lost' (warn)
 * and 'leadership ended' (info: resigned) with `context` and `namespace`, and 'http server listening' with `url`.
 */
import { NOOP_OUTCOMES } from '../../src/rules/outcome.ts';
import type { LogLine } from '../sandbox/replica-process.ts';

const NOOPS = new Set<string>(NOOP_OUTCOMES);

/** One election seen in the logs. `atMs` is the demo's clock, epoch ms. */
export interface Election {
  readonly target: string;
  readonly replica: string;
  readonly atMs: number;
}

/** Counters fed by {@link ReplicaTally.onLine}. */
export class ReplicaTally {
  /** Accepted DELETEs ('driver pod deleted'). */
  accepted = 0;
  /** Final no-op outcomes (already-absent, replaced, already-deleting, skipped, would-delete). */
  noop = 0;
  /** Failed outcomes (real API failures; in the baseline also every 404). */
  failed = 0;
  /** `latenessMs` of each accepted DELETE, ms after the pod's deadline. */
  readonly latenessMs: number[] = [];
  /** Final outcome lines (accepted, no-op or failed) per replica. */
  readonly outcomesByReplica = new Map<string, number>();
  /** Every 'elected leader' line, in arrival order. */
  readonly elections: Election[] = [];
  /** Replica id → URL of its HTTP server. */
  readonly urls = new Map<string, string>();
  readonly #dead = new Set<string>();
  /** target → replica that leads it now, as far as the logs tell. */
  readonly #leaders = new Map<string, string>();
  /** target → how its last term ended: `lost` (lease lost, replica died) or `ended` (resigned, handed over). */
  readonly #lastEnd = new Map<string, 'lost' | 'ended'>();
  /** Elections that followed a lost leadership, or a term whose end the logs did not show. */
  #failovers = 0;
  /** Elections that followed a term ended on purpose (a resignation, a balancing handover). */
  #handovers = 0;
  readonly #now: () => number;

  /** @param now clock, epoch ms (stamps elections). */
  constructor(now: () => number) {
    this.#now = now;
  }

  /** Counts one log line of `replica`. Lines without known fields are ignored. */
  onLine(replica: string, line: LogLine): void {
    const outcome = typeof line.outcome === 'string' ? line.outcome : undefined;
    if (outcome === 'accepted' || outcome === 'failed' || (outcome && NOOPS.has(outcome))) {
      this.outcomesByReplica.set(replica, (this.outcomesByReplica.get(replica) ?? 0) + 1);
      if (outcome === 'accepted') {
        this.accepted += 1;
        if (typeof line.latenessMs === 'number') this.latenessMs.push(line.latenessMs);
      } else if (outcome === 'failed') this.failed += 1;
      else this.noop += 1;
      return;
    }
    const target = `${String(line.context)}:${String(line.namespace)}`;
    if (line.msg === 'elected leader') {
      if (this.elections.some((e) => e.target === target)) {
        if (this.#lastEnd.get(target) === 'ended') this.#handovers += 1;
        else this.#failovers += 1;
      }
      this.#lastEnd.delete(target);
      this.elections.push({ target, replica, atMs: this.#now() });
      this.#leaders.set(target, replica);
    } else if (
      (line.msg === 'leadership lost' || line.msg === 'leadership ended') &&
      this.#leaders.get(target) === replica
    ) {
      this.#leaders.delete(target);
      this.#lastEnd.set(target, line.msg === 'leadership lost' ? 'lost' : 'ended');
    } else if (line.msg === 'http server listening' && typeof line.url === 'string') {
      this.urls.set(replica, line.url);
    }
  }

  /** A replica that exited or was killed leads nothing any more. */
  markDead(replica: string): void {
    this.#dead.add(replica);
    for (const [target, r] of this.#leaders)
      if (r === replica) {
        this.#leaders.delete(target);
        this.#lastEnd.set(target, 'lost');
      }
  }

  /** The current leader of `target` according to the logs, if any. */
  leaderOf(target: string): string | undefined {
    return this.#leaders.get(target);
  }

  /**
   * Elections after a target's first one that followed a lost leadership (lease lost, leader killed) or a
   * term whose end the logs did not show: how often leadership moved because a leader failed.
   */
  failovers(): number {
    return this.#failovers;
  }

  /**
   * Elections after a target's first one that followed a term ended on purpose: a resignation (SIGTERM) or a
   * balancing handover to the target's assigned replica (src/leadership/etcd/backend.ts).
   */
  handovers(): number {
    return this.#handovers;
  }

  /** Targets that have had at least one election. */
  electedTargets(): Set<string> {
    return new Set(this.elections.map((e) => e.target));
  }
}
