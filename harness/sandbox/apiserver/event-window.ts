/**
 * The retained window of watch events, like etcd's history between compactions: a watch resuming
 * from resourceVersion R is served the retained events after R, and a list page is read as of R (see
 * list-snapshot.ts), unless events after R were already dropped (window overflow or
 * {@link EventWindow.compact}), in which case it gets 410 Expired.
 */
import { expired } from './status.ts';

/** Anything with a resourceVersion number. */
export interface Versioned {
  readonly rv: number;
}

/** A bounded, resourceVersion-ordered event log. */
export class EventWindow<E extends Versioned> {
  readonly #capacity: number;
  #events: E[] = [];
  #start = 0;
  /** Every event with rv > this is retained. */
  #compactedRv: number;

  /** `capacity`: events kept (≥ 1); `initialRv`: the resourceVersion before the first event. */
  constructor(capacity: number, initialRv: number) {
    if (!(capacity >= 1)) throw new TypeError(`watchWindow must be ≥ 1, got ${capacity}`);
    this.#capacity = capacity;
    this.#compactedRv = initialRv;
  }

  /** Watches from a resourceVersion below this get 410 Expired. */
  get compactedRv(): number {
    return this.#compactedRv;
  }

  /** Appends an event (rv must be higher than every retained one); drops the oldest when full. */
  push(ev: E): void {
    this.#events.push(ev);
    if (this.#events.length - this.#start > this.#capacity) {
      this.#compactedRv = (this.#events[this.#start] as E).rv;
      this.#start++;
      // Reclaim the dropped prefix now and then rather than shifting on every push.
      if (this.#start > 4096 && this.#start > this.#capacity) {
        this.#events = this.#events.slice(this.#start);
        this.#start = 0;
      }
    }
  }

  /**
   * Retained events with rv > `rv`, oldest first.
   * @throws KubeStatusError 410 Expired (`too old resource version: R (C)`) when some were dropped.
   */
  since(rv: number): E[] {
    if (rv < this.#compactedRv) throw expired(rv, this.#compactedRv + 1);
    const evs = this.#events;
    let lo = this.#start;
    let hi = evs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((evs[mid] as E).rv <= rv) lo = mid + 1;
      else hi = mid;
    }
    return evs.slice(lo);
  }

  /**
   * Drops the retained events with rv ≤ `rv`, as an etcd compaction at revision `rv`: reads and watches
   * from an older resourceVersion then get 410. Never moves the compacted resourceVersion back.
   */
  compact(rv: number): void {
    if (rv <= this.#compactedRv) return;
    this.#compactedRv = rv;
    const evs = this.#events;
    let i = this.#start;
    while (i < evs.length && (evs[i] as E).rv <= rv) i++;
    this.#events = evs.slice(i);
    this.#start = 0;
  }
}
