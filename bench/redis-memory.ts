/**
 * Measurement: the Redis memory a pending cleanup job takes, and what a cleaned pod leaves behind until its
 * tombstone and finished job expire (`tombstoneTtl`, 24 h by default): the figures of docs/sizing.md, "Redis".
 * One replica in this process, with the sandbox API server, a real Redis and etcd; N terminated drivers each phase:
 *
 *   1. pending: retention 1 h, so every pod waits as a delayed job; Redis's `used_memory` after the N jobs are
 *      delayed, minus before, over N;
 *   2. cleaned: retention 1 s, the N pods deleted (one DELETE each); `used_memory` once every job completed,
 *      minus before, over N: what each cleaned pod keeps in Redis for `tombstoneTtl`.
 *
 *   npx node bench/redis-memory.ts [N=2000]
 *
 * Printed: bytes per pending job and per cleaned pod, keys per pod, and the Redis commands the replica used
 * (`INFO commandstats`: the command list behind docs/sizing.md's ACL).
 */
import { Redis } from 'ioredis';
import { startSandboxApiServer } from '../harness/sandbox/apiserver/server.ts';
import { startEtcd, startRedis } from '../harness/sandbox/local-services.ts';
import { sparkDriverPod } from '../harness/sandbox/workload.ts';
import { monotonicClock, systemClock } from '../src/clock.ts';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';
import { startReplicaSupervisor } from '../src/replica-supervisor.ts';

const N = Number(process.argv[2] ?? 2000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const server = await startSandboxApiServer({ contextName: 'bench' });
const [redis, etcd] = await Promise.all([startRedis(), startEtcd()]);
const admin = new Redis(redis.url);

/** Redis's `used_memory` (bytes) and key count, after a moment for lazy frees. */
async function usage(): Promise<{ bytes: number; keys: number }> {
  await sleep(500);
  const info = await admin.info('memory');
  const bytes = Number(/^used_memory:(\d+)/m.exec(info)?.[1]);
  return { bytes, keys: await admin.dbsize() };
}

/** One phase: a replica with `retention`, N terminated drivers in `namespace`, until `done` holds. */
async function phase(
  namespace: string,
  retention: string,
  done: (counts: Record<string, number>) => boolean,
): Promise<{ bytesPerPod: number; keysPerPod: number }> {
  const config = loadConfig({
    env: {
      KUBECONFIG: server.kubeconfigPath,
      SDC_TARGETS: `bench:${namespace}`,
      SDC_REDIS_URL: redis.url,
      SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
      SDC_RETENTION: retention,
      SDC_API_QPS: '1000',
      SDC_API_BURST: '1000',
      SDC_REPLICA_ID: `memory-${namespace}`,
    },
    serviceAccountNamespace: () => undefined,
  });
  const replica = await startReplicaSupervisor(config, {
    log: createLogger({ level: 'warn' }),
    now: systemClock,
    monotonicNow: monotonicClock,
  });
  try {
    const lead = () => replica.cleaners.every((c) => c.isLeader && c.informer.synced);
    while (replica.cleaners.length === 0 || !lead()) await sleep(20);
    const before = await usage();
    for (let i = 0; i < N; i++)
      server.pods.create(
        sparkDriverPod({ namespace, appName: `mem-${i}`, phase: 'Succeeded', nowMs: server.clock.now() }),
      );
    const queue = replica.cleaners[0]?.queue.bullQueue;
    for (;;) {
      const counts = (await queue?.getJobCounts('delayed', 'waiting', 'active', 'completed')) ?? {};
      if (done(counts)) break;
      await sleep(200);
    }
    const after = await usage();
    return { bytesPerPod: (after.bytes - before.bytes) / N, keysPerPod: (after.keys - before.keys) / N };
  } finally {
    await replica.stop();
  }
}

try {
  const pending = await phase('pending', 'PT1H', (c) => c.delayed === N);
  await admin.flushall();
  await admin.config('RESETSTAT');
  const cleaned = await phase('cleaned', '1s', (c) => c.completed === N);
  const deletes = [...server.requests.deletesByUid().values()].filter((d) => d.length > 0).length;
  const stats = await admin.info('commandstats');
  const commands = [...stats.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)].map((m) => `${m[1]} ${m[2]}`);
  console.log(`redis ${(await admin.info('server')).match(/redis_version:(\S+)/)?.[1]}, N = ${N}`);
  console.log(
    `pending job: ${Math.round(pending.bytesPerPod)} bytes (${pending.keysPerPod.toFixed(2)} keys) per pod`,
  );
  console.log(
    `cleaned pod, kept for tombstoneTtl: ${Math.round(cleaned.bytesPerPod)} bytes (${cleaned.keysPerPod.toFixed(2)} keys) per pod, ${deletes} pods deleted`,
  );
  console.log(`commands of the cleaned phase (name calls): ${commands.join(', ')}`);
} finally {
  admin.disconnect();
  await server.close();
  await Promise.all([redis.stop(), etcd.stop()]);
}
