/**
 * One target cleaner's worker (src/queue/cleanup-worker.ts) on real parts: real Redis, the sandbox API
 * server, our pod API and BullMQ worker.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TargetCleaner } from '../../src/cleaner/target-cleaner.ts';
import { createKubeHttp, type KubeHttp } from '../../src/kube/kube-http.ts';
import { parseLabelSelector } from '../../src/kube/label-selector.ts';
import { createPodApi, type PodApi } from '../../src/kube/pod-api.ts';
import { createRateLimiter } from '../../src/kube/rate-limiter.ts';
import { createCleanupWorker } from '../../src/queue/cleanup-worker.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../../src/sandbox/apiserver/server.ts';
import { type LocalService, startRedis } from '../../src/sandbox/local-services.ts';
import { memoryLogger } from '../helpers/log.ts';

const SELECTOR = 'spark-role=driver,kyuubi-unique-tag';
const CONTEXT = 'tc';

let redis: LocalService;
let server: SandboxApiServer;
let http: KubeHttp;
let pods: PodApi;
const connections: Redis[] = [];
/** Cleaners of the current test, stopped after it whatever happened. */
const running: TargetCleaner[] = [];

beforeAll(async () => {
  [redis, server] = await Promise.all([startRedis(), startSandboxApiServer({ contextName: CONTEXT })]);
  http = createKubeHttp({ context: CONTEXT, server: server.url, tls: {}, headers: async () => ({}) });
  pods = createPodApi({ http, limiter: createRateLimiter({ qps: 1000, burst: 1000, now: Date.now }) });
});
afterEach(async () => {
  server.faults.clear();
  await Promise.all(running.splice(0).map((c) => c.stop()));
});
afterAll(async () => {
  for (const c of connections) c.disconnect();
  await http?.close();
  await server?.close();
  await redis?.stop();
});

function connect(): Redis {
  const c = new Redis(redis.url, { maxRetriesPerRequest: null });
  connections.push(c);
  return c;
}

describe('cleanup worker (real Redis)', () => {
  it('worker: run() while a stop() is closing → a Worker runs once the close has finished', async () => {
    const worker = createCleanupWorker({
      target: { context: CONTEXT, namespace: 'tc-worker' },
      connection: connect(),
      prefix: 'tc-worker',
      concurrency: 1,
      replicaId: 'w1',
      keepFinishedMs: 60_000,
      log: memoryLogger().log,
      deps: {
        pods,
        cached: () => undefined,
        recheck: 'live',
        fence: async () => undefined,
        stillLeader: () => true,
        selector: parseLabelSelector(SELECTOR),
        policy: 'ALL',
        dryRun: false,
        now: Date.now,
      },
    });
    await worker.run();
    const closing = worker.stop('leadership lost');
    const rerun = worker.run();
    await Promise.all([closing, rerun]);
    expect(worker.running).toBe(true);
    await worker.stop('test over');
    expect(worker.running).toBe(false);
  });
});
