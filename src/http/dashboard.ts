/**
 * The Bull dashboard (bull-board) at `/ui`, with one queue per target, labelled `context:namespace`.
 *
 * Read-only by default: bull-board then answers 405 to every mutating API call (retry, remove, promote,
 * clean, pause…) on the server side, not only by hiding buttons; its pause and resume of every queue at once,
 * which it answers 200 without doing anything, are answered 405 here. Enabling actions is an operator's
 * choice (`dashboardReadOnly: false`): a "retry" of a cleanup job is harmless (the handler re-checks and
 * deletes with the UID precondition), a "remove" forgets a pending cleanup until the next reconcile. Three
 * stay refused even then ({@link ALWAYS_REFUSED}): editing a job's data or its delay would move a driver's
 * deadline (its retention skipped), and a job added by hand stands for no pod an informer saw terminate.
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

/**
 * bull-board's routes refused on the cleanup queues whatever `dashboardReadOnly` says (`METHOD pattern` →
 * why), matched on the route the dashboard's router picked, so no spelling of the URL slips past.
 */
export const ALWAYS_REFUSED: ReadonlyMap<string, string> = new Map([
  [
    `PATCH ${DASHBOARD_PATH}/api/queues/:queueName/:jobId/update-data`,
    "update-data is refused on the cleanup queues: a job's data holds its pod's deadline, and changing it would " +
      'delete the driver before its retention ends',
  ],
  [
    `PATCH ${DASHBOARD_PATH}/api/queues/:queueName/:jobId/delay`,
    "delay is refused on the cleanup queues: a job's delay is its pod's retention, and shortening it would " +
      'delete the driver before it ends',
  ],
  [
    `POST ${DASHBOARD_PATH}/api/queues/:queueName/add`,
    'add is refused on the cleanup queues: cleanup jobs come from the informers, for driver pods seen terminated',
  ],
]);

/** Routes refused when the dashboard is read-only, besides those bull-board refuses itself. */
const READ_ONLY_REFUSED: ReadonlyMap<string, string> = new Map(
  ['pause', 'resume'].map((action) => [
    `PUT ${DASHBOARD_PATH}/api/queues/${action}`,
    `${action} of every queue is refused: the dashboard is read-only (dashboardReadOnly)`,
  ]),
);

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
  const { createBullBoard, BullMQAdapter, FastifyAdapter } = await import('./dashboard-libraries.ts');
  const app = Fastify({ logger: false });
  // Before bull-board's handlers: the route it matched, so `%75pdate-data` is refused as `update-data` is.
  app.addHook('onRequest', async (req, reply) => {
    const route = `${req.method} ${req.routeOptions.url ?? ''}`;
    const why = ALWAYS_REFUSED.get(route) ?? (opts.readOnly ? READ_ONLY_REFUSED.get(route) : undefined);
    if (why === undefined) return;
    // bull-board's own shape ({ error: { key } }, translated by its page), with the reason for people and scripts.
    return reply.code(405).send({ error: { key: 'ERRORS.QUEUE_READ_ONLY' }, message: why });
  });
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
