/**
 * The request log: how many API requests of each verb arrived, and for every DELETE which pod UID
 * it targeted and which HTTP code it got. Other tests count DELETEs per pod through it. Faulted and
 * unauthorized requests are counted too; control-surface requests are not.
 */
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
  /** Forgets everything logged so far. */
  reset(): void;
}

const RECENT_MAX = 1000;

/** Mutable request log used by the server. */
export class RequestLog implements RequestLogView {
  #counts: Record<string, number> = {};
  #deletes = new Map<string, number[]>();
  #deleteTotal = 0;
  #recent: RequestRecord[] = [];
  #generation = 0;

  /**
   * Counts a request at arrival and returns a function to call with its final HTTP code.
   * `uid` is only meaningful for DELETE; it can be supplied later through the returned function.
   */
  arrive(
    verb: RequestRecord['verb'],
    method: string,
    path: string,
    atMs: number,
  ): (code: number, uid?: string) => void {
    this.#counts[verb] = (this.#counts[verb] ?? 0) + 1;
    if (verb === 'delete') this.#deleteTotal++;
    const generation = this.#generation;
    let done = false;
    return (code, uid) => {
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

  reset(): void {
    this.#counts = {};
    this.#deletes = new Map();
    this.#deleteTotal = 0;
    this.#recent = [];
    this.#generation++;
  }
}
