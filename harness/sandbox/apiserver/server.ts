/**
 * startSandboxApiServer: an emulated kube-apiserver serving the core/v1 Pods API over plain
 * `node:http` or `node:https` (or, with `http2`, `node:http2` offering h2 and HTTP/1.1 by ALPN, as
 * kube-apiserver does), with bearer-token auth, a kubeconfig for itself, fault injection, a
 * request log, a clock for grace periods, and compaction/watch-drop hooks.
 *
 * Request path: control prefix → (not logged) control surface; otherwise the request is classified
 * (discovery / pods verb / unknown), counted in the request log at arrival, authenticated, authorized (a
 * permission table per token, when one is given: ./authorization.ts), run through the fault registry, then
 * served. Every failure becomes a Status answer; nothing crashes the server.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createSecureServer as createHttp2SecureServer } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1DeleteOptions, V1Namespace, V1Pod } from '@kubernetes/client-node';
import { clusterIdentity } from '../../../src/kube/cluster-identity.ts';
import {
  ACCESS_REVIEW_PATH,
  createAuthorization,
  handleAccessReview,
  type PermissionTable,
} from './authorization.ts';
import { createSandboxClock } from './clock.ts';
import { compactionInterval, startCompactor } from './compactor.ts';
import { CONTROL_PREFIX, handleControl } from './control.ts';
import { discoveryDocument, isHealthPath } from './discovery.ts';
import { type ApiVerb, FaultRegistry, type FaultSpec } from './faults.ts';
import { resetRequest } from './h2.ts';
import { markPretty, sendError, sendJson } from './http-io.ts';
import { buildKubeconfig } from './kubeconfig.ts';
import { handleNamespaceRequest, matchNamespaceRoute, NamespaceStore, namespaceVerb } from './namespaces.ts';
import { mergePatch } from './patch.ts';
import { wantsPretty } from './query-params.ts';
import { type DeleteDetails, RequestLog, type RequestLogView } from './request-log.ts';
import { handlePodRequest, matchPodRoute, podVerb } from './routes-pods.ts';
import { faultStatus, pathNotFound, unauthorized } from './status.ts';
import { type CreateMode, type DeleteResult, PodStore } from './store.ts';
import { generateServingCertificate } from './tls.ts';
import { WatchHub } from './watch.ts';

/** Options of {@link startSandboxApiServer}. */
export interface SandboxApiServerOptions {
  /** TCP port; 0 (default) picks a free one. */
  port?: number;
  /** Listen address (default 127.0.0.1). */
  host?: string;
  /** Serve HTTPS with a generated self-signed certificate (default false). */
  tls?: boolean;
  /**
   * With `tls`: offer HTTP/2 by ALPN (`h2`, then `http/1.1`), as kube-apiserver does; a client that does
   * not ask for h2 is still served HTTP/1.1 (default false: HTTP/1.1 only). Over h2 every watch is a
   * stream of one connection; a `reset` fault resets the one stream (RST_STREAM INTERNAL_ERROR), not the
   * connection, and `openConnections()` still counts TCP connections.
   */
  http2?: boolean;
  /** Require `Authorization: Bearer <token>` on API requests (default: no auth). */
  token?: string;
  /**
   * Authorize every API request from this table (token → user and RBAC-style rules: ./authorization.ts), and
   * answer `SelfSubjectAccessReview` from it; only its tokens authenticate (`token`, when given, must be one).
   * Default: no table, every authenticated request allowed, every review `allowed: true`.
   */
  permissions?: PermissionTable;
  /** Context/cluster/user name in the written kubeconfig (default 'sandbox'). */
  contextName?: string;
  /** Default namespace of the kubeconfig context (default none). */
  namespace?: string;
  /** Where to write the kubeconfig (default: a new temp directory). */
  kubeconfigOut?: string;
  /** Number of events retained for watches resuming from a resourceVersion (default 50,000). */
  watchWindow?: number;
  /** Interval in ms of BOOKMARK events on watches that allow them (default 60,000). */
  bookmarkIntervalMs?: number;
  /** How often in ms the kubelet emulation checks for ended grace periods (default 200). */
  sweepIntervalMs?: number;
  /**
   * Interval in ms of the etcd compaction kube-apiserver runs (`--etcd-compaction-interval`, default
   * 300,000 = 5 min; 0 = never): each compacts to the resourceVersion of the previous one, so watches
   * and list continue tokens from a resourceVersion older than one to two intervals get 410 Expired.
   */
  compactionIntervalMs?: number;
}

/** In-process pod access: no faults, not logged as API requests, same rules and events as the API. */
export interface SandboxPods {
  /**
   * Creates a pod. mode 'inprocess' (default) keeps a given uid/status/creationTimestamp and defaults
   * the rest (phase Pending); 'verbatim' keeps everything (fixtures); 'api' behaves as a POST.
   * @throws KubeStatusError 409 AlreadyExists.
   */
  create(pod: V1Pod, mode?: CreateMode): V1Pod;
  get(namespace: string, name: string): V1Pod | undefined;
  /** All pods, or those of one namespace, in key order. */
  list(namespace?: string): V1Pod[];
  /** Replaces spec, metadata and status (the scheduler's and kubelet's writes). @throws 404, 409. */
  update(pod: V1Pod): V1Pod;
  /** JSON-merge-patches `status` (the kubelet's status updates). @throws KubeStatusError 404. */
  patchStatus(namespace: string, name: string, statusPatch: NonNullable<V1Pod['status']>): V1Pod;
  /** Deletes as a DELETE request would. @throws KubeStatusError 404, 409. */
  delete(namespace: string, name: string, opts?: V1DeleteOptions): DeleteResult;
  /**
   * Calls `listener` synchronously after every stored change (API or in-process) with its type and a clone of
   * the pod as stored (for DELETED: its last state). Returns the unsubscribe function.
   */
  subscribe(listener: (type: 'ADDED' | 'MODIFIED' | 'DELETED', pod: V1Pod) => void): () => void;
}

/**
 * In-process namespace writes (harness/sandbox/apiserver/namespaces.ts): each one a watch event at the next
 * global resourceVersion, as through the API.
 */
export interface SandboxNamespaces {
  /** Creates a namespace with these labels. @throws KubeStatusError 409 AlreadyExists. */
  create(name: string, labels?: Record<string, string>): V1Namespace;
  /** Replaces its labels (`kubernetes.io/metadata.name` kept). @throws KubeStatusError 404. */
  setLabels(name: string, labels: Record<string, string>): V1Namespace;
  /** Deletes it: Terminating (MODIFIED), then gone (DELETED); its pods stay. @throws KubeStatusError 404. */
  delete(name: string): V1Namespace;
  get(name: string): V1Namespace | undefined;
  /** Every namespace, by name. */
  list(): V1Namespace[];
}

/** A running sandbox API server. */
export interface SandboxApiServer {
  /** `http://127.0.0.1:PORT` or `https://…`. */
  url: string;
  contextName: string;
  /**
   * The name a replica derives for this server's cluster without an explicit `clusterName`
   * (src/kube/cluster-identity.ts): from its CA with TLS, from its URL without.
   */
  clusterName: string;
  /** Path of the kubeconfig written for this server. */
  kubeconfigPath: string;
  kubeconfigYaml: string;
  /**
   * Writes a kubeconfig for this server (same context name) authenticating with `token` (one of the permission
   * table's), to `path` (default: a new temp file); returns its path.
   */
  kubeconfigFor(token: string, path?: string): string;
  /** PEM CA certificate when serving HTTPS. */
  caCertPem: string | undefined;
  pods: SandboxPods;
  namespaces: SandboxNamespaces;
  faults: { inject(f: FaultSpec): string; clear(id?: string): void };
  requests: RequestLogView;
  /** Sandbox clock (epoch ms); advancing it ends grace periods at once. */
  clock: { now(): number; advance(ms: number): void };
  /** The current global resourceVersion. */
  resourceVersion(): number;
  /** Number of open watch streams. */
  openWatches(): number;
  /**
   * Number of open client connections (TCP, HTTP/1.1 keep-alive ones included; over HTTP/2 one per session,
   * whatever its number of streams).
   */
  openConnections(): number;
  /** Number of pods stored (cheaper than `pods.list().length`). */
  podCount(): number;
  /** Drops retained events: the next watch from an older resourceVersion gets 410 Expired. */
  compact(): void;
  /** Ends every open watch stream (pods and namespaces) cleanly, mid-stream. */
  dropWatches(): void;
  /**
   * Stalls the watch streams of `namespace` (and all-namespaces ones; undefined: all) for `durationMs` ms:
   * open and new streams send nothing, then everything they held, in order — a lagging watch cache.
   */
  stallWatches(durationMs: number, namespace?: string): void;
  /** Stops listening, ends watches and connections. Idempotent. */
  close(): Promise<void>;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Starts a sandbox API server and writes its kubeconfig.
 * @throws Error when the port cannot be bound (EADDRINUSE etc.); TypeError for a bad compactionIntervalMs, or
 *   `http2` without `tls` (h2 is offered by ALPN, a TLS extension).
 */
export async function startSandboxApiServer(opts: SandboxApiServerOptions = {}): Promise<SandboxApiServer> {
  const host = opts.host ?? '127.0.0.1';
  if (opts.http2 && !opts.tls)
    throw new TypeError('http2 needs tls: h2 is offered by ALPN, during the TLS handshake');
  const compactionIntervalMs = compactionInterval(opts.compactionIntervalMs);
  const contextName = opts.contextName ?? 'sandbox';
  const clock = createSandboxClock();
  const store = new PodStore({ now: clock.now, watchWindow: opts.watchWindow });
  const namespaces = new NamespaceStore(store, clock.now);
  const hub = new WatchHub(store, { bookmarkIntervalMs: opts.bookmarkIntervalMs, now: clock.now });
  const faults = new FaultRegistry(clock.now);
  const log = new RequestLog();
  const token = opts.token;
  const authz = createAuthorization(token, opts.permissions);
  const cert = opts.tls ? await generateServingCertificate(host) : undefined;
  let hostPort = '';

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    serveRequest(req, res).catch((err) => sendError(res, err));
  };

  const serveRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const pathname = q < 0 ? rawUrl : rawUrl.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : rawUrl.slice(q + 1));
    const method = req.method ?? 'GET';
    // kube-apiserver's answers carry its clock in `Date` (Go's net/http writes it); the replicas read it to
    // judge deadlines (src/kube/server-clock.ts). From the sandbox clock, so an advanced clock shows too;
    // written at arrival, so never later than the time the answer leaves (node's own Date is replaced).
    res.setHeader('Date', new Date(clock.now()).toUTCString());
    if (pathname.startsWith(CONTROL_PREFIX)) {
      await handleControl(req, res, pathname, { store, hub, faults, log, clock, namespaces });
      return;
    }
    if (pathname === ACCESS_REVIEW_PATH) {
      // Logged as what it is to RBAC: a create of a selfsubjectaccessreviews object.
      const finishReview = log.arrive('create', method, pathname, clock.now());
      res.on('close', () => finishReview(res.headersSent ? res.statusCode : 0, undefined, {}));
      const reviewer = authz.authenticate(req.headers.authorization);
      if (!reviewer) sendError(res, unauthorized());
      else await handleAccessReview(req, res, reviewer, authz);
      return;
    }
    const nsName = matchNamespaceRoute(pathname);
    if (nsName !== undefined) {
      const nsVerb = namespaceVerb(nsName, query, method);
      const finishNs = log.arrive(nsVerb, method, pathname, clock.now());
      res.on('close', () => finishNs(res.headersSent ? res.statusCode : 0, undefined, {}));
      const nsUser = authz.authenticate(req.headers.authorization);
      if (!nsUser) {
        sendError(res, unauthorized());
        return;
      }
      // A namespace object is judged in its own namespace (kube's RequestInfo); the collection at the cluster scope.
      authz.authorize(nsUser, {
        verb: nsVerb,
        resource: 'namespaces',
        subresource: '',
        namespace: nsName,
        name: nsName,
      });
      if (wantsPretty(query)) markPretty(res);
      const fault = faults.take(nsVerb, pathname);
      if (fault?.latencyMs) await delay(fault.latencyMs);
      if (fault?.status !== undefined) {
        sendError(
          res,
          faultStatus(fault.status, nsVerb, undefined, nsName || undefined, fault.retryAfterSeconds),
        );
        return;
      }
      await handleNamespaceRequest(req, res, nsName, query, namespaces, store, {
        bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000,
      });
      return;
    }

    const route = matchPodRoute(pathname);
    if (route && wantsPretty(query)) markPretty(res);
    let verb: ApiVerb | 'discovery' = 'discovery';
    let methodError: unknown;
    if (route) {
      try {
        verb = podVerb(method, route, query);
      } catch (err) {
        methodError = err;
        verb = method === 'DELETE' ? 'delete' : 'get';
      }
    }
    const finish = log.arrive(verb, method, pathname, clock.now());
    let uid: string | undefined;
    const details: DeleteDetails = {};
    if (verb === 'delete' && route?.name && route.namespace) {
      // Look the uid up at arrival: by the time the answer is written the pod may be gone.
      details.found = store.getEntry(route.namespace, route.name)?.pod;
      uid = details.found?.metadata?.uid;
    }
    res.on('close', () => finish(res.headersSent ? res.statusCode : 0, uid, details));

    const user = authz.authenticate(req.headers.authorization);
    if (!user) {
      sendError(res, unauthorized());
      return;
    }
    if (!route) {
      if (isHealthPath(pathname)) {
        res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('ok');
        return;
      }
      const doc = method === 'GET' ? discoveryDocument(pathname, hostPort) : undefined;
      if (doc !== undefined) sendJson(res, 200, doc);
      else sendError(res, pathNotFound());
      return;
    }
    if (methodError) {
      sendError(res, methodError);
      return;
    }
    const apiVerb = verb as ApiVerb;
    authz.authorize(user, {
      verb: apiVerb,
      resource: 'pods',
      subresource: route.kind === 'status' ? 'status' : '',
      namespace: route.namespace ?? '',
      name: route.name ?? '',
    });
    const fault = faults.take(apiVerb, pathname);
    let dropWatch: 'clean' | 'reset' | undefined;
    if (fault) {
      if (fault.latencyMs) await delay(fault.latencyMs);
      if (fault.reset && apiVerb !== 'watch') {
        resetRequest(req, res);
        return;
      }
      if (fault.loginPage) {
        res
          .writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' })
          .end(
            '<!DOCTYPE html><html><head><title>Sign in</title></head><body><form>login</form></body></html>',
          );
        return;
      }
      if (fault.status !== undefined) {
        sendError(
          res,
          faultStatus(fault.status, apiVerb, route.namespace, route.name, fault.retryAfterSeconds),
        );
        return;
      }
      if (apiVerb === 'watch' && (fault.reset || fault.dropWatch))
        dropWatch = fault.reset ? 'reset' : 'clean';
    }
    await handlePodRequest({
      req,
      res,
      route,
      verb: apiVerb,
      query,
      store,
      hub,
      dropWatch,
      now: clock.now,
      onWatchEnd: () => {},
      noteUid: (preconditionUid) => {
        uid ??= preconditionUid;
        details.preconditionUid = preconditionUid;
      },
      noteApplied: (pod) => {
        details.applied = pod;
      },
    });
  };

  // node:http2's compatibility request/response carry the API of node:http's that the routes use (the
  // differences are handled in ./h2.ts); its 'connection' event is the TCP socket, as node:https's.
  const server: Server = !cert
    ? createHttpServer(handle)
    : opts.http2
      ? (createHttp2SecureServer(
          { cert: cert.cert, key: cert.key, allowHTTP1: true },
          handle as unknown as Parameters<typeof createHttp2SecureServer>[1],
        ) as unknown as Server)
      : createHttpsServer({ cert: cert.cert, key: cert.key }, handle);
  server.keepAliveTimeout = 30_000;
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  hostPort = `${urlHost}:${port}`;
  const url = `${cert ? 'https' : 'http'}://${hostPort}`;

  const kubeconfigOf = (as: string | undefined) =>
    buildKubeconfig([{ contextName, url, caCertPem: cert?.cert, token: as, namespace: opts.namespace }]);
  const writeKubeconfig = (yaml: string, path: string | undefined) => {
    const out = path ?? join(mkdtempSync(join(tmpdir(), 'sandbox-apiserver-')), 'kubeconfig.yaml');
    writeFileSync(out, yaml, { mode: 0o600 });
    return out;
  };
  const kubeconfigYaml = kubeconfigOf(token);
  const kubeconfigPath = writeKubeconfig(kubeconfigYaml, opts.kubeconfigOut);

  const sweepTimer = setInterval(() => store.sweep(), opts.sweepIntervalMs ?? 200);
  sweepTimer.unref();
  const unsubscribeClock = clock.onAdvance(() => {
    store.sweep();
    hub.recheckStalls();
  });
  const stopCompactor = startCompactor(store, compactionIntervalMs);

  let closing: Promise<void> | undefined;
  return {
    url,
    contextName,
    clusterName: clusterIdentity({ server: url, tls: cert ? { ca: Buffer.from(cert.cert) } : {} }).name,
    kubeconfigPath,
    kubeconfigYaml,
    kubeconfigFor: (as, path) => writeKubeconfig(kubeconfigOf(as), path),
    caCertPem: cert?.cert,
    pods: {
      create: (pod, mode = 'inprocess') => store.create(pod, mode),
      get: (ns, name) => store.get(ns, name),
      list: (ns) => store.list(ns),
      update: (pod) => store.replace(pod, 'all'),
      patchStatus: (ns, name, statusPatch) =>
        store.patch(
          ns,
          name,
          (cur) => ({ ...cur, status: mergePatch(cur.status ?? {}, statusPatch) as V1Pod['status'] }),
          'all',
        ),
      delete: (ns, name, deleteOpts) => {
        const r = store.delete(ns, name, deleteOpts);
        return { ...r, pod: { apiVersion: 'v1', kind: 'Pod', ...structuredClone(r.pod) } };
      },
      subscribe: (listener) =>
        store.subscribe((ev) =>
          listener(ev.type, { apiVersion: 'v1', kind: 'Pod', ...structuredClone(ev.pod) }),
        ),
    },
    namespaces: {
      create: (name, labels) => namespaces.create(name, labels),
      setLabels: (name, labels) => namespaces.setLabels(name, labels),
      delete: (name) => namespaces.delete(name),
      get: (name) => namespaces.get(name),
      list: () => namespaces.at().map((ns) => structuredClone(ns)),
    },
    faults: { inject: (f) => faults.inject(f), clear: (id) => faults.clear(id) },
    requests: log,
    clock: { now: clock.now, advance: clock.advance },
    resourceVersion: () => store.resourceVersion,
    openWatches: () => hub.openCount,
    openConnections: () => sockets.size,
    podCount: () => store.size,
    compact: () => store.compact(),
    dropWatches: () => {
      hub.dropAll();
      namespaces.dropWatches();
    },
    stallWatches: (durationMs, namespace) => hub.stall(durationMs, namespace),
    close() {
      closing ??= (async () => {
        clearInterval(sweepTimer);
        unsubscribeClock();
        stopCompactor();
        hub.dropAll();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections?.();
          for (const s of sockets) s.destroy();
        });
      })();
      return closing;
    },
  };
}
