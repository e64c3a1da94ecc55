/**
 * The replica's HTTP server (Fastify): `/healthz`, `/readyz`, `/api/v1/leaders`. Bound to 127.0.0.1
 * unless configured otherwise.
 */
import Fastify from 'fastify';
import type { CleanerConfig } from '../config/schema.ts';
import { targetLabel } from '../queue/job-identity.ts';
import type { Replica } from '../replica.ts';
import type { Logger } from '../telemetry/log.ts';

/** Options of {@link startHttpServer}. */
export interface HttpServerOptions {
  config: CleanerConfig;
  replica: Replica;
  log: Logger;
  now: () => number;
  /** An informer down longer than this makes /healthz fail, ms (default 120 000). */
  informerDownThresholdMs?: number;
}

/** A listening HTTP server. */
export interface HttpServer {
  readonly url: string;
  close(): Promise<void>;
}

/** Starts the HTTP server on `config.httpHost:config.httpPort`. */
export async function startHttpServer(opts: HttpServerOptions): Promise<HttpServer> {
  const { replica, now } = opts;
  const threshold = opts.informerDownThresholdMs ?? 120_000;
  const app = Fastify({ logger: false });

  app.get('/healthz', async (_req, reply) => {
    const down = replica.cleaners
      .filter(
        (c) =>
          c.informerState.downSinceMs !== undefined && now() - (c.informerState.downSinceMs ?? 0) > threshold,
      )
      .map((c) => targetLabel(c.target));
    if (down.length > 0) return reply.code(503).send({ ok: false, informersDown: down });
    return { ok: true };
  });

  app.get('/readyz', async (_req, reply) => {
    const unsynced = replica.cleaners
      .filter((c) => !c.informerState.synced)
      .map((c) => targetLabel(c.target));
    const redis = replica.redis.status === 'ready';
    const checks: Record<string, unknown> = { informersSynced: unsynced.length === 0, redis };
    if (replica.etcd) {
      checks.etcd = await Promise.race([
        replica.etcd.maintenance
          .status()
          .then(() => true)
          .catch(() => false),
        new Promise<boolean>((r) => setTimeout(() => r(false), 1000)),
      ]);
    }
    const ok = Object.values(checks).every(Boolean);
    return reply.code(ok ? 200 : 503).send({ ok, ...checks, ...(unsynced.length ? { unsynced } : {}) });
  });

  app.get('/api/v1/leaders', async () => {
    const entries = await Promise.all(
      replica.cleaners.map(
        async (c) =>
          [targetLabel(c.target), await c.leadershipState.currentLeader().catch(() => null)] as const,
      ),
    );
    return { replica: replica.replicaId, leaders: Object.fromEntries(entries) };
  });

  const address = await app.listen({ host: opts.config.httpHost, port: opts.config.httpPort });
  return {
    url: address,
    close: () => app.close(),
  };
}
