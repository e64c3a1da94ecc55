/**
 * The sandbox API server's raw DELETE rate from a plain client loop (node:http, keep-alive, a fixed
 * number of requests in flight, each DELETE with `preconditions.uid`) — no cleaner logic: the physical
 * limit the burst benchmark compares the cleaner with. The client loop and its watches run in a worker
 * thread (their own event loop, as a separate process would) against a server in the calling thread.
 *
 * Standalone: `node bench/apiserver-delete-rate.ts [--pods 10000] [--watches 20] [--concurrency 16]`
 * prints one JSON line and writes bench/results/apiserver.json (target ≥ 2,000 DELETE/s on 2 cores).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { SandboxApiServer } from '../harness/sandbox/apiserver/server.ts';

/** A pod to DELETE. */
export interface DeleteTarget {
  namespace: string;
  name: string;
  uid: string;
}

/** Options of {@link measureRawDeleteRate}. */
export interface RawDeleteRateOptions {
  /** Requests in flight (default 16). */
  concurrency?: number;
  /** Watches on the targets' namespace held open during the loop, as informers would (default 1). */
  watches?: number;
}

/** What the loop achieved. */
export interface RawDeleteRate {
  pods: number;
  concurrency: number;
  watches: number;
  /** First request sent to last answer received, ms. */
  elapsedMs: number;
  deletesPerSecond: number;
  /** HTTP codes of the answers: `{ "200": 10000 }`. */
  codes: Record<string, number>;
  /** Every watch saw every pod's DELETED event. */
  watchesSawAllDeletes: boolean;
}

interface ClientInput {
  role: 'raw-delete-client';
  url: string;
  targets: DeleteTarget[];
  concurrency: number;
  watches: number;
}

/**
 * Deletes every target through a plain client loop in a worker thread and reports the rate.
 * The targets must all be in one namespace (the watches watch it).
 * @throws Error when the worker fails.
 */
export async function measureRawDeleteRate(
  server: SandboxApiServer,
  targets: DeleteTarget[],
  opts: RawDeleteRateOptions = {},
): Promise<RawDeleteRate> {
  const input: ClientInput = {
    role: 'raw-delete-client',
    url: server.url,
    targets,
    concurrency: opts.concurrency ?? 16,
    watches: opts.watches ?? 1,
  };
  const worker = new Worker(new URL(import.meta.url), { workerData: input });
  try {
    return await new Promise<RawDeleteRate>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  } finally {
    await worker.terminate();
  }
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

async function runClient(input: ClientInput): Promise<RawDeleteRate> {
  const url = new URL(input.url);
  const pods = input.targets.length;
  const namespace = input.targets[0]?.namespace ?? 'default';
  const added: number[] = new Array(input.watches).fill(0);
  const deleted: number[] = new Array(input.watches).fill(0);
  const watchReqs = [];
  for (let i = 0; i < input.watches; i++) {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: `/api/v1/namespaces/${namespace}/pods?watch=true&labelSelector=spark-role%3Ddriver`,
      },
      (res) => {
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          let nl = buf.indexOf('\n');
          while (nl >= 0) {
            if (buf.startsWith('{"type":"DELETED"')) deleted[i] = (deleted[i] ?? 0) + 1;
            else if (buf.startsWith('{"type":"ADDED"')) added[i] = (added[i] ?? 0) + 1;
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
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  // Start once every watch has its initial ADDED events, as an informer would have synced.
  while (added.some((n) => n < pods)) await sleep(20);

  const agent = new Agent({ keepAlive: true, maxSockets: input.concurrency });
  let next = 0;
  const codes: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: input.concurrency }, async () => {
      while (next < pods) {
        const t = input.targets[next++];
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
  const drainUntil = performance.now() + 30_000;
  while (deleted.some((n) => n < pods) && performance.now() < drainUntil) await sleep(20);
  for (const r of watchReqs) r.destroy();
  agent.destroy();
  return {
    pods,
    concurrency: input.concurrency,
    watches: input.watches,
    elapsedMs: Math.round(elapsedMs),
    deletesPerSecond: Math.round((pods / elapsedMs) * 1000),
    codes,
    watchesSawAllDeletes: deleted.every((n) => n === pods),
  };
}

async function standalone(): Promise<void> {
  const { startSandboxApiServer } = await import('../harness/sandbox/apiserver/server.ts');
  const { sparkDriverPod } = await import('../harness/sandbox/workload.ts');
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '10000' },
      watches: { type: 'string', default: '20' },
      concurrency: { type: 'string', default: '16' },
    },
  });
  const pods = Number(values.pods);
  const server = await startSandboxApiServer({ watchWindow: pods * 3 });
  const targets: DeleteTarget[] = [];
  for (let i = 0; i < pods; i++) {
    const created = server.pods.create(
      sparkDriverPod({
        namespace: 'spark',
        phase: i % 3 ? 'Succeeded' : 'Failed',
        nowMs: server.clock.now(),
      }),
    );
    targets.push({
      namespace: 'spark',
      name: created.metadata?.name ?? '',
      uid: created.metadata?.uid ?? '',
    });
  }
  const rate = await measureRawDeleteRate(server, targets, {
    concurrency: Number(values.concurrency),
    watches: Number(values.watches),
  });
  const result = {
    benchmark: 'apiserver-delete-rate',
    ...rate,
    cpus: cpus().length,
    node: process.version,
    targetDeletesPerSecond: 2000,
    remainingPods: server.podCount(),
    at: new Date(server.clock.now()).toISOString(),
  };
  console.log(JSON.stringify(result));
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  writeFileSync(new URL('./results/apiserver.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
  await server.close();
}

if (!isMainThread && (workerData as ClientInput | undefined)?.role === 'raw-delete-client') {
  parentPort?.postMessage(await runClient(workerData as ClientInput));
} else if (isMainThread && process.argv[1] === fileURLToPath(import.meta.url)) {
  await standalone();
}
