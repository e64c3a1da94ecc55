/**
 * `apiHttp2` counted (TCP connections, not timings): a replica (real Redis, no etcd: it leads every target) with
 * 30 target namespaces in `informerScope: namespace` against the sandbox API server offering HTTP/2 (ALPN).
 *
 * - `off` (the default): HTTP/1.1, every watch holds its own connection: at least 30 once all 30 watch;
 * - `on`: the 30 watches (and the LISTs) are streams of at most 2 connections, and the informers still get
 *   their events: terminated drivers created after the watches opened are queued in their targets.
 *
 * Then the transport alone: 300 watches of one context over h2 all open (none waits for a stream), on
 * ceil(300 / H2_MAX_STREAMS_PER_CONNECTION) connections; a watch whose stream the server resets fails its
 * reader (the informer then resumes it) while the other streams of the connection carry on; and `on` against a
 * plain `http://` server stays HTTP/1.1 (h2 is only negotiated over TLS).
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { type LocalService, startRedis } from '../../harness/sandbox/local-services.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createKubeHttp, H2_MAX_STREAMS_PER_CONNECTION, type KubeStream } from '../../src/kube/kube-http.ts';
import { jobKey } from '../../src/queue/job-identity.ts';
import { type Replica, startReplica } from '../../src/replica.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../sandbox/helpers.ts';

const T = 30;
const TOKEN = 'h2-t0ken';
let server: SandboxApiServer;
let redis: LocalService;

beforeAll(async () => {
  [server, redis] = await Promise.all([
    startSandboxApiServer({ tls: true, http2: true, token: TOKEN, contextName: 'h2' }),
    startRedis(),
  ]);
});
afterAll(async () => {
  await Promise.all([server?.close(), redis?.stop()]);
});

/** What each running test must stop. */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await waitFor(() => server.openConnections() === 0, 'every connection of the test closed', 10_000);
});

/** Starts a replica with T namespace-scope targets and `apiHttp2`; resolves once every informer watches. */
async function startWatchingReplica(apiHttp2: 'off' | 'on', prefix: string): Promise<Replica> {
  const config = loadConfig({
    env: {
      KUBECONFIG: server.kubeconfigPath,
      SDC_TARGETS: Array.from({ length: T }, (_, i) => `h2:${prefix}-${i}`).join(','),
      SDC_INFORMER_SCOPE: 'namespace',
      SDC_API_HTTP2: apiHttp2,
      SDC_API_QPS: '500',
      SDC_API_BURST: '500',
      SDC_REDIS_URL: redis.url,
      SDC_REPLICA_ID: prefix,
      SDC_QUEUE_PREFIX: prefix,
      SDC_RETENTION: '1h',
    },
    serviceAccountNamespace: () => undefined,
  });
  expect(config.apiHttp2).toBe(apiHttp2);
  const replica = await startReplica(config, {
    log: memoryLogger('warn').log,
    now: Date.now,
    monotonicNow: () => performance.now(),
  });
  cleanups.push(() => replica.stop());
  await waitFor(
    () => replica.cleaners.every((c) => c.informer.synced) && server.openWatches() >= T,
    `all ${T} informers synced and watching`,
    20_000,
  );
  return replica;
}

describe('apiHttp2 with 30 targets in namespace scope, against a server offering h2', () => {
  it('off (default): HTTP/1.1, one TCP connection per watch', async () => {
    await startWatchingReplica('off', 'h1');
    expect(server.openWatches()).toBe(T);
    expect(server.openConnections()).toBeGreaterThanOrEqual(T);
  });

  it('on: the 30 watches share at most 2 TCP connections, and still deliver events', async () => {
    await startWatchingReplica('on', 'h2');
    expect(server.openWatches()).toBe(T);
    expect(server.openConnections()).toBeLessThanOrEqual(2);

    // Terminated drivers created after the watches opened reach the informers only through them.
    const created = [0, 7, 29].map((i) => {
      const p = server.pods.create(
        sparkDriverPod({ namespace: `h2-${i}`, phase: 'Succeeded', nowMs: server.clock.now() - 60_000 }),
      );
      return { namespace: `h2-${i}`, uid: p.metadata?.uid ?? '' };
    });
    const check = new Redis(redis.url);
    cleanups.push(async () => void check.disconnect());
    await waitFor(async () => {
      for (const p of created)
        if (
          (await check.exists(
            jobKey('h2', { cluster: server.clusterName, context: 'h2', namespace: p.namespace }, p.uid),
          )) !== 1
        )
          return false;
      return true;
    }, 'each driver queued in its target');
    expect(server.openConnections()).toBeLessThanOrEqual(2);
  });
});

describe('the transport with http2', () => {
  const access = (url: string, ca?: string) => ({
    context: 'h2',
    server: url,
    tls: ca ? { ca: Buffer.from(ca) } : {},
    headers: async () => ({ authorization: `Bearer ${TOKEN}` }),
  });

  it(`300 watches of one context all open, ${H2_MAX_STREAMS_PER_CONNECTION} streams per connection`, async () => {
    const http = createKubeHttp(access(server.url, server.caCertPem), { http2: true });
    const abort = new AbortController();
    cleanups.push(async () => {
      abort.abort();
      await http.close();
    });
    const streams: KubeStream[] = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        http.stream(`/api/v1/namespaces/many-${i}/pods?watch=true`, abort.signal),
      ),
    );
    for (const s of streams) expect(s.statusCode).toBe(200);
    await waitFor(() => server.openWatches() === 300, '300 open watches');
    expect(server.openConnections()).toBe(Math.ceil(300 / H2_MAX_STREAMS_PER_CONNECTION));
    for (const s of streams) s.body.destroy();
  });

  it('a reset watch stream fails its reader (no silent hang); the other watch on the connection lives on', async () => {
    const http = createKubeHttp(access(server.url, server.caCertPem), { http2: true });
    const abort = new AbortController();
    cleanups.push(async () => {
      abort.abort();
      await http.close();
    });
    const other = await http.stream('/api/v1/namespaces/rst-other/pods?watch=true', abort.signal);
    server.faults.inject({ verb: 'watch', path: '/namespaces/rst-me/', reset: true, count: 1 });
    const reset = await http.stream('/api/v1/namespaces/rst-me/pods?watch=true', abort.signal);
    expect(reset.statusCode).toBe(200);
    const read = async () => {
      for await (const _ of reset.body) {
        // the stream is reset 100 ms after it started
      }
    };
    await expect(read()).rejects.toThrow();
    expect(server.openWatches()).toBe(1);
    expect(server.openConnections()).toBe(1);
    server.pods.create(
      sparkDriverPod({ namespace: 'rst-other', phase: 'Running', nowMs: server.clock.now() }),
    );
    const events = other.body[Symbol.asyncIterator]();
    const first = await events.next();
    expect(String(first.value)).toContain('"type":"ADDED"');
    other.body.destroy();
  });

  it('against a plain http:// server stays HTTP/1.1 (one connection per watch)', async () => {
    const plain = await startSandboxApiServer({ token: TOKEN, contextName: 'plain' });
    const http = createKubeHttp(access(plain.url), { http2: true });
    const abort = new AbortController();
    cleanups.push(async () => {
      abort.abort();
      await http.close();
      await plain.close();
    });
    const streams = await Promise.all(
      Array.from({ length: 3 }, (_, i) =>
        http.stream(`/api/v1/namespaces/p-${i}/pods?watch=true`, abort.signal),
      ),
    );
    for (const s of streams) expect(s.statusCode).toBe(200);
    await waitFor(() => plain.openWatches() === 3, '3 open watches');
    expect(plain.openConnections()).toBe(3);
  });
});
