/**
 * Probes when the API server refuses an informer (RBAC missing, API down): `/readyz` fails once an informer
 * has been down past the threshold, `/healthz` lists it but stays 200 (a restart would not fix the API),
 * and both recover when the API answers again.
 */
import { expect, it } from 'vitest';
import { monotonicClock } from '../../src/clock.ts';
import { type HttpServer, startHttpServer } from '../../src/http/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { http, useOpsEnv } from './ops-env.ts';

const env = useOpsEnv(['alpha']);

it('an informer down past the threshold fails /readyz, not /healthz; both recover', async () => {
  const server = env().servers.alpha;
  if (!server) throw new Error('no sandbox server');
  const fault = server.faults.inject({ verb: 'list', path: '/namespaces/probes-down/pods', status: 403 });
  const r = await env().startReplica('probes-1', {
    SDC_TARGETS: 'alpha:probes-up,alpha:probes-down',
    SDC_QUEUE_PREFIX: 'probes',
  });
  // A second server on the replica with a short threshold (the default is 2 min).
  const probes: HttpServer = await startHttpServer({
    config: { ...r.config, httpPort: 0 },
    replica: r.replica,
    log: r.logs.log,
    monotonicNow: monotonicClock,
    informerDownThresholdMs: 300,
  });
  try {
    const ready = await waitFor('/readyz failing on the down informer', async () => {
      const res = await http(probes.url, '/readyz');
      const body = res.json() as Record<string, unknown>;
      // The healthy informer counts as down until its first list: on a loaded machine that can take > 300 ms.
      const onlyTheBrokenOne = JSON.stringify(body.informersDown) === '["alpha:probes-down"]';
      return res.status === 503 && body.informersUp === false && onlyTheBrokenOne ? body : undefined;
    });
    expect(ready).toMatchObject({ ok: false, informersUp: false, informersDown: ['alpha:probes-down'] });
    const live = await http(probes.url, '/healthz');
    expect(live.status).toBe(200);
    expect(live.json()).toMatchObject({ ok: true, informersDown: ['alpha:probes-down'] });

    server.faults.clear(fault);
    await waitFor(
      '/readyz back to 200',
      async () => (await http(probes.url, '/readyz')).status === 200 || undefined,
    );
    expect((await http(probes.url, '/healthz')).json()).not.toHaveProperty('informersDown');
  } finally {
    await probes.close();
  }
});
