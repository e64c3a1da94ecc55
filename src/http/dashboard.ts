/**
 * The Bull dashboard (bull-board) at `/ui`, with one queue per target, labelled `context:namespace`.
 *
 * Read-only by default: bull-board then answers 405 to every mutating API call (retry, remove, promote,
 * clean, pause…) on the server side, not only by hiding buttons. Enabling actions is an operator's
 * choice (`dashboardReadOnly: false`): a "retry" of a cleanup job is harmless (the handler re-checks and
 * deletes with the UID precondition), a "remove" forgets a pending cleanup until the next reconcile.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import { targetLabel } from '../queue/job-identity.ts';
import type { Replica } from '../replica.ts';

/** Where the dashboard is served. */
export const DASHBOARD_PATH = '/ui';

/** Options of {@link registerDashboard}. */
export interface DashboardOptions {
  replica: Replica;
  /** Refuse retry/remove and every other mutating action (default true). */
  readOnly: boolean;
}

/** Mounts the dashboard under {@link DASHBOARD_PATH}; its API lives under `/ui/api/`. */
export async function registerDashboard(app: FastifyInstance, opts: DashboardOptions): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  createBullBoard({
    queues: opts.replica.cleaners.map(
      (c) =>
        // bull-board's adapter takes an untyped Queue; ours stores compact job data (job name = pod name).
        new BullMQAdapter(c.queue.queue as ConstructorParameters<typeof BullMQAdapter>[0], {
          readOnlyMode: opts.readOnly,
          displayName: targetLabel(c.target),
          description: `cleanup jobs of terminated Spark driver pods in ${targetLabel(c.target)}`,
        }),
    ),
    serverAdapter,
    options: {
      uiConfig: { boardTitle: 'spark-driver-cleaner', hideDocsLink: true },
    },
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: DASHBOARD_PATH });
}
