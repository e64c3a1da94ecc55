/**
 * Measurement (a count, not a timing): API connections and start-up requests of one replica with T target
 * namespaces on one context, per `informerScope`. Starts the sandbox API server, Redis, and a replica in this
 * process (no etcd: it leads every target), waits until every informer has synced and its watches are open,
 * then prints the sandbox's open connections and the LISTs and WATCHes it received. A third line: namespace
 * scope with `apiHttp2: on` against a second sandbox serving HTTPS and offering HTTP/2 (ALPN).
 *
 *   npx node bench/informer-connections.ts [T=50]
 *
 * Why it matters: over HTTP/1.1 a watch holds its connection for its whole 5-10 minutes, so namespace scope
 * holds T connections per replica and context; HTTP/2 multiplexes them on ⌈T / 100⌉ (100 streams per
 * connection, src/kube/kube-http.ts), cluster scope needs one.
 */
import { startSandboxApiServer } from '../harness/sandbox/apiserver/server.ts';
import { startRedis } from '../harness/sandbox/local-services.ts';
import { sparkDriverPod } from '../harness/sandbox/workload.ts';
import { monotonicClock, systemClock } from '../src/clock.ts';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';
import { startReplica } from '../src/replica.ts';

const T = Number(process.argv[2] ?? 50);
const plain = await startSandboxApiServer({ contextName: 'bench' });
const h2Server = await startSandboxApiServer({ contextName: 'bench', tls: true, http2: true });
const redis = await startRedis();
/** The runs: each scope over HTTP/1.1 (the first two lines, as before), then namespace scope over h2. */
const runs = [
  { scope: 'namespace', apiHttp2: 'off', server: plain },
  { scope: 'cluster', apiHttp2: 'off', server: plain },
  { scope: 'namespace', apiHttp2: 'on', server: h2Server },
] as const;
try {
  for (const server of [plain, h2Server])
    for (let i = 0; i < T; i++)
      server.pods.create(sparkDriverPod({ namespace: `ns-${i}`, phase: 'Running', nowMs: Date.now() }));
  for (const { scope, apiHttp2, server } of runs) {
    server.requests.reset();
    const id = `conn-${scope}${apiHttp2 === 'on' ? '-h2' : ''}`;
    const config = loadConfig({
      env: {
        KUBECONFIG: server.kubeconfigPath,
        SDC_TARGETS: Array.from({ length: T }, (_, i) => `bench:ns-${i}`).join(','),
        SDC_INFORMER_SCOPE: scope,
        SDC_API_HTTP2: apiHttp2,
        SDC_REDIS_URL: redis.url,
        SDC_QUEUE_PREFIX: id,
        SDC_REPLICA_ID: id,
      },
      serviceAccountNamespace: () => undefined,
    });
    const replica = await startReplica(config, {
      log: createLogger({ level: 'warn' }),
      now: systemClock,
      monotonicNow: monotonicClock,
    });
    const watches = scope === 'namespace' ? T : 1;
    while (!replica.cleaners.every((c) => c.informer.synced) || server.openWatches() < watches)
      await new Promise((r) => setTimeout(r, 50));
    const counts = server.requests.countsByVerb();
    console.log(
      JSON.stringify({
        targets: T,
        informerScope: scope,
        ...(apiHttp2 === 'on' ? { apiHttp2 } : {}),
        openConnections: server.openConnections(),
        openWatches: server.openWatches(),
        lists: counts.list ?? 0,
        watches: counts.watch ?? 0,
      }),
    );
    await replica.stop();
    while (server.openConnections() > 0) await new Promise((r) => setTimeout(r, 50));
  }
} finally {
  await Promise.all([plain.close(), h2Server.close()]);
  await redis.stop();
}
