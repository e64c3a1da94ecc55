/**
 * The sandbox's HTTP surface with plain fetch: selectors, paging, patch flavours, the status
 * subresource, error Status bodies (400, 401, 404, 405, 415), fault injection and the control surface.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';
import { openRawWatch } from './raw-watch.ts';

let server: SandboxApiServer;
beforeAll(async () => {
  server = await startSandboxApiServer();
  const labels: Record<string, string>[] = [
    { app: 'a', role: 'driver', tier: 'gold' },
    { app: 'b', role: 'driver' },
    { app: 'c', role: 'executor', tier: 'silver' },
    { app: 'd' },
  ];
  labels.forEach((l, i) => {
    server.pods.create(
      pod('sel', `p${i}`, { labels: l, status: { phase: i % 2 ? 'Running' : 'Succeeded' } }),
    );
  });
  for (let i = 0; i < 7; i++) server.pods.create(pod('page', `p${String(i).padStart(2, '0')}`));
});
afterAll(async () => {
  await server.close();
});

async function names(query: string, ns = 'sel'): Promise<string[]> {
  const res = await fetch(`${server.url}/api/v1/namespaces/${ns}/pods?${query}`);
  expect(res.status).toBe(200);
  const list = (await res.json()) as { items: { metadata: { name: string } }[] };
  return list.items.map((p) => p.metadata.name);
}

describe('selectors', () => {
  const cases: [string, string, string[]][] = [
    ['equality =', 'labelSelector=role%3Ddriver', ['p0', 'p1']],
    ['equality ==', 'labelSelector=role%3D%3Ddriver', ['p0', 'p1']],
    ['inequality != (includes pods without the key)', 'labelSelector=role!%3Ddriver', ['p2', 'p3']],
    ['set in', `labelSelector=${encodeURIComponent('app in (a,c)')}`, ['p0', 'p2']],
    [
      'set notin (includes pods without the key)',
      `labelSelector=${encodeURIComponent('tier notin (gold)')}`,
      ['p1', 'p2', 'p3'],
    ],
    ['exists', 'labelSelector=tier', ['p0', 'p2']],
    ['does not exist', 'labelSelector=!tier', ['p1', 'p3']],
    ['conjunction', `labelSelector=${encodeURIComponent('role=driver,tier')}`, ['p0']],
    ['field status.phase', 'fieldSelector=status.phase%3DRunning', ['p1', 'p3']],
    ['field metadata.name !=', 'fieldSelector=metadata.name!%3Dp0', ['p1', 'p2', 'p3']],
    ['label and field', 'labelSelector=role%3Ddriver&fieldSelector=status.phase%3DSucceeded', ['p0']],
  ];
  for (const [label, query, expected] of cases) {
    it(`${label}: ${decodeURIComponent(query)} → ${expected.join(',')}`, async () => {
      expect(await names(query)).toEqual(expected);
    });
  }

  it('rejects an unsupported field with a 400 Status', async () => {
    const res = await fetch(`${server.url}/api/v1/namespaces/sel/pods?fieldSelector=spec.foo%3Dx`);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ kind: 'Status', reason: 'BadRequest', code: 400 });
  });
});

describe('paging', () => {
  it('pages with limit/continue, keeps the first page resourceVersion, and reports remainingItemCount', async () => {
    const seen: string[] = [];
    let cont = '';
    let pages = 0;
    let firstRv: string | undefined;
    do {
      const res = await fetch(
        `${server.url}/api/v1/namespaces/page/pods?limit=3${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`,
      );
      const list = (await res.json()) as {
        metadata: { continue?: string; resourceVersion: string; remainingItemCount?: number };
        items: { metadata: { name: string } }[];
      };
      if (pages === 0) {
        firstRv = list.metadata.resourceVersion;
        expect(list.metadata.remainingItemCount).toBe(4);
      }
      expect(list.metadata.resourceVersion).toBe(firstRv);
      seen.push(...list.items.map((p) => p.metadata.name));
      cont = list.metadata.continue ?? '';
      pages++;
    } while (cont);
    expect(pages).toBe(3);
    expect(seen).toEqual(['p00', 'p01', 'p02', 'p03', 'p04', 'p05', 'p06']);
  });

  it('lists across namespaces in namespace order', async () => {
    const res = await fetch(`${server.url}/api/v1/pods?labelSelector=app`);
    const list = (await res.json()) as {
      kind: string;
      items: { kind?: string; metadata: { namespace: string } }[];
    };
    expect(list.kind).toBe('PodList');
    expect(list.items).toHaveLength(4);
    // List items carry no TypeMeta, as kube-apiserver encodes them.
    expect(list.items[0]?.kind).toBeUndefined();
  });
});

describe('writes', () => {
  it('applies JSON patch, merge patch and strategic merge patch, and status only through /status', async () => {
    server.pods.create(pod('w', 'patchme', { labels: { a: '1' } }));
    const base = `${server.url}/api/v1/namespaces/w/pods/patchme`;
    const patch = (url: string, type: string, body: unknown) =>
      fetch(url, { method: 'PATCH', headers: { 'Content-Type': type }, body: JSON.stringify(body) });
    expect(
      (
        await patch(base, 'application/json-patch+json', [
          { op: 'add', path: '/metadata/labels/b', value: '2' },
        ])
      ).status,
    ).toBe(200);
    expect(
      (await patch(base, 'application/merge-patch+json', { metadata: { labels: { a: null } } })).status,
    ).toBe(200);
    expect(
      (await patch(base, 'application/strategic-merge-patch+json', { metadata: { finalizers: ['x/y'] } }))
        .status,
    ).toBe(200);
    // A status change through the main resource is ignored; through /status it applies.
    await patch(base, 'application/merge-patch+json', { status: { phase: 'Failed' } });
    expect(server.pods.get('w', 'patchme')?.status?.phase).toBe('Pending');
    await patch(`${base}/status`, 'application/merge-patch+json', { status: { phase: 'Failed' } });
    const p = server.pods.get('w', 'patchme');
    expect(p?.status?.phase).toBe('Failed');
    expect(p?.metadata?.labels).toEqual({ b: '2' });
    expect(p?.metadata?.finalizers).toEqual(['x/y']);
  });

  it('answers a stale resourceVersion on PUT with 409 Conflict', async () => {
    const created = server.pods.create(pod('w', 'put'));
    server.pods.patchStatus('w', 'put', { phase: 'Running' });
    const res = await fetch(`${server.url}/api/v1/namespaces/w/pods/put`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(created),
    });
    expect(res.status).toBe(409);
    expect(((await res.json()) as { message: string }).message).toContain('the object has been modified');
  });
});

describe('error answers', () => {
  const statusOf = async (res: Response) => ({
    http: res.status,
    body: (await res.json()) as { kind: string; reason: string; code: number },
  });

  it('400 for malformed JSON', async () => {
    const r = await statusOf(
      await fetch(`${server.url}/api/v1/namespaces/e/pods`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{"metadata":',
      }),
    );
    expect(r).toMatchObject({ http: 400, body: { kind: 'Status', reason: 'BadRequest', code: 400 } });
  });

  it('415 for a wrong content type', async () => {
    const r = await statusOf(
      await fetch(`${server.url}/api/v1/namespaces/e/pods`, {
        method: 'POST',
        headers: { 'Content-Type': 'text/plain' },
        body: '{}',
      }),
    );
    expect(r).toMatchObject({ http: 415, body: { reason: 'UnsupportedMediaType', code: 415 } });
  });

  it('404 for an unknown path', async () => {
    const r = await statusOf(await fetch(`${server.url}/api/v1/namespaces/e/configmaps`));
    expect(r).toMatchObject({ http: 404, body: { kind: 'Status', reason: 'NotFound', code: 404 } });
  });

  it('405 for a wrong verb', async () => {
    const r = await statusOf(await fetch(`${server.url}/api/v1/pods`, { method: 'POST', body: '{}' }));
    expect(r).toMatchObject({ http: 405, body: { reason: 'MethodNotAllowed', code: 405 } });
  });

  it('422 for a pod without containers', async () => {
    const r = await statusOf(
      await fetch(`${server.url}/api/v1/namespaces/e/pods`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ metadata: { name: 'x' }, spec: {} }),
      }),
    );
    expect(r).toMatchObject({ http: 422, body: { reason: 'Invalid' } });
  });
});

describe('auth', () => {
  it('401 without the bearer token, 200 with it', async () => {
    const secured = await startSandboxApiServer({ token: 's3cret' });
    try {
      const without = await fetch(`${secured.url}/api/v1/pods`);
      expect(without.status).toBe(401);
      expect(await without.json()).toMatchObject({ kind: 'Status', reason: 'Unauthorized', code: 401 });
      const withToken = await fetch(`${secured.url}/api/v1/pods`, {
        headers: { Authorization: 'Bearer s3cret' },
      });
      expect(withToken.status).toBe(200);
      expect(secured.requests.countsByVerb().list).toBe(2);
    } finally {
      await secured.close();
    }
  });
});

describe('faults', () => {
  it('429 with Retry-After for N requests of one verb, then normal service', async () => {
    server.pods.create(pod('f', 'victim'));
    const uid = server.pods.get('f', 'victim')?.metadata?.uid ?? '';
    server.faults.inject({ verb: 'delete', status: 429, retryAfterSeconds: 7, count: 2 });
    const url = `${server.url}/api/v1/namespaces/f/pods/victim`;
    const r1 = await fetch(url, { method: 'DELETE' });
    expect(r1.status).toBe(429);
    expect(r1.headers.get('retry-after')).toBe('7');
    expect(await r1.json()).toMatchObject({ reason: 'TooManyRequests', details: { retryAfterSeconds: 7 } });
    expect((await fetch(url, { method: 'DELETE' })).status).toBe(429);
    expect((await fetch(url, { method: 'DELETE' })).status).toBe(200);
    expect((await fetch(url, { method: 'DELETE' })).status).toBe(404);
    await waitFor(() => server.requests.deletesByUid().get(uid)?.length === 3, 'logged deletes');
    expect(server.requests.deletesByUid().get(uid)).toEqual([429, 429, 200]);
  });

  it('every DELETE is kept whole: precondition UID, the pod found at arrival and the pod it deleted', async () => {
    const first = server.pods.create(pod('fd', 'kept', { labels: { v: '1' } }));
    const uid = first.metadata?.uid ?? '';
    const url = `${server.url}/api/v1/namespaces/fd/pods/kept`;
    const del = (preconditionUid: string) =>
      fetch(url, {
        method: 'DELETE',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ preconditions: { uid: preconditionUid } }),
      });
    expect((await del('another-uid')).status).toBe(409);
    expect((await del(uid)).status).toBe(200);
    expect((await del(uid)).status).toBe(404);
    await waitFor(
      () => server.requests.deletes().filter((d) => d.path.endsWith('/fd/pods/kept')).length === 3,
      'logged',
    );
    const logged = server.requests.deletes().filter((d) => d.path.endsWith('/fd/pods/kept'));
    expect(
      logged.map((d) => [d.code, d.preconditionUid, d.found?.metadata?.uid, d.applied?.metadata?.uid]),
    ).toEqual([
      [409, 'another-uid', uid, undefined],
      [200, uid, uid, uid],
      [404, uid, undefined, undefined],
    ]);
    expect(logged[1]?.applied?.metadata?.labels).toEqual({ v: '1' });
    expect(logged.every((d) => d.atMs > 0)).toBe(true);
  });

  it('500 and 503 Status bodies, matched by path pattern', async () => {
    const id = server.faults.inject({ path: '/namespaces/f5/', status: 500 });
    const r = await fetch(`${server.url}/api/v1/namespaces/f5/pods`);
    expect(r.status).toBe(500);
    expect(await r.json()).toMatchObject({ reason: 'InternalError', code: 500 });
    expect((await fetch(`${server.url}/api/v1/namespaces/other/pods`)).status).toBe(200);
    server.faults.clear(id);
    server.faults.inject({ verb: 'get', status: 503, count: 1 });
    expect((await fetch(`${server.url}/api/v1/namespaces/f5/pods/x`)).status).toBe(503);
  });

  it('resets the connection', async () => {
    server.faults.inject({ verb: 'list', reset: true, count: 1 });
    await expect(fetch(`${server.url}/api/v1/namespaces/f/pods`)).rejects.toThrow();
    expect((await fetch(`${server.url}/api/v1/namespaces/f/pods`)).status).toBe(200);
  });

  it('expires a time-window fault when the sandbox clock passes it', async () => {
    server.faults.inject({ verb: 'list', path: '/namespaces/win/', status: 503, durationMs: 60_000 });
    expect((await fetch(`${server.url}/api/v1/namespaces/win/pods`)).status).toBe(503);
    server.clock.advance(60_000);
    expect((await fetch(`${server.url}/api/v1/namespaces/win/pods`)).status).toBe(200);
  });

  it('drops a watch mid-stream', async () => {
    server.faults.inject({ verb: 'watch', dropWatch: true, count: 1 });
    server.pods.create(pod('drop', 'p'));
    const w = await openRawWatch(`${server.url}/api/v1/namespaces/drop/pods?watch=true`);
    await waitFor(() => w.ended, 'dropped stream');
    expect(w.events.map((e) => e.type)).toEqual(['ADDED']);
  });

  it("stalls a namespace's watches (and all-namespaces ones): nothing sent, then everything held, in order", async () => {
    const rv = server.resourceVersion();
    const url = (ns?: string) =>
      `${server.url}/api/v1/${ns ? `namespaces/${ns}/` : ''}pods?watch=true&resourceVersion=${rv}`;
    const stalled = await openRawWatch(url('stall-a'));
    const other = await openRawWatch(url('stall-b'));
    const all = await openRawWatch(url());
    server.stallWatches(600_000, 'stall-a');
    server.pods.create(pod('stall-a', 'p'));
    server.pods.update({
      ...pod('stall-a', 'p'),
      metadata: { ...server.pods.get('stall-a', 'p')?.metadata },
    });
    server.pods.create(pod('stall-b', 'q'));
    await waitFor(() => other.events.length === 1, 'the other namespace served');
    // A request answered after the other stream's event: the stalled ones had every chance to send.
    expect((await fetch(`${server.url}/api/v1/namespaces/stall-a/pods`)).status).toBe(200);
    expect(stalled.events).toEqual([]);
    expect(all.events).toEqual([]);
    server.clock.advance(600_000);
    await waitFor(() => stalled.events.length === 2 && all.events.length === 3, 'held events delivered');
    expect(stalled.events.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual([
      'ADDED p',
      'MODIFIED p',
    ]);
    expect(all.events.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual([
      'ADDED p',
      'MODIFIED p',
      'ADDED q',
    ]);
    for (const w of [stalled, other, all]) await w.close();
  });

  it('a stalled stream that ends drops what it held; a watch resumed from its resourceVersion gets it', async () => {
    const rv = server.resourceVersion();
    const url = `${server.url}/api/v1/namespaces/stall-c/pods?watch=true&resourceVersion=${rv}`;
    const first = await openRawWatch(url);
    server.stallWatches(600_000, 'stall-c');
    server.pods.create(pod('stall-c', 'p'));
    server.dropWatches();
    await waitFor(() => first.ended, 'stream ended');
    expect(first.events).toEqual([]);
    server.clock.advance(600_000);
    const resumed = await openRawWatch(url);
    await waitFor(() => resumed.events.length === 1, 'replayed');
    expect(resumed.events[0]?.type).toBe('ADDED');
    await resumed.close();
  });
});

describe('control surface over HTTP', () => {
  it('injects faults, reads the request log, advances the clock and compacts', async () => {
    const ctl = `${server.url}/_sandbox`;
    const post = (path: string, body?: unknown) =>
      fetch(`${ctl}/${path}`, {
        method: 'POST',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    expect((await fetch(`${ctl}/requests`, { method: 'DELETE' })).status).toBe(204);
    const injected = await post('faults', { verb: 'get', status: 403, count: 1 });
    expect(injected.status).toBe(201);
    expect(((await injected.json()) as { id: string }).id).toMatch(/^fault-/);
    expect((await fetch(`${server.url}/api/v1/namespaces/c/pods/x`)).status).toBe(403);
    const bad = await post('faults', { verb: 'fly', status: 403 });
    expect(bad.status).toBe(400);
    const log = (await (await fetch(`${ctl}/requests`)).json()) as { countsByVerb: Record<string, number> };
    expect(log.countsByVerb).toEqual({ get: 1 });
    const before = server.clock.now();
    const adv = (await (await post('clock/advance', { ms: 5000 })).json()) as { nowMs: number };
    expect(adv.nowMs - before).toBeGreaterThanOrEqual(5000);
    // Answers carry the server's clock in `Date`, as kube-apiserver's do (the replicas read it to judge
    // deadlines, src/kube/server-clock.ts): the sandbox clock, advanced, floored to the second.
    const answer = await fetch(`${server.url}/api/v1/namespaces/c/pods`);
    const dateMs = Date.parse(answer.headers.get('date') ?? '');
    expect(dateMs).toBeGreaterThanOrEqual(Math.floor(adv.nowMs / 1000) * 1000);
    expect(dateMs).toBeLessThanOrEqual(server.clock.now());
    expect((await post('compact')).status).toBe(204);
    const state = (await (await fetch(`${ctl}/state`)).json()) as {
      resourceVersion: number;
      compactedResourceVersion: number;
    };
    expect(state.compactedResourceVersion).toBe(state.resourceVersion);
  });
});
