/**
 * Benchmark: raw DELETE rate of the sandbox API server with 10,000 terminated driver pods and 20
 * concurrent watches, from a plain client loop (node:http, keep-alive, a fixed number of requests in
 * flight) — no cleaner logic. The server runs in a worker thread (its own event loop, as a separate
 * apiserver process would), the client and the watches in the main thread.
 *
 * Prints one JSON line and writes bench/results/apiserver.json. Target: ≥ 2,000 DELETE/s on 2 cores.
 * Usage: `node bench/apiserver-delete-rate.ts [--pods 10000] [--watches 20] [--concurrency 16]`
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

interface WorkerInput {
  pods: number;
}

async function serve(input: WorkerInput): Promise<void> {
  const { startSandboxApiServer } = await import('../src/sandbox/apiserver/server.ts');
  const { sparkDriverPod } = await import('../src/sandbox/workload.ts');
  const server = await startSandboxApiServer({ watchWindow: input.pods * 3 });
  const targets: { namespace: string; name: string; uid: string }[] = [];
  for (let i = 0; i < input.pods; i++) {
    const namespace = `spark-${i % 4}`;
    const created = server.pods.create(
      sparkDriverPod({ namespace, phase: i % 3 ? 'Succeeded' : 'Failed', nowMs: server.clock.now() }),
    );
    targets.push({ namespace, name: created.metadata?.name ?? '', uid: created.metadata?.uid ?? '' });
  }
  parentPort?.postMessage({ url: server.url, targets });
  parentPort?.on('message', (m: string) => {
    if (m === 'stats') {
      parentPort?.postMessage({
        deleteRequestTotal: server.requests.deleteRequestTotal(),
        codes: [...server.requests.deletesByUid().values()]
          .flat()
          .reduce<Record<string, number>>((acc, c) => {
            acc[c] = (acc[c] ?? 0) + 1;
            return acc;
          }, {}),
        remainingPods: server.podCount(),
        openWatches: server.openWatches(),
      });
    } else if (m === 'close') {
      void server.close().then(() => process.exit(0));
    }
  });
}

function httpCall(agent: Agent, url: URL, method: string, path: string, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: body
          ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }
          : {},
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '10000' },
      watches: { type: 'string', default: '20' },
      concurrency: { type: 'string', default: '16' },
    },
  });
  const pods = Number(values.pods);
  const watchCount = Number(values.watches);
  const concurrency = Number(values.concurrency);
  const worker = new Worker(new URL(import.meta.url), { workerData: { pods } satisfies WorkerInput });
  const ready = await new Promise<{
    url: string;
    targets: { namespace: string; name: string; uid: string }[];
  }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const url = new URL(ready.url);

  // 20 watches across all namespaces on driver pods, as 20 informers would hold.
  const deletedSeen: number[] = new Array(watchCount).fill(0);
  const watchReqs = [];
  for (let i = 0; i < watchCount; i++) {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: '/api/v1/pods?watch=true&labelSelector=spark-role%3Ddriver',
      },
      (res) => {
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          let nl = buf.indexOf('\n');
          while (nl >= 0) {
            if (buf.startsWith('{"type":"DELETED"')) deletedSeen[i] = (deletedSeen[i] ?? 0) + 1;
            buf = buf.slice(nl + 1);
            nl = buf.indexOf('\n');
          }
        });
      },
    );
    req.on('error', () => {});
    req.end();
    watchReqs.push(req);
  }
  // Wait until every watch has received its initial ADDED events (the server counts them open).
  for (;;) {
    worker.postMessage('stats');
    const s = await new Promise<{ openWatches: number }>((r) => worker.once('message', r));
    if (s.openWatches >= watchCount) break;
    await new Promise((r) => setTimeout(r, 20));
  }

  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  const codes: Record<number, number> = {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < ready.targets.length) {
        const t = ready.targets[next++];
        if (!t) break;
        const code = await httpCall(
          agent,
          url,
          'DELETE',
          `/api/v1/namespaces/${t.namespace}/pods/${t.name}`,
          JSON.stringify({ preconditions: { uid: t.uid } }),
        );
        codes[code] = (codes[code] ?? 0) + 1;
      }
    }),
  );
  const elapsedMs = performance.now() - started;
  const watchDeadline = performance.now() + 30_000;
  while (deletedSeen.some((n) => n < pods) && performance.now() < watchDeadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const watchLagMs = performance.now() - started - elapsedMs;
  worker.postMessage('stats');
  const serverStats = await new Promise<Record<string, unknown>>((r) => worker.once('message', r));
  const result = {
    benchmark: 'apiserver-delete-rate',
    pods,
    watches: watchCount,
    concurrency,
    cpus: cpus().length,
    node: process.version,
    elapsedMs: Math.round(elapsedMs),
    deletesPerSecond: Math.round((pods / elapsedMs) * 1000),
    targetDeletesPerSecond: 2000,
    clientCodes: codes,
    server: serverStats,
    watchesSawAllDeletes: deletedSeen.every((n) => n === pods),
    watchDrainAfterLastDeleteMs: Math.round(watchLagMs),
    at: new Date().toISOString(),
  };
  console.log(JSON.stringify(result));
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  writeFileSync(new URL('./results/apiserver.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
  for (const r of watchReqs) r.destroy();
  agent.destroy();
  worker.postMessage('close');
  await new Promise((r) => worker.once('exit', r));
}

if (isMainThread) await main();
else await serve(workerData as WorkerInput);
