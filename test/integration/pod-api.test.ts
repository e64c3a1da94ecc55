import diagnostics from 'node:diagnostics_channel';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { monotonicClock } from '../../src/clock.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KubeApiError } from '../../src/kube/api-status.ts';
import { createKubeHttp } from '../../src/kube/kube-http.ts';
import { loadClusterAccess } from '../../src/kube/kubeconfig.ts';
import { createPodApi, DeleteAnswerAbandonedError } from '../../src/kube/pod-api.ts';
import { createRateLimiter } from '../../src/kube/rate-limiter.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';
import { createTerminatedDrivers } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

let server: SandboxApiServer;
beforeAll(async () => {
  server = await startSandboxApiServer({ contextName: 'secure', tls: true, token: 's3cret' });
});
afterAll(async () => {
  await server?.close();
});

function api(token?: string) {
  const access = loadClusterAccess(server.kubeconfigPath, undefined);
  const http = createKubeHttp(
    token === undefined ? access : { ...access, headers: async () => ({ authorization: `Bearer ${token}` }) },
  );
  return createPodApi({
    http,
    limiter: createRateLimiter({ qps: 1e6, burst: 1e6, monotonicNow: monotonicClock }),
  });
}

describe('pod API over HTTPS with a bearer token (sandbox)', () => {
  it('keeps its connections alive: 40 DELETEs one after another reuse their connection', async () => {
    const pods = createTerminatedDrivers(server, 'tls', 40, 'keep');
    const pods1 = api();
    await pods1.get('tls', pods[0]?.metadata?.name ?? ''); // connect (and authenticate) once
    let connections = 0;
    const onConnect = () => {
      connections += 1;
    };
    diagnostics.subscribe('undici:client:connected', onConnect);
    try {
      for (const p of pods) {
        expect(await pods1.delete('tls', p.metadata?.name ?? '', { uid: p.metadata?.uid ?? '' })).toBe(
          'accepted',
        );
      }
    } finally {
      diagnostics.unsubscribe('undici:client:connected', onConnect);
    }
    // undici closes a connection after each DELETE with a body unless `reset: false` (src/kube/kube-http.ts).
    // (Without it: 40 new connections. undici may replace the first idle socket once.)
    expect(connections).toBeLessThanOrEqual(1);
  });

  it('GETs and DELETEs with preconditions.uid, reusing one connection pool across requests', async () => {
    const pods = createTerminatedDrivers(server, 'tls', 30);
    const pods1 = api();
    const got = await Promise.all(pods.map((p) => pods1.get('tls', p.metadata?.name ?? '')));
    expect(got.map((p) => p?.metadata?.uid)).toEqual(pods.map((p) => p.metadata?.uid));
    const results = await Promise.all(
      pods.map((p) => pods1.delete('tls', p.metadata?.name ?? '', { uid: p.metadata?.uid ?? '' })),
    );
    expect(results).toEqual(pods.map(() => 'accepted'));
    // A second DELETE of a deleted pod is a no-op the API tells us about; a wrong UID is refused.
    const [first] = pods;
    expect(await pods1.delete('tls', first?.metadata?.name ?? '', { uid: first?.metadata?.uid ?? '' })).toBe(
      'not-found',
    );
    const [other] = createTerminatedDrivers(server, 'tls', 1, 'other');
    expect(
      await pods1.delete('tls', other?.metadata?.name ?? '', { uid: '00000000-0000-4000-8000-000000000000' }),
    ).toBe('conflict');
    expect(server.pods.get('tls', other?.metadata?.name ?? '')).toBeDefined();
  });

  it('GET returns the trimmed pod; DELETE with a stale resourceVersion is refused (409), the current one accepted', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'rv');
    const name = pod?.metadata?.name ?? '';
    const uid = pod?.metadata?.uid ?? '';
    const pods1 = api();
    const got = await pods1.get('tls', name);
    expect(got?.metadata?.uid).toBe(uid);
    expect(got).not.toHaveProperty('spec');
    const rv = got?.metadata?.resourceVersion ?? '';
    expect(rv).not.toBe('');
    expect(await pods1.delete('tls', name, { uid, resourceVersion: String(Number(rv) - 1) })).toBe(
      'conflict',
    );
    expect(server.pods.get('tls', name)).toBeDefined();
    expect(await pods1.delete('tls', name, { uid, resourceVersion: rv })).toBe('accepted');
    expect(server.pods.get('tls', name)).toBeUndefined();
  });

  it('a wrong token is a 401 KubeApiError carrying the Status reason', async () => {
    const err = await api('wrong')
      .get('tls', 'x')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(err).toMatchObject({ code: 401, reason: 'Unauthorized' });
  });

  it('a DELETE vetoed by beforeSend (leadership lost) never leaves: its error comes back as is', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'veto');
    const name = pod?.metadata?.name ?? '';
    const before = server.requests.countsByVerb().delete ?? 0;
    const veto = new Error('lease went stale');
    const err = await api()
      .delete('tls', name, { uid: pod?.metadata?.uid ?? '' }, undefined, {
        beforeSend: () => {
          throw veto;
        },
      })
      .catch((e: unknown) => e);
    expect(err).toBe(veto);
    expect(server.requests.countsByVerb().delete ?? 0).toBe(before);
    expect(server.pods.get('tls', name)).toBeDefined();
  });

  it.each([
    ['HTTP/1.1', false],
    ['HTTP/2', true],
  ])(
    'the last check runs once the connection is established (%s): a lease lapsing during a slow TCP+TLS handshake stops the DELETE',
    async (_name, http2) => {
      const api = http2
        ? await startSandboxApiServer({ contextName: 'secure-h2', tls: true, http2: true, token: 's3cret' })
        : server;
      const [pod] = createTerminatedDrivers(api, 'tls', 1, 'handshake');
      const name = pod?.metadata?.name ?? '';
      const before = api.requests.countsByVerb().delete ?? 0;
      // A front that takes connections and holds them (a slow handshake behind a delaying proxy) until released.
      const upstream = Number(new URL(api.url).port);
      const held: Socket[] = [];
      let release = false;
      const relay = (down: Socket) => {
        const up = connect(upstream, '127.0.0.1');
        down.pipe(up).pipe(down);
        for (const s of [down, up]) s.on('error', () => (s === down ? up : down).destroy());
      };
      const front = createTcpServer((down) => (release ? relay(down) : held.push(down)));
      front.listen(0, '127.0.0.1');
      await once(front, 'listening');
      try {
        const access = loadClusterAccess(api.kubeconfigPath, undefined);
        const http = createKubeHttp(
          { ...access, server: `https://127.0.0.1:${(front.address() as AddressInfo).port}` },
          { http2 },
        );
        const pods1 = createPodApi({
          http,
          limiter: createRateLimiter({ qps: 1e6, burst: 1e6, monotonicNow: monotonicClock }),
        });
        let leaseFresh = true;
        const veto = new Error('lease went stale');
        let checks = 0;
        const result = pods1
          .delete('tls', name, { uid: pod?.metadata?.uid ?? '' }, undefined, {
            beforeSend: () => {
              checks += 1;
              if (!leaseFresh) throw veto;
            },
          })
          .catch((e: unknown) => e);
        await waitFor('the DELETE waiting for its connection', () => held.length === 1);
        leaseFresh = false; // the lease lapses while the handshake is under way
        release = true;
        for (const down of held) relay(down);
        expect(await result).toBe(veto);
        expect(checks).toBe(1);
        expect(api.requests.countsByVerb().delete ?? 0).toBe(before);
        expect(api.pods.get('tls', name)).toBeDefined();
        // The connection is still good for the next request (over h2: the session; over HTTP/1.1: not written).
        leaseFresh = true;
        expect(
          await pods1.delete('tls', name, { uid: pod?.metadata?.uid ?? '' }, undefined, {
            beforeSend: () => {
              if (!leaseFresh) throw veto;
            },
          }),
        ).toBe('accepted');
        await http.close();
      } finally {
        for (const s of held) s.destroy();
        front.close();
        if (api !== server) await api.close();
      }
    },
  );

  it('a DELETE that has left is not cut by its signal: the answer within the grace is the outcome', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'left');
    const name = pod?.metadata?.name ?? '';
    const fault = server.faults.inject({ verb: 'delete', path: `/${name}$`, latencyMs: 400, count: 1 });
    const lost = new AbortController();
    try {
      // Leadership lost 50 ms after the request left: aborting now would take nothing back.
      const result = await api().delete('tls', name, { uid: pod?.metadata?.uid ?? '' }, lost.signal, {
        beforeSend: () => {
          setTimeout(() => lost.abort(new Error('leadership lost')), 50);
        },
      });
      expect(lost.signal.aborted).toBe(true);
      expect(result).toBe('accepted');
      expect(server.pods.get('tls', name)).toBeUndefined(); // a terminated pod goes at once
    } finally {
      server.faults.clear(fault);
    }
  });

  it('a DELETE that has left and gets no answer within the grace is given up (DeleteAnswerAbandonedError)', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'given-up');
    const name = pod?.metadata?.name ?? '';
    const fault = server.faults.inject({ verb: 'delete', path: `/${name}$`, latencyMs: 5_000, count: 1 });
    const lost = new AbortController();
    const access = loadClusterAccess(server.kubeconfigPath, undefined);
    const pods = createPodApi({
      http: createKubeHttp(access),
      limiter: createRateLimiter({ qps: 1e6, burst: 1e6, monotonicNow: monotonicClock }),
      answerGraceMs: 100,
    });
    try {
      const err = await pods
        .delete('tls', name, { uid: pod?.metadata?.uid ?? '' }, lost.signal, {
          beforeSend: () => {
            setTimeout(() => lost.abort(new Error('leadership lost')), 20);
          },
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DeleteAnswerAbandonedError);
    } finally {
      server.faults.clear(fault);
    }
  });

  it('a DELETE aborted before it leaves rejects with the abort reason and sends nothing', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'held');
    const name = pod?.metadata?.name ?? '';
    const access = loadClusterAccess(server.kubeconfigPath, undefined);
    const limiter = createRateLimiter({ qps: 0.1, burst: 1, monotonicNow: monotonicClock });
    await limiter.take(); // the next request waits ~10 s for a token
    const pods = createPodApi({ http: createKubeHttp(access), limiter });
    const before = server.requests.countsByVerb().delete ?? 0;
    const lost = new AbortController();
    const reason = new Error('leadership lost');
    const pending = pods
      .delete('tls', name, { uid: pod?.metadata?.uid ?? '' }, lost.signal)
      .catch((e: unknown) => e);
    lost.abort(reason);
    expect(await pending).toBe(reason);
    expect(server.requests.countsByVerb().delete ?? 0).toBe(before);
    expect(server.pods.get('tls', name)?.metadata?.deletionTimestamp).toBeUndefined();
  });

  it('a 401 tells the credentials to refresh (ClusterAccess.unauthorized)', async () => {
    const access = loadClusterAccess(server.kubeconfigPath, undefined);
    let refreshed = 0;
    const http = createKubeHttp({
      ...access,
      headers: async () => ({ authorization: 'Bearer revoked' }),
      unauthorized: () => {
        refreshed += 1;
      },
    });
    const pods1 = createPodApi({
      http,
      limiter: createRateLimiter({ qps: 1e6, burst: 1e6, monotonicNow: monotonicClock }),
    });
    await expect(pods1.get('tls', 'x')).rejects.toMatchObject({ code: 401 });
    expect(refreshed).toBe(1);
  });
});

describe('pod API against a server that answers GET with something else than a pod', () => {
  it('a 200 without a pod object is a failed GET (InvalidResponse), never "re-created"', async () => {
    const proxy = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>login</html>');
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const port = (proxy.address() as AddressInfo).port;
    const http = createKubeHttp({
      context: 'proxy',
      server: `http://127.0.0.1:${port}`,
      tls: {},
      headers: async () => ({}),
    });
    try {
      const pods1 = createPodApi({
        http,
        limiter: createRateLimiter({ qps: 1e6, burst: 1e6, monotonicNow: monotonicClock }),
      });
      await expect(pods1.get('ns', 'd1')).rejects.toMatchObject({ code: 200, reason: 'InvalidResponse' });
    } finally {
      await http.close();
      proxy.close();
    }
  });
});

describe('pod API: a DELETE answered 2xx by something else than the API server', () => {
  it('an HTML login page (200) is a failed DELETE (InvalidResponse), not accepted; the retry is accepted', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'login');
    const name = pod?.metadata?.name ?? '';
    const uid = pod?.metadata?.uid ?? '';
    server.faults.inject({ verb: 'delete', path: `/pods/${name}$`, loginPage: true, count: 1 });
    const pods1 = api();
    await expect(pods1.delete('tls', name, { uid })).rejects.toMatchObject({
      name: 'KubeApiError',
      code: 200,
      reason: 'InvalidResponse',
    });
    expect(server.pods.get('tls', name)?.metadata?.uid).toBe(uid);
    expect(await pods1.delete('tls', name, { uid })).toBe('accepted');
    expect(server.pods.get('tls', name)).toBeUndefined();
    expect(server.requests.deletesByUid().get(uid)).toEqual([200, 200]);
  });
});

describe("the handler's live re-check against the API server: a pod changed between the GET and the DELETE", () => {
  /**
   * Runs the cleanup handler (recheck `live`) on `pod` with the real pod API; `between` changes the pod in the
   * API server right after the handler's first GET has read it.
   */
  async function runWith(pod: { metadata?: { name?: string; uid?: string } }, between: () => void) {
    const pods1 = api();
    let gets = 0;
    const outcome = await cleanupDriverPod(
      {
        context: 'secure',
        namespace: 'tls',
        pod: pod.metadata?.name ?? '',
        uid: pod.metadata?.uid ?? '',
        deadlineMs: 0,
      },
      {
        pods: {
          async get(ns, name, signal) {
            const got = await pods1.get(ns, name, signal);
            if (++gets === 1) between();
            return got;
          },
          delete: (...args) => pods1.delete(...args),
        },
        cached: () => undefined,
        recheck: 'live',
        fence: async () => undefined,
        stillLeader: () => true,
        selector: parseLabelSelector('spark-role=driver,kyuubi-unique-tag'),
        policy: 'ALL',
        retentionMs: 0,
        dryRun: false,
        now: Date.now,
      },
      new AbortController().signal,
    );
    return outcome;
  }

  it('relabelled out of the selector → the DELETE is refused (409), the pod read again → skipped; the pod stays', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'relabel-between');
    const name = pod?.metadata?.name ?? '';
    const uid = pod?.metadata?.uid ?? '';
    const outcome = await runWith(pod ?? {}, () => {
      const p = structuredClone(server.pods.get('tls', name));
      if (p?.metadata?.labels) delete p.metadata.labels['kyuubi-unique-tag'];
      if (p) server.pods.update(p);
    });
    expect(outcome).toEqual({ outcome: 'skipped', reason: 'not-selected' });
    expect(server.pods.get('tls', name)?.metadata?.uid).toBe(uid);
    expect(server.requests.deletesByUid().get(uid)).toEqual([409]);
  });

  it('its deletion begun by a person (a finalizer holds it) → 409, read again → already-deleting; never accepted twice', async () => {
    const [pod] = createTerminatedDrivers(server, 'tls', 1, 'finalizer-between');
    const name = pod?.metadata?.name ?? '';
    const uid = pod?.metadata?.uid ?? '';
    const held = structuredClone(server.pods.get('tls', name));
    if (held?.metadata) held.metadata.finalizers = ['example.com/log-shipper'];
    if (held) server.pods.update(held);
    const outcome = await runWith(pod ?? {}, () => {
      server.pods.delete('tls', name);
    });
    expect(outcome).toEqual({ outcome: 'already-deleting' });
    expect(server.requests.deletesByUid().get(uid)).toEqual([409]);
    expect(server.pods.get('tls', name)?.metadata?.deletionTimestamp).toBeDefined();
  });
});
