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

/** Options of one request. */
export interface KubeRequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  signal?: AbortSignal;
  /** Discard a 2xx answer's body unread (`body` is then `undefined`): saves parsing a whole object. */
  skipSuccessBody?: boolean;
  /**
   * Called synchronously after the auth headers are ready, right before the request is written; what it
   * throws cancels the request and is rethrown (the cleanup handler's last leadership check).
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
   */
  request(method: 'GET' | 'DELETE', path: string, opts?: KubeRequestOptions): Promise<KubeResponse>;
  /** Opens a streaming GET (a watch); the caller reads or destroys the body. Rejects as {@link request}. */
  stream(path: string, signal: AbortSignal): Promise<KubeStream>;
  /** Closes the connection pool (in-flight requests finish). */
  close(): Promise<void>;
}

/**
 * Creates the transport of one context: one keep-alive connection pool (through the cluster's proxy when it
 * has one), auth headers from {@link ClusterAccess.headers} per request. Every answer's `Date` header (LIST,
 * WATCH, GET, DELETE, errors alike) is shown to `serverClock`, when given (src/kube/server-clock.ts).
 */
export function createKubeHttp(access: ClusterAccess, opts: { serverClock?: ServerClock } = {}): KubeHttp {
  const server = access.server.replace(/\/+$/, '');
  const connect = { ...access.tls, keepAlive: true, keepAliveInitialDelay: 30_000 };
  // 30 s keep-alive probes, as client-go (cloud load balancers drop idle connections at 60 s).
  // HTTP/1.1 only: undici 8 offers h2 by default and kube-apiserver would take it; the sandbox API server,
  // and so every test of this transport (keep-alive, watch streaming, aborts), speaks HTTP/1.1.
  const dispatcher: Dispatcher = access.proxyUrl
    ? new ProxyAgent({ uri: access.proxyUrl, requestTls: access.tls, connect, allowH2: false })
    : new Agent({ connect, allowH2: false });

  const send = async (
    method: 'GET' | 'DELETE',
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    extra: { beforeSend?: () => void; watch?: boolean } = {},
  ) => {
    const headers = await access.headers();
    signal?.throwIfAborted();
    extra.beforeSend?.();
    const res = await request(`${server}${path}`, {
      method,
      headers:
        body === undefined
          ? { ...headers, accept: 'application/json' }
          : { ...headers, accept: 'application/json', 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      dispatcher,
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
