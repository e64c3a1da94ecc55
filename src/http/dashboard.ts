/**
 * The Bull dashboard (bull-board) at `/ui`, with one queue per target, labelled `context:namespace`.
 *
 * Read-only by default: bull-board then answers 405 to every mutating API call (retry, remove, promote,
 * clean, pause…) on the server side, not only by hiding buttons. Enabling actions is an operator's
 * choice (`dashboardReadOnly: false`): a "retry" of a cleanup job is harmless (the handler re-checks and
 * deletes with the UID precondition), a "remove" forgets a pending cleanup until the next reconcile.
 *
 * Loaded on the first request under `/ui`: bull-board's resident code (bench/README.md, "Measurements behind
 * design choices") is not carried by a replica nobody looks at. Fastify cannot add routes once it listens, so the dashboard runs in its own
 * Fastify instance that is never bound to a port, and `/ui` forwards to it in process (`inject`). The
 * main server's hooks (basic auth) run before the forwarding.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, InjectOptions } from 'fastify';
import Fastify from 'fastify';
import { targetLabel } from '../queue/job-identity.ts';
import type { ServedReplica } from './served-replica.ts';

/** Where the dashboard is served. */
export const DASHBOARD_PATH = '/ui';

/** `<link>` tags of bull-board's page that load fonts from Google (removed from the page). */
const EXTERNAL_FONTS = /<link[^>]*fonts\.(?:googleapis|gstatic)\.com[^>]*>\s*/g;

/** Options of {@link registerDashboard}. */
export interface DashboardOptions {
  replica: ServedReplica;
  /** Refuse retry/remove and every other mutating action (default true). */
  readOnly: boolean;
  /** Longest wait for the dashboard's answer (it reads Redis) before a 503, ms (default 10 000). */
  timeoutMs?: number;
}

/**
 * Routes {@link DASHBOARD_PATH} and everything under it (the dashboard's API lives under `/ui/api/`) to
 * the dashboard, which is built on the first such request.
 */
export function registerDashboard(app: FastifyInstance, opts: DashboardOptions): void {
  let dashboard: Promise<FastifyInstance> | undefined;
  /** The cleaners the dashboard was built for: a replica following discovered namespaces replaces them. */
  let builtFor: readonly unknown[] | undefined;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const forward = async (req: FastifyRequest, reply: FastifyReply) => {
    if (dashboard && builtFor !== opts.replica.cleaners) {
      const old = dashboard;
      dashboard = undefined;
      void old.then((d) => d.close()).catch(() => undefined);
    }
    builtFor = opts.replica.cleaners;
    dashboard ??= buildDashboard(opts).catch((err: unknown) => {
      dashboard = undefined; // a later request tries again
      throw err;
    });
    // The body was parsed by this server; inject serializes it again and sets its own length.
    const { 'content-length': _length, 'transfer-encoding': _encoding, ...headers } = req.headers;
    // bull-board waits for Redis without a limit: answer 503 rather than hold the request open.
    let timer: NodeJS.Timeout | undefined;
    const res = await Promise.race([
      (await dashboard).inject({
        method: req.method as InjectOptions['method'],
        url: req.url,
        headers,
        ...(req.body === undefined ? {} : { payload: req.body as InjectOptions['payload'] }),
      }),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!res) {
      return reply.code(503).send({
        error: `the dashboard did not answer within ${timeoutMs / 1000} s: is Redis reachable? (/readyz)`,
      });
    }
    const { 'transfer-encoding': _chunked, connection: _connection, ...resHeaders } = res.headers;
    if (String(res.headers['content-type'] ?? '').startsWith('text/html')) {
      // bull-board's page loads its fonts from Google: in a cluster without egress (or under a strict CSP) that
      // is a failing request per visit. The system fonts serve as well.
      const { 'content-length': _length, ...htmlHeaders } = resHeaders;
      return reply.code(res.statusCode).headers(htmlHeaders).send(res.payload.replace(EXTERNAL_FONTS, ''));
    }
    return reply.code(res.statusCode).headers(resHeaders).send(res.rawPayload);
  };
  app.all(DASHBOARD_PATH, forward);
  app.all(`${DASHBOARD_PATH}/*`, forward);
  app.addHook('onClose', async () => {
    const built = await dashboard?.catch(() => undefined);
    await built?.close();
  });
}

/** The dashboard as a Fastify instance of its own (not listening), ready for `inject`. */
async function buildDashboard(opts: DashboardOptions): Promise<FastifyInstance> {
  const [{ createBullBoard }, { BullMQAdapter }, { FastifyAdapter }] = await Promise.all([
    import('@bull-board/api'),
    import('@bull-board/api/bullMQAdapter'),
    import('@bull-board/fastify'),
  ]);
  const app = Fastify({ logger: false });
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  createBullBoard({
    queues: opts.replica.cleaners.map(
      (c) =>
        // bull-board's adapter takes an untyped Queue; ours stores compact job data (job name = pod name).
        new BullMQAdapter(c.queue.bullQueue as ConstructorParameters<typeof BullMQAdapter>[0], {
          readOnlyMode: opts.readOnly,
          displayName: targetLabel(c.target),
          description: `cleanup jobs of terminated Spark driver pods in ${targetLabel(c.target)} (cluster ${c.target.cluster})`,
        }),
    ),
    serverAdapter,
    options: {
      uiConfig: { boardTitle: 'spark-driver-cleaner', hideDocsLink: true },
    },
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: DASHBOARD_PATH });
  await app.ready();
  return app;
}
