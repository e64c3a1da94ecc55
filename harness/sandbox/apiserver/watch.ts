/**
 * Watch streams as kube-apiserver serves them: `200` with newline-delimited JSON
 * `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{…}}`.
 * - `sendInitialEvents` (the default for a watch from "" or "0", query-params.ts): synthetic ADDED events for
 *   the current matching pods, then — with bookmarks allowed — a BOOKMARK annotated
 *   `k8s.io/initial-events-end: "true"` (cacher.go, the watch-list), then changes.
 * - A resourceVersion: the retained changes after it, then live ones; older than the window →
 *   one ERROR event carrying a 410 Expired Status, then the stream ends (the client relists).
 * - Neither: the changes from now on.
 * - Selectors apply to each event; a pod that stops matching is sent as DELETED and one that
 *   starts matching as ADDED (the watch cache's filtering, cacher.go `watchCacheEvent` handling).
 * - `allowWatchBookmarks`: periodic BOOKMARK events with only metadata.resourceVersion, and one 2 s before the
 *   `timeoutSeconds` deadline (cache_watcher.go nextBookmarkTime: the client resumes from the freshest one).
 * - `timeoutSeconds`: the stream ends cleanly after that many seconds.
 * - A stall ({@link WatchHub.stall}, a fault): the streams stay open but send nothing until it ends, then
 *   everything held, in order — a watch cache lagging behind etcd. A stream that ends meanwhile drops what it
 *   held: the client resumes from the last resourceVersion it saw and gets those events again.
 */
import type { ServerResponse } from 'node:http';
import type { V1Pod } from '@kubernetes/client-node';
import { isGone, isHttp2, resetResponse } from './h2.ts';
import { withTypeMeta } from './pod-object.ts';
import type { PodPredicate } from './selectors.ts';
import type { KubeStatusError } from './status.ts';
import type { PodStore, StoreEvent, StoreEventType } from './store.ts';
import { podTable } from './table.ts';

/** What one watch request asked for. */
export interface WatchRequest {
  /** Namespace, or undefined for all namespaces. */
  namespace: string | undefined;
  matches: PodPredicate;
  /** Parsed resourceVersion to send the changes after; undefined: from now (after the initial events, if any). */
  resourceVersion: number | undefined;
  /** Send the current matching pods as ADDED events first (and the initial-events-end bookmark if allowed). */
  sendInitialEvents: boolean;
  allowBookmarks: boolean;
  /** End the stream after this many seconds; undefined: never (until dropped or closed). */
  timeoutSeconds: number | undefined;
  /**
   * Fault: end ('clean') or destroy ('reset': the TCP connection over HTTP/1.1, only this stream over HTTP/2)
   * the stream after the first event or 100 ms.
   */
  drop: 'clean' | 'reset' | undefined;
  /** kubectl asked for Table rendering: each event's object is a one-row Table. */
  table: boolean;
}

/** Options of the hub. */
export interface WatchHubOptions {
  /** Interval of BOOKMARK events in ms for watches that allow them (default 60,000). */
  bookmarkIntervalMs?: number;
  /** Sandbox clock, epoch ms (Table ages). */
  now?: () => number;
}

interface OpenWatch {
  res: ServerResponse;
  end(reset?: boolean): void;
}

// One encoded line per event and type, shared by every watch: with 20 watches, encoding the JSON to
// UTF-8 once instead of 20 times is most of the watch cost.
const lineCache = new WeakMap<StoreEvent, Partial<Record<StoreEventType, Buffer>>>();

function eventLine(ev: StoreEvent, type: StoreEventType): Buffer {
  let lines = lineCache.get(ev);
  if (!lines) {
    lines = {};
    lineCache.set(ev, lines);
  }
  let line = lines[type];
  if (line === undefined) {
    line = Buffer.from(`{"type":"${type}","object":${withTypeMeta(ev.itemJson)}}\n`);
    lines[type] = line;
  }
  return line;
}

function bookmarkLine(rv: number, initialEventsEnd: boolean): string {
  const annotations = initialEventsEnd ? ',"annotations":{"k8s.io/initial-events-end":"true"}' : '';
  return `{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"${rv}","creationTimestamp":null${annotations}},"spec":{"containers":null},"status":{}}}\n`;
}

function inNamespace(pod: V1Pod | undefined, ns: string | undefined): boolean {
  return ns === undefined || pod?.metadata?.namespace === ns;
}

/** The type a watch with this filter sees for a change, or undefined to skip it. */
function filteredType(ev: StoreEvent, w: WatchRequest): StoreEventType | undefined {
  if (!inNamespace(ev.pod, w.namespace)) return undefined;
  const now = w.matches(ev.pod);
  if (ev.type === 'ADDED') return now ? 'ADDED' : undefined;
  if (ev.type === 'DELETED')
    return now || (ev.prev !== undefined && w.matches(ev.prev)) ? 'DELETED' : undefined;
  const before = ev.prev !== undefined && w.matches(ev.prev);
  if (before && now) return 'MODIFIED';
  if (now) return 'ADDED';
  if (before) return 'DELETED';
  return undefined;
}

/** Every open watch stream of one server. */
export class WatchHub {
  readonly #store: PodStore;
  readonly #bookmarkIntervalMs: number;
  readonly #now: () => number;
  readonly #open = new Set<OpenWatch>();
  /** Stalls: namespace (undefined: all) → until when (epoch ms, sandbox clock). */
  #stalls: { namespace: string | undefined; untilMs: number }[] = [];
  /** The flushes of the streams holding events in a stall (run again by {@link WatchHub.recheckStalls}). */
  readonly #held = new Set<() => void>();

  constructor(store: PodStore, opts: WatchHubOptions = {}) {
    this.#store = store;
    this.#bookmarkIntervalMs = opts.bookmarkIntervalMs ?? 60_000;
    this.#now = opts.now ?? Date.now;
  }

  /** Number of open watch streams. */
  get openCount(): number {
    return this.#open.size;
  }

  /** Ends every open stream cleanly (the client sees the response end and reconnects). */
  dropAll(): void {
    for (const w of [...this.#open]) w.end(false);
  }

  /**
   * Stalls the watches of `namespace` (and every all-namespaces watch; undefined: every watch) for
   * `durationMs` (ms): they stay open and send nothing, then deliver what they held, in order.
   */
  stall(durationMs: number, namespace?: string): void {
    this.#stalls.push({ namespace, untilMs: this.#now() + durationMs });
  }

  /** Delivers what stalled streams held if their stall has ended (the sandbox clock was advanced). */
  recheckStalls(): void {
    for (const flush of [...this.#held]) flush();
  }

  /** Until when (epoch ms) a watch of `namespace` is stalled; 0 when it is not. */
  #stalledUntil(namespace: string | undefined): number {
    // Every flush of every watch asks: no allocation when nothing was ever stalled.
    if (this.#stalls.length === 0) return 0;
    const now = this.#now();
    this.#stalls = this.#stalls.filter((x) => x.untilMs > now);
    let until = 0;
    for (const x of this.#stalls)
      if (x.namespace === undefined || namespace === undefined || x.namespace === namespace)
        until = Math.max(until, x.untilMs);
    return until;
  }

  /** Ends every open stream by destroying its connection (HTTP/2: resetting its stream). */
  resetAll(): void {
    for (const w of [...this.#open]) w.end(true);
  }

  #tableLine(type: StoreEventType, pod: V1Pod, withColumns: boolean): string {
    const table = podTable([pod], this.#now(), Number(pod.metadata?.resourceVersion ?? 0)) as Record<
      string,
      unknown
    >;
    // kube-apiserver sends the column definitions with the first event only.
    if (!withColumns) table.columnDefinitions = [];
    return `{"type":"${type}","object":${JSON.stringify(table)}}\n`;
  }

  /**
   * Serves one watch on `res`. Errors found before the stream starts (410) are sent as an ERROR
   * event on a 200 stream, as kube-apiserver does. `onEnd` runs once when the stream ends.
   */
  serve(res: ServerResponse, w: WatchRequest, onEnd: () => void): void {
    const store = this.#store;
    // HTTP/2 has no chunked encoding (its frames delimit the body): the header is forbidden there.
    res.writeHead(200, {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-cache, private',
      ...(isHttp2(res) ? {} : { 'Transfer-Encoding': 'chunked' }),
    });
    res.flushHeaders();

    // Lines are queued and flushed once per event-loop turn (setImmediate): the changes made by all
    // the requests read in one poll phase go out as one chunk per watch instead of one write each.
    let pending: Buffer[] = [];
    let flushScheduled = false;
    let stallTimer: NodeJS.Timeout | undefined;
    const flush = () => {
      flushScheduled = false;
      clearTimeout(stallTimer);
      this.#held.delete(flush);
      if (pending.length === 0 || isGone(res)) return;
      const stalledUntil = this.#stalledUntil(w.namespace);
      if (stalledUntil > 0) {
        // Held: tried again when the stall ends, or when the sandbox clock is advanced past it.
        flushScheduled = true;
        this.#held.add(flush);
        stallTimer = setTimeout(flush, Math.max(10, stalledUntil - this.#now()));
        return;
      }
      const chunk = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending);
      pending = [];
      res.write(chunk);
    };
    const write = (line: string | Buffer) => {
      pending.push(typeof line === 'string' ? Buffer.from(line) : line);
      if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flush);
      }
    };

    let backlog: StoreEvent[];
    try {
      backlog = w.resourceVersion === undefined ? [] : store.eventsSince(w.resourceVersion);
    } catch (err) {
      const status = (err as KubeStatusError).status;
      res.end(`{"type":"ERROR","object":${JSON.stringify(status)}}\n`);
      onEnd();
      return;
    }

    let ended = false;
    let bookmarkTimer: NodeJS.Timeout | undefined;
    let preTimeoutBookmark: NodeJS.Timeout | undefined;
    let timeoutTimer: NodeJS.Timeout | undefined;
    let dropTimer: NodeJS.Timeout | undefined;
    const handle: OpenWatch = {
      res,
      end: (reset = false) => {
        if (ended) return;
        ended = true;
        unsubscribe();
        clearInterval(bookmarkTimer);
        clearTimeout(preTimeoutBookmark);
        clearTimeout(timeoutTimer);
        clearTimeout(dropTimer);
        clearTimeout(stallTimer);
        this.#held.delete(flush);
        this.#open.delete(handle);
        if (reset) resetResponse(res);
        else {
          // What a stall held is dropped with the stream: the client's resume replays it.
          if (this.#stalledUntil(w.namespace) === 0) flush();
          res.end();
        }
        onEnd();
      },
    };

    let firstTable = true;
    const tableLine = (type: StoreEventType, pod: V1Pod) => {
      const line = this.#tableLine(type, pod, firstTable);
      firstTable = false;
      return line;
    };
    let sentEvents = 0;
    // A resourceVersion ahead of the store must not replay the events up to it.
    const afterRv = w.resourceVersion ?? store.resourceVersion;
    const send = (ev: StoreEvent) => {
      if (ev.rv <= afterRv) return;
      const type = filteredType(ev, w);
      if (type === undefined) return;
      write(w.table ? tableLine(type, ev.pod) : eventLine(ev, type));
      sentEvents++;
      if (w.drop && sentEvents === 1) setImmediate(() => handle.end(w.drop === 'reset'));
    };

    if (w.sendInitialEvents) {
      for (const e of store.entries(w.namespace)) {
        if (!w.matches(e.pod)) continue;
        write(w.table ? tableLine('ADDED', e.pod) : `{"type":"ADDED","object":${withTypeMeta(e.json)}}\n`);
      }
      if (w.allowBookmarks) write(bookmarkLine(store.resourceVersion, true));
    } else {
      for (const ev of backlog) send(ev);
    }
    // Subscribing in the same tick as the snapshot: no change can fall in between.
    const unsubscribe = store.subscribe(send);
    this.#open.add(handle);
    res.on('close', () => handle.end());

    if (w.allowBookmarks) {
      bookmarkTimer = setInterval(
        () => write(bookmarkLine(store.resourceVersion, false)),
        this.#bookmarkIntervalMs,
      );
      bookmarkTimer.unref();
      const preTimeoutMs = (w.timeoutSeconds ?? 0) * 1000 - 2000;
      if (preTimeoutMs > 0) {
        preTimeoutBookmark = setTimeout(
          () => write(bookmarkLine(store.resourceVersion, false)),
          preTimeoutMs,
        );
        preTimeoutBookmark.unref();
      }
    }
    if (w.timeoutSeconds !== undefined) {
      timeoutTimer = setTimeout(() => handle.end(), Math.max(0, w.timeoutSeconds * 1000));
      timeoutTimer.unref();
    }
    if (w.drop) {
      dropTimer = setTimeout(() => handle.end(w.drop === 'reset'), 100);
      dropTimer.unref();
    }
  }
}
