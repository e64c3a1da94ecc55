/**
 * Fault injection: per verb and path pattern, for N requests or a time window, answer with an error
 * Status or a proxy's HTML login page, add latency, reset the connection, or drop a watch mid-stream. Faults are matched in the
 * order they were injected; the first that matches a request applies (and uses up one of its count).
 */

/** A Kubernetes API verb as kube-apiserver's audit log names it. */
export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';

/** What to break, for which requests, and for how long. */
export interface FaultSpec {
  /** Verb to match; `'*'` or absent: every verb. */
  verb?: ApiVerb | '*';
  /** Regular expression source matched against the request path (without query); absent: any. */
  path?: string;
  /** Answer with this Status code (401, 403, 409, 429, 500 or 503) instead of serving. */
  status?: 401 | 403 | 409 | 429 | 500 | 503;
  /** `Retry-After` in seconds for 429 (default 1) or 503 (default none). */
  retryAfterSeconds?: number;
  /** Delay in ms before the request is handled (or failed). */
  latencyMs?: number;
  /** Destroy the TCP connection without an answer (a watch: mid-stream, after it started). */
  reset?: boolean;
  /** For watches: start the stream, then end it cleanly after the first event or 100 ms. */
  dropWatch?: boolean;
  /**
   * Answer 200 with an HTML page instead of serving, as an auth proxy in front of the API server does with
   * its login page (the request is not served: nothing changes).
   */
  loginPage?: boolean;
  /** Number of matching requests to affect (default: unlimited until cleared or expired). */
  count?: number;
  /** Window in ms, by the sandbox clock, from injection (default: no expiry). */
  durationMs?: number;
}

/** Bad fault specification (HTTP control surface: 400). */
export class FaultSpecError extends TypeError {
  override name = 'FaultSpecError';
}

interface ActiveFault {
  id: string;
  spec: FaultSpec;
  pattern: RegExp | undefined;
  remaining: number;
  expiresAt: number;
}

const VERBS = new Set(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', '*']);
const STATUSES = new Set([401, 403, 409, 429, 500, 503]);

function checkNonNegative(spec: FaultSpec, field: keyof FaultSpec): void {
  const v = spec[field];
  if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) {
    throw new FaultSpecError(`fault.${field} must be a number ≥ 0, got ${JSON.stringify(v)}`);
  }
}

/** Validates a fault specification. @throws FaultSpecError naming the offending field. */
export function validateFaultSpec(spec: unknown): FaultSpec {
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
    throw new FaultSpecError('fault must be an object');
  }
  const f = spec as FaultSpec;
  if (f.verb !== undefined && !VERBS.has(f.verb)) {
    throw new FaultSpecError(
      `fault.verb must be one of ${[...VERBS].join(', ')}, got ${JSON.stringify(f.verb)}`,
    );
  }
  if (f.status !== undefined && !STATUSES.has(f.status)) {
    throw new FaultSpecError(
      `fault.status must be one of ${[...STATUSES].join(', ')}, got ${JSON.stringify(f.status)}`,
    );
  }
  if (f.path !== undefined) {
    try {
      new RegExp(f.path);
    } catch {
      throw new FaultSpecError(`fault.path is not a valid regular expression: ${JSON.stringify(f.path)}`);
    }
  }
  for (const k of ['retryAfterSeconds', 'latencyMs', 'count', 'durationMs'] as const) checkNonNegative(f, k);
  if (f.status === undefined && !f.latencyMs && !f.reset && !f.dropWatch && !f.loginPage) {
    throw new FaultSpecError('fault needs at least one of status, latencyMs, reset, dropWatch, loginPage');
  }
  return f;
}

/** The registry of injected faults. */
export class FaultRegistry {
  readonly #now: () => number;
  #faults: ActiveFault[] = [];
  #seq = 0;

  constructor(now: () => number) {
    this.#now = now;
  }

  /** Adds a fault and returns its id. @throws FaultSpecError for a bad spec. */
  inject(spec: FaultSpec): string {
    const f = validateFaultSpec(spec);
    const id = `fault-${++this.#seq}`;
    this.#faults.push({
      id,
      spec: { ...f },
      pattern: f.path !== undefined ? new RegExp(f.path) : undefined,
      remaining: f.count ?? Number.POSITIVE_INFINITY,
      expiresAt: f.durationMs !== undefined ? this.#now() + f.durationMs : Number.POSITIVE_INFINITY,
    });
    return id;
  }

  /** Removes one fault by id, or all of them. */
  clear(id?: string): void {
    this.#faults = id === undefined ? [] : this.#faults.filter((f) => f.id !== id);
  }

  /** The active faults with their remaining counts (for the control surface). */
  list(): { id: string; spec: FaultSpec; remaining: number | null }[] {
    this.#expire();
    return this.#faults.map((f) => ({
      id: f.id,
      spec: f.spec,
      remaining: Number.isFinite(f.remaining) ? f.remaining : null,
    }));
  }

  /** The fault that applies to this request, if any; consumes one of its count. */
  take(verb: ApiVerb, path: string): FaultSpec | undefined {
    if (this.#faults.length === 0) return undefined;
    this.#expire();
    for (const f of this.#faults) {
      if (f.spec.verb !== undefined && f.spec.verb !== '*' && f.spec.verb !== verb) continue;
      if (f.pattern && !f.pattern.test(path)) continue;
      // dropWatch only makes sense for watches; do not let it consume other requests.
      if (f.spec.dropWatch && f.spec.status === undefined && !f.spec.reset && verb !== 'watch') continue;
      f.remaining--;
      if (f.remaining <= 0) this.#faults = this.#faults.filter((x) => x !== f);
      return f.spec;
    }
    return undefined;
  }

  #expire(): void {
    const now = this.#now();
    if (this.#faults.some((f) => f.expiresAt <= now))
      this.#faults = this.#faults.filter((f) => f.expiresAt > now);
  }
}
