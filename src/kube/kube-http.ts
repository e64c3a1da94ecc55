/**
 * The HTTP transport to one context's Kubernetes API server: requests over undici's `request()` on one
 * keep-alive connection pool per context, TLS and auth headers from the context's {@link ClusterAccess}.
 *
 * Why not client-node's generated `CoreV1Api`: it builds a new undici Agent (and a TLS handshake) per
 * request, and (de)serializes every body through its `ObjectSerializer` into class instances, for three
 * verbs on one resource of which we read a handful of fields (what it cost: bench/README.md, "Measurements
 * behind design choices"). The wire protocol is the same; client-node's conformance against the sandbox API
 * server is still tested (test/sandbox).
 */
import { Agent, type Dispatcher, ProxyAgent, request } from 'undici';
import type { ClusterAccess } from './cluster-access.ts';
import type { ServerClock } from './server-clock.ts';

/** An answer: status, headers (lower-case names) and the body, parsed when it is JSON. */
export interface KubeResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Parsed JSON for `application/json`; the text otherwise ('' for an empty body). */
  readonly body: unknown;
}

/** A streaming answer (a watch): read `body` to the end or destroy it. */
export interface KubeStream {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: AsyncIterable<Buffer> & { destroy(err?: Error): void };
}

/** The methods sent: the replicas GET and DELETE; `check` POSTs access reviews and its canary pods. */
export type KubeMethod = 'GET' | 'DELETE' | 'POST';

/** Options of one request. */
export interface KubeRequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  signal?: AbortSignal;
  /** Discard a 2xx answer's body unread (`body` is then `undefined`): saves parsing a whole object. */
  skipSuccessBody?: boolean;
  /**
   * Called synchronously once the request has a connection, as undici starts writing it (after the TCP and TLS
   * handshakes of a new connection, or on a kept-alive one); what it throws fails the request before any of it
   * is written, and is rethrown (the cleanup handler's last leadership check).
   */
  beforeSend?: () => void;
}

/** The transport of one context. */
export interface KubeHttp {
  /** The cluster's server URL, as in the kubeconfig. */
  readonly server: string;
  /**
   * Sends one request to `path` (with its query string; relative to the server URL) and reads the whole answer.
   * Rejects with undici's error (a `code` such as ECONNREFUSED/ECONNRESET/UND_ERR_*), or the signal's reason.
   * The replicas only GET and DELETE; `check` also POSTs (SelfSubjectAccessReview, its canary pods).
   */
  request(method: KubeMethod, path: string, opts?: KubeRequestOptions): Promise<KubeResponse>;
  /** Opens a streaming GET (a watch); the caller reads or destroys the body. Rejects as {@link request}. */
  stream(path: string, signal: AbortSignal): Promise<KubeStream>;
  /** Closes the connection pool (in-flight requests finish). */
  close(): Promise<void>;
}

/**
 * Most HTTP/2 streams (requests, watches) undici opens on one connection when `http2` is on: the lower of this
 * and the server's SETTINGS_MAX_CONCURRENT_STREAMS (kube-apiserver: `--http2-max-streams-per-connection`).
 * Past it the pool opens another connection rather than queueing: the pool's `connections` is left unlimited
 * (undici's Agent default), so no watch waits for a stream that never frees (a watch holds its stream for
 * 5-10 minutes). 300 watches on one context: 3 connections. undici's own default, written down here.
 */
export const H2_MAX_STREAMS_PER_CONNECTION = 100;

/** Options of {@link createKubeHttp}. */
export interface KubeHttpOptions {
  /** Shown every answer's `Date` header (src/kube/server-clock.ts). */
  serverClock?: ServerClock;
  /**
   * Offer HTTP/2 by ALPN (config `apiHttp2: on`; default false: HTTP/1.1 only). Taken only over TLS
   * (`https://` servers; plain `http://` stays HTTP/1.1, h2c is never tried): the context's requests and
   * watches are then streams of one connection (of {@link H2_MAX_STREAMS_PER_CONNECTION} streams each).
   */
  http2?: boolean;
}

/**
 * Creates the transport of one context: one keep-alive connection pool (through the cluster's proxy when it
 * has one), auth headers from {@link ClusterAccess.headers} per request. Every answer's `Date` header (LIST,
 * WATCH, GET, DELETE, errors alike) is shown to `serverClock`, when given (src/kube/server-clock.ts).
 */
export function createKubeHttp(access: ClusterAccess, opts: KubeHttpOptions = {}): KubeHttp {
  const server = access.server.replace(/\/+$/, '');
  const connect = { ...access.tls, keepAlive: true, keepAliveInitialDelay: 30_000 };
  // 30 s keep-alive probes, as client-go (cloud load balancers drop idle connections at 60 s).
  // HTTP/1.1 unless asked (undici 8 offers h2 by default, and kube-apiserver takes it): over HTTP/1.1 a watch
  // holds its own connection, over h2 every watch of the context shares one, and one lost connection drops
  // them all at once (client-go's known failure mode). Over h2 undici also PINGs the connection every 60 s
  // (its default) and stops opening streams on one that does not answer.
  const h2 = opts.http2
    ? { allowH2: true, maxConcurrentStreams: H2_MAX_STREAMS_PER_CONNECTION }
    : { allowH2: false };
  const dispatcher: Dispatcher = access.proxyUrl
    ? new ProxyAgent({ uri: access.proxyUrl, requestTls: access.tls, connect, ...h2 })
    : new Agent({ connect, ...h2 });

  const send = async (
    method: KubeMethod,
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    extra: { beforeSend?: () => void; watch?: boolean } = {},
  ) => {
    const headers = await access.headers();
    signal?.throwIfAborted();
    const res = await request(`${server}${path}`, {
      method,
      headers:
        body === undefined
          ? { ...headers, accept: 'application/json' }
          : { ...headers, accept: 'application/json', 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      dispatcher: extra.beforeSend ? checkedAtWrite(dispatcher, extra.beforeSend) : dispatcher,
      // undici closes the connection after a request with a body whose method "expects no payload" (DELETE)
      // unless told otherwise: every DELETE would open a new connection (and TLS handshake).
      reset: false,
      // A watch is quiet while nothing changes (and an API server without its watch cache sends no
      // bookmarks): undici's 300 s body timeout would cut it before its own `timeoutSeconds` (300–600 s).
      // The informer guards a silent watch itself (src/kube/pod-reflector.ts).
      ...(extra.watch ? { bodyTimeout: 0 } : {}),
    });
    // Its headers have arrived: the server wrote its Date before now.
    opts.serverClock?.observe(res.headers.date);
    // A revoked or rotated credential: let the next request fetch a fresh one (client-go does the same).
    if (res.statusCode === 401) access.unauthorized?.();
    return res;
  };

  return {
    server,
    async request(method, path, opts = {}) {
      const res = await send(method, path, opts.body, opts.signal, { beforeSend: opts.beforeSend });
      if (opts.skipSuccessBody && res.statusCode < 300) {
        await res.body.dump();
        return { statusCode: res.statusCode, headers: res.headers, body: undefined };
      }
      const text = await res.body.text();
      const type = String(res.headers['content-type'] ?? '');
      let body: unknown = text;
      if (text && type.includes('json')) {
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      }
      return { statusCode: res.statusCode, headers: res.headers, body };
    },
    async stream(path, signal) {
      const res = await send('GET', path, undefined, signal, { watch: true });
      return { statusCode: res.statusCode, headers: res.headers, body: res.body };
    },
    async close() {
      await dispatcher.close().catch(() => undefined);
    },
  };
}

/**
 * `dispatcher`, with `check` run as each request starts being written: undici calls a handler's
 * `onRequestStart` from its client once the request has an established connection, synchronously before it
 * writes the request line (undici 8, lib/dispatcher/client-h1.js and client-h2.js `write*`). What `check`
 * throws there fails the request with that error, and nothing of it is written. Checked any earlier, a new
 * connection's handshakes (a sparse target's DELETE opens one: undici closes connections idle for 4 s) would
 * separate the check from the bytes leaving.
 */
function checkedAtWrite(dispatcher: Dispatcher, check: () => void): Dispatcher {
  return dispatcher.compose(
    (dispatch) => (options, handler) =>
      dispatch(options, {
        onRequestStart(controller, context) {
          check();
          handler.onRequestStart?.(controller, context);
        },
        onRequestUpgrade: (controller, statusCode, headers, socket) =>
          handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
        onResponseStart: (controller, statusCode, headers, statusMessage) =>
          handler.onResponseStart?.(controller, statusCode, headers, statusMessage),
        onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
        onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
        onResponseError: (controller, err) => handler.onResponseError?.(controller, err),
        onResponseStarted: () => handler.onResponseStarted?.(),
        onBodySent: (chunk) => handler.onBodySent?.(chunk),
        onRequestSent: () => handler.onRequestSent?.(),
      }),
  );
}
