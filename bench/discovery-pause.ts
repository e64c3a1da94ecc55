/**
 * Measurement: how long cleaning pauses when the set of discovered namespaces changes. One replica (in this
 * process, with the sandbox API server, Redis and etcd) has F fixed targets and `bench:*` with a namespace
 * selector; a namespace is labelled, and the replica is restarted for the new set (src/replica-supervisor.ts).
 * Printed per change: the debounce wait (the label written → the old replica stopping), and the pause (the
 * old replica stopping → every target led again by the new one, its informer synced), polled every 5 ms.
 *
 *   npx node bench/discovery-pause.ts [F=10] [changes=5]
 *
 * Why it matters: during the pause no target of that replica is cleaned (due pods wait; none is lost).
 */
import { startSandboxApiServer } from '../harness/sandbox/apiserver/server.ts';
import { startEtcd, startRedis } from '../harness/sandbox/local-services.ts';
import { monotonicClock, systemClock } from '../src/clock.ts';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';
import { startReplicaSupervisor } from '../src/replica-supervisor.ts';

const F = Number(process.argv[2] ?? 10);
const CHANGES = Number(process.argv[3] ?? 5);
const server = await startSandboxApiServer({ contextName: 'bench' });
const [redis, etcd] = await Promise.all([startRedis(), startEtcd()]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
try {
  const config = loadConfig({
    env: {
      KUBECONFIG: server.kubeconfigPath,
      SDC_TARGETS: [...Array.from({ length: F }, (_, i) => `bench:fixed-${i}`), 'bench:*'].join(','),
      SDC_NAMESPACE_SELECTOR: 'bench=on',
      SDC_REDIS_URL: redis.url,
      SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
      SDC_ELECTION_TTL_SECONDS: '10',
      SDC_REPLICA_ID: 'pause',
    },
    serviceAccountNamespace: () => undefined,
  });
  const replica = await startReplicaSupervisor(config, {
    log: createLogger({ level: 'warn' }),
    now: systemClock,
    monotonicNow: monotonicClock,
  });
  const allLead = () =>
    replica.cleaners.length > 0 && replica.cleaners.every((c) => c.isLeader && c.informer.synced);
  while (!allLead()) await sleep(5);
  for (let i = 0; i < CHANGES; i++) {
    const before = replica.cleaners;
    const t0 = monotonicClock();
    server.namespaces.create(`found-${i}`, { bench: 'on' });
    // The old replica stops once the debounce has passed: its cleaners stop leading.
    while (before.some((c) => c.isLeader)) await sleep(5);
    const t1 = monotonicClock();
    while (replica.cleaners === before || !allLead()) await sleep(5);
    const t2 = monotonicClock();
    console.log(
      `change ${i + 1}: ${F} fixed + ${i + 1} discovered targets: debounce ${Math.round(t1 - t0)} ms, ` +
        `pause ${Math.round(t2 - t1)} ms (no target of this replica led)`,
    );
  }
  await replica.stop();
} finally {
  await server.close();
  await Promise.all([redis.stop(), etcd.stop()]);
}
