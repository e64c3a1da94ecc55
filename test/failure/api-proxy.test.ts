/**
 * The attributing API proxy of the failure suite and the nemesis (helpers.ts `startApiProxy`) must be
 * transparent to faults: a connection the sandbox resets mid-answer is reset for the client too — a watch
 * left open and silent would make its informer stale forever, a failure of the harness, not the product —
 * and it records what each DELETE carried and got.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { waitFor } from '../helpers/wait.ts';
import { type ApiProxy, startApiProxy } from './helpers.ts';

let server: SandboxApiServer;
let proxy: ApiProxy;
let base: URL;
beforeAll(async () => {
  server = await startSandboxApiServer({ contextName: 'px' });
  proxy = await startApiProxy(server);
  base = new URL(/server: (\S+)/.exec(readFileSync(proxy.kubeconfigPath, 'utf8'))?.[1] ?? '');
});
afterAll(async () => {
  await proxy.close();
  await server.close();
});

/** GETs `path` through the proxy; resolves with how the exchange ended (`hung`: not within 10 s). */
function get(path: string): Promise<'reset' | 'ended' | 'hung'> {
  return new Promise((resolve) => {
    setTimeout(() => resolve('hung'), 10_000).unref();
    const req = request({ host: base.hostname, port: base.port, path }, (res) => {
      res.resume();
      res.on('end', () => resolve('ended'));
      res.on('error', () => resolve('reset'));
    });
    req.on('error', () => resolve('reset'));
    req.end();
  });
}

describe('startApiProxy', () => {
  it('a watch the server resets mid-stream is reset for the client too, not left open', async () => {
    server.faults.inject({ verb: 'watch', path: '^/api/v1/namespaces/reset/', reset: true, count: 1 });
    expect(await get('/api/v1/namespaces/reset/pods?watch=true')).toBe('reset');
  });

  it('a request the server resets before answering is reset for the client', async () => {
    server.faults.inject({ verb: 'list', path: '^/api/v1/namespaces/reset-list/', reset: true, count: 1 });
    expect(await get('/api/v1/namespaces/reset-list/pods')).toBe('reset');
  });

  it("records each DELETE's precondition UID and answer code", async () => {
    const pod = server.pods.create(
      sparkDriverPod({ namespace: 'del', phase: 'Succeeded', nowMs: Date.now() }),
    );
    const uid = pod.metadata?.uid ?? '';
    const path = `/api/v1/namespaces/del/pods/${pod.metadata?.name}`;
    const del = (body: string) =>
      fetch(new URL(path, base), { method: 'DELETE', headers: { 'Content-Type': 'application/json' }, body });
    expect((await del(JSON.stringify({ preconditions: { uid } }))).status).toBe(200);
    expect((await del('{}')).status).toBe(404);
    await waitFor('both DELETEs recorded', () => proxy.deletes().filter((d) => d.path === path).length === 2);
    expect(proxy.deletes().map((d) => [d.uid, d.code])).toEqual([
      [uid, 200],
      ['', 404],
    ]);
    expect(proxy.deletes().map((d) => d.abandoned)).toEqual([undefined, undefined]);
  });

  it('marks a DELETE its client gave up on before the answer came (a client timeout) as abandoned', async () => {
    const pod = server.pods.create(
      sparkDriverPod({ namespace: 'slow', phase: 'Succeeded', nowMs: Date.now() }),
    );
    const path = `/api/v1/namespaces/slow/pods/${pod.metadata?.name}`;
    server.faults.inject({ verb: 'delete', path: '^/api/v1/namespaces/slow/', latencyMs: 1500, count: 1 });
    const answer = fetch(new URL(path, base), {
      method: 'DELETE',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ preconditions: { uid: pod.metadata?.uid } }),
      signal: AbortSignal.timeout(200),
    });
    await expect(answer).rejects.toThrow();
    await waitFor('the abandoned DELETE recorded', () =>
      proxy.deletes().some((d) => d.path === path && d.abandoned === true),
    );
  });
});
