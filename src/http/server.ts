/**
 * The replica's one HTTP port (Fastify), bound to `httpHost` (127.0.0.1 unless configured otherwise):
 *
 * - `/healthz`, `/readyz` — probes (health-routes.ts), always open;
 * - `/metrics` — Prometheus text format, always open;
 * - `/ui` — the Bull dashboard (dashboard.ts), read-only unless `dashboardReadOnly` is false;
 * - `/api/v1/leaders`, `/api/v1/applications…`, `/api/v1/explain…` — this replica's view (api-routes.ts).
 *
 * With `dashboardUser`/`dashboardPassword` set, `/ui` (with the dashboard's own API) and `/api/v1/`
 * require HTTP Basic credentials (failed logins logged and slowed per address: basic-auth.ts); beyond loopback
 * they must be set, or explicitly waived (src/config/http-exposure.ts). Every answer forbids framing
 * (`X-Frame-Options`, CSP `frame-ancestors`). Client errors (4xx: a malformed body, a bad URL) are logged at
 * debug: anyone who reaches the port can send them, so at warn they would flood the log.
 */
import Fastify from 'fastify';
import type { MonotonicClock } from '../clock.ts';
import type { CleanerConfig } from '../config/schema.ts';
import type { Logger } from '../log.ts';
import { type CleanerMetrics, createMetrics } from '../telemetry/metrics.ts';
import { registerApiRoutes } from './api-routes.ts';
import { checkBackends } from './backend-health.ts';
import { registerBasicAuth } from './basic-auth.ts';
import { DASHBOARD_PATH, registerDashboard } from './dashboard.ts';
import { registerHealthRoutes } from './health-routes.ts';
import type { ServedReplica } from './served-replica.ts';

/** Options of {@link startHttpServer}. */
export interface HttpServerOptions {
  /** `labelSelector`, `policy` and `retentionMs` are the rules `/api/v1/explain` judges a pod by. */
  config: Pick<
    CleanerConfig,
    'httpHost' | 'httpPort' | 'dashboard' | 'labelSelector' | 'policy' | 'retentionMs'
  > &
    Partial<Pick<CleanerConfig, 'applicationState'>>;
  replica: ServedReplica;
  log: Logger;
  /** The monotonic clock, ms (src/clock.ts), for the probes' intervals. */
  monotonicNow: MonotonicClock;
  /**
   * The replica's metrics (from its `Telemetry`, so that what the core records is served). Default: a
   * fresh registry with only the series read from the replica at scrape time.
   */
  metrics?: CleanerMetrics;
  /** An informer down longer than this makes /healthz fail, ms (default 120 000). */
  informerDownThresholdMs?: number;
  /** An event-loop stall longer than this makes /healthz fail, ms (default 10 000). */
  eventLoopStallThresholdMs?: number;
  /** Longest wait for the dashboard's answer before a 503, ms (default 10 000). */
  dashboardTimeoutMs?: number;
}

/** A listening HTTP server. */
export interface HttpServer {
  /**
   * `http://host:port` to reach it from this host (the port resolved when `httpPort` is 0; loopback when it is
   * bound to every address).
   */
  readonly url: string;
  /** `host:port` the socket is bound to, e.g. `0.0.0.0:9090` or `[::]:9090`. */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * Starts the HTTP server on `config.httpHost:config.httpPort`.
 * @throws Fastify's listen error (EADDRINUSE, EACCES) when the port cannot be bound.
 */
export async function startHttpServer(opts: HttpServerOptions): Promise<HttpServer> {
  const { replica, config } = opts;
  const app = Fastify({ logger: false });
  const metrics = opts.metrics ?? createMetrics({ processMetrics: false });
  metrics.watch({
    get cleaners() {
      return replica.cleaners;
    },
    // Read at scrape time: a replica following discovered namespaces is restarted with new connections.
    get redis() {
      return replica.redis;
    },
    backends: () => checkBackends(replica, 1000),
  });

  const { user, password } = config.dashboard;
  if (user !== undefined && password !== undefined) {
    registerBasicAuth(app, {
      user,
      password,
      protectedPrefixes: [DASHBOARD_PATH, '/api/'],
      log: opts.log,
      monotonicNow: opts.monotonicNow,
    });
  }
  // No page of this port is meant to be framed: the dashboard's buttons must not be clickjacked.
  app.addHook('onSend', async (_req, reply) => {
    reply.header('x-frame-options', 'DENY');
    reply.header('content-security-policy', "frame-ancestors 'none'");
    reply.header('x-content-type-options', 'nosniff');
  });
  registerHealthRoutes(app, {
    replica,
    monotonicNow: opts.monotonicNow,
    informerDownThresholdMs: opts.informerDownThresholdMs,
    eventLoopStallThresholdMs: opts.eventLoopStallThresholdMs,
  });
  app.get('/metrics', async (_req, reply) => {
    const { text, contentType } = await metrics.scrape();
    return reply.type(contentType).send(text);
  });
  registerApiRoutes(app, {
    replica,
    explain: config,
    ...(config.applicationState ? { appState: config.applicationState } : {}),
    monotonicNow: opts.monotonicNow,
  });
  registerDashboard(app, {
    replica,
    readOnly: config.dashboard.readOnly,
    ...(opts.dashboardTimeoutMs === undefined ? {} : { timeoutMs: opts.dashboardTimeoutMs }),
  });
  app.setErrorHandler((err, req, reply) => {
    const e = err as { message?: string; statusCode?: number };
    const status = e.statusCode ?? 500;
    const fields = { err: { message: e.message }, url: req.url, status, client: req.ip };
    if (status < 500) opts.log.debug(fields, 'http client error');
    else opts.log.warn(fields, 'http request failed');
    return reply.code(status).send({ error: e.message ?? String(err) });
  });

  const url = await app.listen({ host: config.httpHost, port: config.httpPort });
  const bound = app.server.address();
  const address =
    bound && typeof bound === 'object'
      ? `${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`
      : String(bound);
  return {
    url,
    address,
    close: () => app.close(),
  };
}
