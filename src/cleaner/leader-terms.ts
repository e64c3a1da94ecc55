/**
 * The leadership terms of one target, run strictly one after another.
 *
 * A replica can lose and regain a target's leadership within milliseconds (a lease lost and re-granted, a
 * resign and a re-election). A term's start (wait for the informer, reconcile, run the worker) must never
 * overlap the previous term's end (abort in-flight jobs, close the BullMQ worker): a start that found the
 * old worker still closing would leave the new term with no consumer. So every transition is queued and
 * runs after the previous one has finished.
 *
 * `lost()` ends the current term at once — its `signal` aborts, so a start still waiting for the informer or
 * a reconcile gives up — and queues the term's end. What a term starts (the periodic reconcile, the
 * single-server check) stops with its signal.
 */

/** One term: from `elected` to `lost`. */
export interface Term {
  /** 1 for the first term of this process, then 2, 3…; for logs. */
  readonly id: number;
  /** Aborted when the term ends (leadership lost, resigned, shutdown), with the reason. */
  readonly signal: AbortSignal;
  /** When this replica was elected for the term, monotonic ms: the delete log line's `sinceElectionMs`. */
  readonly electedMs: number;
}

/** The steps of a term, each run only after the previous step (of this or the previous term) has finished. */
export interface LeaderTermsOptions {
  /** Starts consuming for a term. Should return soon after `term.signal` aborts. */
  begin(term: Term): Promise<void>;
  /** Stops consuming after a term (idempotent); `term` is undefined when no term was current. */
  end(term: Term | undefined, reason: string): Promise<void>;
  /** A step threw; the next steps run anyway. */
  onError(err: unknown, step: 'begin' | 'end'): void;
  /** Monotonic clock, ms (default `performance.now()`): {@link Term.electedMs}. */
  monotonicNow?: () => number;
}

/** The serial queue of a target's term transitions. */
export interface LeaderTerms {
  /** Starts a new term (a current one is ended first). */
  elected(): void;
  /** Ends the current term, if any, and queues its end. */
  lost(reason: string): void;
  /** The current term, undefined between terms. */
  readonly current: Term | undefined;
  /** Resolves once every transition queued so far has run. */
  settled(): Promise<void>;
}

/** Creates the term queue of one target. */
export function createLeaderTerms(opts: LeaderTermsOptions): LeaderTerms {
  const monotonicNow = opts.monotonicNow ?? (() => performance.now());
  let current: { term: Term; end: AbortController } | undefined;
  let count = 0;
  let queue: Promise<void> = Promise.resolve();

  const serially = (step: 'begin' | 'end', run: () => Promise<void>) => {
    queue = queue.then(run).catch((err: unknown) => opts.onError(err, step));
  };

  function lost(reason: string): void {
    const ending = current;
    current = undefined;
    ending?.end.abort(reason);
    serially('end', () => opts.end(ending?.term, reason));
  }

  return {
    elected() {
      if (current) lost('elected again');
      const end = new AbortController();
      const term: Term = { id: ++count, signal: end.signal, electedMs: monotonicNow() };
      current = { term, end };
      serially('begin', () => opts.begin(term));
    },
    lost,
    get current() {
      return current?.term;
    },
    settled: () => queue,
  };
}

/**
 * Waits for `p` within a term: resolves `'done'` when `p` settles (fulfilled or rejected: the caller reads
 * its own result), `'timeout'` after `timeoutMs` (none when undefined), `'ended'` as soon as `signal`
 * aborts. `p` itself is left running.
 */
export function waitInTerm(
  p: Promise<unknown>,
  signal: AbortSignal,
  timeoutMs?: number,
): Promise<'done' | 'timeout' | 'ended'> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve('ended');
    let timer: NodeJS.Timeout | undefined;
    const finish = (how: 'done' | 'timeout' | 'ended') => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(how);
    };
    const onAbort = () => finish('ended');
    signal.addEventListener('abort', onAbort, { once: true });
    // Unref'd: a term's wait never keeps the process alive on its own.
    if (timeoutMs !== undefined) timer = setTimeout(() => finish('timeout'), timeoutMs).unref();
    p.then(
      () => finish('done'),
      () => finish('done'),
    );
  });
}
