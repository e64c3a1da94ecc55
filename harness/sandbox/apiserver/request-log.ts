/**
 * The request log: how many API requests of each verb arrived, and for every DELETE which pod UID
 * it targeted and which HTTP code it got. Other tests count DELETEs per pod through it. Faulted and
 * unauthorized requests are counted too; control-surface requests are not.
 *
 * Every DELETE is also kept whole ({@link RequestLogView.deletes}): its precondition UID, the stored pod
 * it found at arrival and the pod it deleted, so that a test can judge each DELETE against the pod as the
 * server saw it then (terminal? selected? past its deadline by the server's clock?).
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { ApiVerb } from './faults.ts';

/** One logged API request. */
export interface RequestRecord {
  verb: ApiVerb | 'discovery';
  method: string;
  path: string;
  /** HTTP code; 0 when the connection was reset without an answer. */
  code: number;
  /** For DELETE: uid of the pod the name resolved to at arrival (or the precondition uid). */
  uid?: string;
  /** Epoch ms (sandbox clock) at arrival. */
  atMs: number;
}

/** What a DELETE request carried and what it found and did (see {@link RequestLogView.deletes}). */
export interface DeleteDetails {
  /** The body's `preconditions.uid`; undefined when the request had none. */
  preconditionUid?: string;
  /** The stored pod the path named when the request arrived (stored objects are immutable); undefined: absent. */
  found?: V1Pod;
  /** The pod as the DELETE left it (with its `deletionTimestamp`) when the server applied it; undefined: refused. */
  applied?: V1Pod;
}

/** One DELETE request with its {@link DeleteDetails}. */
export type DeleteRecord = RequestRecord & DeleteDetails;

/** One API request as it arrived (before it was served or answered): what a rate is counted from. */
export interface Arrival {
  verb: RequestRecord['verb'];
  path: string;
  /** Epoch ms (sandbox clock) at arrival. */
  atMs: number;
}

/** Read side of the request log, as exposed on the server handle. */
export interface RequestLogView {
  /** Requests per verb since the last reset, e.g. `{ list: 2, watch: 3, delete: 10 }`. */
  countsByVerb(): Record<string, number>;
  /** For each pod uid, the HTTP codes of the DELETE requests that targeted it, in arrival order. */
  deletesByUid(): Map<string, number[]>;
  /** Number of DELETE requests received (answered or not). */
  deleteRequestTotal(): number;
  /** The most recent requests (up to 1,000), oldest first. */
  recent(): RequestRecord[];
  /** Every DELETE request since the last reset, in the order they were answered (not bounded). */
  deletes(): DeleteRecord[];
  /**
   * Every API request since the last reset as it arrived, oldest first (the last 100,000): unlike
   * {@link recent}, a watch is here as soon as it is opened, not when it ends.
   */
  arrivals(): Arrival[];
  /**
   * The most requests that arrived within any `windowMs` (a half-open window `[t, t + windowMs)`) among
   * {@link arrivals} that `filter` keeps (default all): the peak rate, to hold against a client's QPS + burst.
   */
  busiestWindow(windowMs: number, filter?: (a: Arrival) => boolean): number;
  /** Forgets everything logged so far. */
  reset(): void;
}

const RECENT_MAX = 1000;
const ARRIVALS_MAX = 100_000;

/** Mutable request log used by the server. */
export class RequestLog implements RequestLogView {
  #counts: Record<string, number> = {};
  #deletes = new Map<string, number[]>();
  #deleteTotal = 0;
  #recent: RequestRecord[] = [];
  #deleteRecords: DeleteRecord[] = [];
  #arrivals: Arrival[] = [];
  #generation = 0;

  /**
   * Counts a request at arrival and returns a function to call with its final HTTP code.
   * `uid` and `details` are only meaningful for DELETE; they are supplied through the returned function.
   */
  arrive(
    verb: RequestRecord['verb'],
    method: string,
    path: string,
    atMs: number,
  ): (code: number, uid?: string, details?: DeleteDetails) => void {
    this.#counts[verb] = (this.#counts[verb] ?? 0) + 1;
    if (verb === 'delete') this.#deleteTotal++;
    if (verb !== 'discovery') {
      this.#arrivals.push({ verb, path, atMs });
      if (this.#arrivals.length > ARRIVALS_MAX * 2) this.#arrivals = this.#arrivals.slice(-ARRIVALS_MAX);
    }
    const generation = this.#generation;
    let done = false;
    return (code, uid, details) => {
      if (done || generation !== this.#generation) return; // a reset in between forgets it
      done = true;
      const rec: RequestRecord = { verb, method, path, code, atMs };
      if (uid !== undefined) rec.uid = uid;
      this.#recent.push(rec);
      if (this.#recent.length > RECENT_MAX * 2) this.#recent = this.#recent.slice(-RECENT_MAX);
      if (verb === 'delete') {
        const key = uid ?? `unknown:${path}`;
        const codes = this.#deletes.get(key);
        if (codes) codes.push(code);
        else this.#deletes.set(key, [code]);
        this.#deleteRecords.push({ ...rec, ...details });
      }
    };
  }

  countsByVerb(): Record<string, number> {
    return { ...this.#counts };
  }

  deletesByUid(): Map<string, number[]> {
    return new Map([...this.#deletes].map(([k, v]) => [k, [...v]]));
  }

  deleteRequestTotal(): number {
    return this.#deleteTotal;
  }

  recent(): RequestRecord[] {
    return this.#recent.slice(-RECENT_MAX);
  }

  deletes(): DeleteRecord[] {
    return [...this.#deleteRecords];
  }

  arrivals(): Arrival[] {
    return this.#arrivals.slice(-ARRIVALS_MAX);
  }

  busiestWindow(windowMs: number, filter: (a: Arrival) => boolean = () => true): number {
    const times = this.arrivals()
      .filter(filter)
      .map((a) => a.atMs)
      .sort((a, b) => a - b);
    let most = 0;
    for (let start = 0, end = 0; start < times.length; start++) {
      while (end < times.length && (times[end] ?? 0) < (times[start] ?? 0) + windowMs) end++;
      most = Math.max(most, end - start);
    }
    return most;
  }

  reset(): void {
    this.#counts = {};
    this.#arrivals = [];
    this.#deletes = new Map();
    this.#deleteTotal = 0;
    this.#recent = [];
    this.#deleteRecords = [];
    this.#generation++;
  }
}
