/**
 * Probes when the API server refuses an informer (RBAC missing, API down): `/readyz` names the targets the
 * replica cannot clean (`notReady`) and fails only when it can clean none; `/healthz` lists an informer down
 * past the threshold but stays 200 (a restart would not fix the API); both recover when the API answers again.
 */
import { expect, it } from 'vitest';
import { monotonicClock } from '../../src/clock.ts';
import { type HttpServer, startHttpServer } from '../../src/http/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { http, useOpsEnv } from './ops-env.ts';

const env = useOpsEnv(['alpha']);

it('one informer down: /readyz 200 naming its target; all down: 503; /healthz 200 listing them; both recover', async () => {
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
    const ready = await waitFor('/readyz naming the down informer', async () => {
      const res = await http(probes.url, '/readyz');
      const body = res.json() as Record<string, unknown>;
      // The healthy informer counts as down until its first list: on a loaded machine that can take > 300 ms.
      const onlyTheBrokenOne = JSON.stringify(body.informersDown) === '["alpha:probes-down"]';
      return res.status === 200 && onlyTheBrokenOne ? body : undefined;
    });
    // It can still clean the other target: ready, with the one it cannot clean named.
    expect(ready).toMatchObject({
      ok: true,
      targetsReady: true,
      informersUp: false,
      notReady: ['alpha:probes-down'],
      informersDown: ['alpha:probes-down'],
    });
    const live = await http(probes.url, '/healthz');
    expect(live.status).toBe(200);
    expect(live.json()).toMatchObject({ ok: true, informersDown: ['alpha:probes-down'] });

    // Both down: nothing it can clean, so not ready.
    const both = server.faults.inject({ verb: 'watch', path: '/namespaces/probes-up/pods', status: 403 });
    const list = server.faults.inject({ verb: 'list', path: '/namespaces/probes-up/pods', status: 403 });
    server.dropWatches();
    // Not ready once its informer has been down 10 s (the target cleaner's bound).
    const none = await waitFor(
      '/readyz failing with every target not ready',
      async () => {
        const res = await http(probes.url, '/readyz');
        const body = res.json() as Record<string, unknown>;
        return res.status === 503 ? body : undefined;
      },
      30_000,
    );
    expect(none).toMatchObject({
      ok: false,
      targetsReady: false,
      notReady: ['alpha:probes-up', 'alpha:probes-down'],
    });
    server.faults.clear(both);
    server.faults.clear(list);

    server.faults.clear(fault);
    await waitFor('/readyz back to 200, every target ready', async () => {
      const res = await http(probes.url, '/readyz');
      return (res.status === 200 && !('notReady' in (res.json() as object))) || undefined;
    });
    expect((await http(probes.url, '/healthz')).json()).not.toHaveProperty('informersDown');
  } finally {
    await probes.close();
  }
});
