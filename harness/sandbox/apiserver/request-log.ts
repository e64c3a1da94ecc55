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
  #deleteRecords: DeleteRecord[] = [];
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

  reset(): void {
    this.#counts = {};
    this.#deletes = new Map();
    this.#deleteTotal = 0;
    this.#recent = [];
    this.#deleteRecords = [];
    this.#generation++;
  }
}
