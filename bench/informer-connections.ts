/**
 * Measurement (a count, not a timing): API connections and start-up requests of one replica with T target
 * namespaces on one context, per `informerScope`. Starts the sandbox API server, Redis, and a replica in this
 * process (no etcd: it leads every target), waits until every informer has synced and its watches are open,
 * then prints the sandbox's open connections and the LISTs and WATCHes it received.
 *
 *   npx node bench/informer-connections.ts [T=50]
 *
 * Why it matters: over HTTP/1.1 a watch holds its connection for its whole 5-10 minutes, so namespace scope
 * holds T connections per replica and context; HTTP/2 would multiplex them on one, cluster scope needs one.
 */
import { startSandboxApiServer } from '../harness/sandbox/apiserver/server.ts';
import { startRedis } from '../harness/sandbox/local-services.ts';
import { sparkDriverPod } from '../harness/sandbox/workload.ts';
import { monotonicClock, systemClock } from '../src/clock.ts';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';
import { startReplica } from '../src/replica.ts';

const T = Number(process.argv[2] ?? 50);
const server = await startSandboxApiServer({ contextName: 'bench' });
const redis = await startRedis();
try {
  for (let i = 0; i < T; i++)
    server.pods.create(sparkDriverPod({ namespace: `ns-${i}`, phase: 'Running', nowMs: Date.now() }));
  for (const scope of ['namespace', 'cluster'] as const) {
    server.requests.reset();
    const config = loadConfig({
      env: {
        KUBECONFIG: server.kubeconfigPath,
        SDC_TARGETS: Array.from({ length: T }, (_, i) => `bench:ns-${i}`).join(','),
        SDC_INFORMER_SCOPE: scope,
        SDC_REDIS_URL: redis.url,
        SDC_QUEUE_PREFIX: `conn-${scope}`,
        SDC_REPLICA_ID: `conn-${scope}`,
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
  await server.close();
  await redis.stop();
}
