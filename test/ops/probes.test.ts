/**
 * Probes when the API server refuses an informer (RBAC missing, API down): `/readyz` names the targets the
 * replica cannot clean (`notReady`) and fails only when it can clean none; `/healthz` lists an informer down
 * past the threshold but stays 200 (a restart would not fix the API); both recover when the API answers again.
 * With Redis or etcd down, a real replica process stays ready (so a backend outage leaves every replica
 * evictable by a node drain) and reports the backend down in `/readyz`, `/healthz` and `sdc_backend_up`.
 */
import { expect, it } from 'vitest';
import { startEtcd, startRedis } from '../../harness/sandbox/local-services.ts';
import { spawnReplica } from '../../harness/sandbox/replica-process.ts';
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

/** `sdc_backend_up{backend="<backend>"}`'s value in a scrape, undefined when absent. */
function backendUp(exposition: string, backend: string): number | undefined {
  const m = exposition.match(new RegExp(`^sdc_backend_up\\{backend="${backend}"\\} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : undefined;
}

it.each(['redis', 'etcd'] as const)(
  'a replica process with %s stopped stays ready (evictable), reporting it down in /readyz, /healthz and sdc_backend_up',
  async (stopped) => {
    const server = env().servers.alpha;
    if (!server) throw new Error('no sandbox server');
    const [redis, etcd] = await Promise.all([startRedis(), startEtcd()]);
    const replica = spawnReplica({
      id: `probes-${stopped}`,
      env: {
        KUBECONFIG: server.kubeconfigPath,
        SDC_TARGETS: `alpha:probes-${stopped}`,
        SDC_QUEUE_PREFIX: `probes-${stopped}`,
        SDC_REDIS_URL: redis.url,
        SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
        SDC_HTTP_HOST: '127.0.0.1',
        SDC_HTTP_PORT: '0',
        SDC_ELECTION_TTL_SECONDS: '3',
        SDC_LOG_LEVEL: 'info',
      },
    });
    try {
      const url = String((await replica.waitForLine((l) => l.msg === 'http server listening')).url);
      const ready = await waitFor('/readyz 200 with both backends up', async () => {
        const res = await http(url, '/readyz');
        const body = res.json() as Record<string, unknown>;
        return res.status === 200 && body.redis === true && body.etcd === true ? body : undefined;
      });
      expect(ready).toMatchObject({ ok: true, targetsReady: true });
      const before = (await http(url, '/metrics')).text;
      expect([backendUp(before, 'redis'), backendUp(before, 'etcd')]).toEqual([1, 1]);

      if (stopped === 'redis') await redis.kill();
      else await Promise.all(etcd.members.map((m) => m.kill()));

      // Reported down, and ready all the same: every replica would see the same outage.
      const down = await waitFor(
        `/readyz reporting ${stopped} down`,
        async () => {
          const res = await http(url, '/readyz');
          const body = res.json() as Record<string, unknown>;
          return body[stopped] === false ? { status: res.status, body } : undefined;
        },
        20_000,
      );
      expect(down.status).toBe(200);
      expect(down.body).toMatchObject({ ok: true, targetsReady: true, [stopped]: false });
      // Probe after probe it stays ready while the backend is down.
      for (let i = 0; i < 3; i++) {
        const res = await http(url, '/readyz');
        expect(res.status).toBe(200);
        expect(res.json()).toMatchObject({ ok: true, [stopped]: false });
      }
      const live = await http(url, '/healthz');
      expect(live.status).toBe(200);
      expect(live.json()).toMatchObject({ ok: true, backends: { [stopped]: false } });
      const during = (await http(url, '/metrics')).text;
      expect(backendUp(during, stopped)).toBe(0);
      expect(backendUp(during, stopped === 'redis' ? 'etcd' : 'redis')).toBe(1);
      expect(replica.child.exitCode).toBeNull();

      if (stopped === 'redis') await redis.restart();
      else await Promise.all(etcd.members.map((m) => m.restart()));
      await waitFor(
        `/readyz reporting ${stopped} up again`,
        async () => ((await http(url, '/readyz')).json() as Record<string, unknown>)[stopped] === true,
        30_000,
      );
      expect(backendUp((await http(url, '/metrics')).text, stopped)).toBe(1);
    } finally {
      replica.kill('SIGKILL');
      await replica.exited;
      await Promise.all([redis.stop(), etcd.stop()]);
    }
  },
  120_000,
);
