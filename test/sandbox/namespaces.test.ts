/**
 * The sandbox's namespaces (harness/sandbox/apiserver/namespaces.ts) as kube-apiserver serves them: read by
 * the unmodified @kubernetes/client-node (V1Namespace, V1NamespaceList, its informer and Watch): label selector
 * transitions on a watch, pages, bookmarks, 410 after a compaction, and the control surface's writes.
 */
import { CoreV1Api, KubeConfig, makeInformer, type V1Namespace } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { waitFor } from './helpers.ts';

let server: SandboxApiServer;
let api: CoreV1Api;
let kc: KubeConfig;

beforeAll(async () => {
  server = await startSandboxApiServer({ tls: true, token: 't0ken', bookmarkIntervalMs: 200 });
  kc = new KubeConfig();
  kc.loadFromFile(server.kubeconfigPath);
  api = kc.makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await server.close();
});

describe('namespaces', () => {
  it('client-node lists with a label selector and reads one; a missing one is 404', async () => {
    server.namespaces.create('cn-a', { team: 'spark' });
    server.namespaces.create('cn-b', { team: 'other' });
    const list = await api.listNamespace({ labelSelector: 'team=spark' });
    expect(list.items.map((n) => n.metadata?.name)).toEqual(['cn-a']);
    expect(list.items[0]?.status?.phase).toBe('Active');
    expect(list.items[0]?.metadata?.labels).toEqual({ team: 'spark', 'kubernetes.io/metadata.name': 'cn-a' });
    expect(Number(list.metadata?.resourceVersion)).toBe(server.resourceVersion());
    const one = await api.readNamespace({ name: 'cn-b' });
    expect(one.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    await expect(api.readNamespace({ name: 'nope' })).rejects.toMatchObject({ code: 404 });
  });

  it("client-node's informer sees a labelled namespace added, and an unlabelled one deleted", async () => {
    const events: string[] = [];
    const informer = makeInformer(
      kc,
      '/api/v1/namespaces',
      () => api.listNamespace({ labelSelector: 'inf=yes' }),
      'inf=yes',
    );
    informer.on('add', (n: V1Namespace) => events.push(`add ${n.metadata?.name}`));
    informer.on('update', (n: V1Namespace) => events.push(`update ${n.metadata?.name}`));
    informer.on('delete', (n: V1Namespace) => events.push(`delete ${n.metadata?.name}`));
    await informer.start();
    server.namespaces.create('inf-1', { inf: 'yes' });
    server.namespaces.create('inf-2', { inf: 'no' });
    server.namespaces.setLabels('inf-2', { inf: 'yes' });
    server.namespaces.setLabels('inf-1', {});
    await waitFor(() => events.length >= 3, 'three informer events');
    await informer.stop();
    expect(events).toEqual(['add inf-1', 'add inf-2', 'delete inf-1']);
  });

  it('a watch sends selector transitions, the delete (Terminating, then DELETED), and bookmarks', async () => {
    const rv = server.resourceVersion();
    const seen: string[] = [];
    const { Watch } = await import('@kubernetes/client-node');
    const watch = new Watch(kc);
    let bookmarks = 0;
    const req = await watch.watch(
      '/api/v1/namespaces',
      { labelSelector: 'w=1', resourceVersion: String(rv), allowWatchBookmarks: true },
      (type: string, obj: V1Namespace) => {
        if (type === 'BOOKMARK') bookmarks += 1;
        else seen.push(`${type} ${obj.metadata?.name} ${obj.status?.phase}`);
      },
      () => undefined,
    );
    server.namespaces.create('w-a', { w: '1' });
    server.namespaces.create('w-b', {});
    server.namespaces.setLabels('w-b', { w: '1' });
    server.namespaces.setLabels('w-a', { w: '1', more: 'x' });
    server.namespaces.setLabels('w-a', {});
    server.namespaces.delete('w-b');
    await waitFor(() => seen.length >= 6 && bookmarks > 0, 'six events and a bookmark');
    req.abort();
    expect(seen).toEqual([
      'ADDED w-a Active',
      'ADDED w-b Active',
      'MODIFIED w-a Active',
      'DELETED w-a Active',
      'MODIFIED w-b Terminating',
      'DELETED w-b Terminating',
    ]);
    expect(server.namespaces.get('w-b')).toBeUndefined();
  });

  it('lists in pages read at the first page’s resourceVersion; a compacted token or watch is 410', async () => {
    for (const n of ['pg-1', 'pg-2', 'pg-3']) server.namespaces.create(n, { pg: 'y' });
    const first = await api.listNamespace({ labelSelector: 'pg=y', limit: 2 });
    expect(first.items.map((n) => n.metadata?.name)).toEqual(['pg-1', 'pg-2']);
    expect(first.metadata?._continue).toBeTruthy();
    expect(first.metadata?.remainingItemCount).toBe(1);
    server.namespaces.create('pg-4', { pg: 'y' }); // after the snapshot: not in the next page
    server.namespaces.delete('pg-3'); // after the snapshot: still in the next page
    const second = await api.listNamespace({
      labelSelector: 'pg=y',
      limit: 2,
      _continue: first.metadata?._continue,
    });
    expect(second.items.map((n) => n.metadata?.name)).toEqual(['pg-3']);
    expect(second.metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);
    expect(second.metadata?._continue).toBeFalsy();

    const rv = server.resourceVersion();
    server.namespaces.create('pg-5');
    server.compact();
    await expect(
      api.listNamespace({ labelSelector: 'pg=y', limit: 2, _continue: first.metadata?._continue }),
    ).rejects.toMatchObject({ code: 410 });
    const errors: string[] = [];
    const { Watch } = await import('@kubernetes/client-node');
    const req = await new Watch(kc).watch(
      '/api/v1/namespaces',
      { resourceVersion: String(rv - 1) },
      (type: string, obj: { code?: number }) => errors.push(`${type} ${obj.code}`),
      () => undefined,
    );
    await waitFor(() => errors.length > 0, 'the ERROR event');
    req.abort();
    expect(errors).toEqual(['ERROR 410']);
  });

  it('the control surface creates, labels and deletes namespaces', async () => {
    const base = `${server.url}/_sandbox/namespaces`;
    const post = async (init: RequestInit, url = base) => {
      const { request } = await import('undici');
      const { Agent } = await import('undici');
      const res = await request(url, {
        method: init.method as 'POST',
        body: init.body as string,
        dispatcher: new Agent({ connect: { ca: server.caCertPem } }),
      });
      return { status: res.statusCode, body: (await res.body.json()) as V1Namespace };
    };
    const created = await post({ method: 'POST', body: JSON.stringify({ name: 'ctl', labels: { a: 'b' } }) });
    expect(created.status).toBe(201);
    expect(created.body.metadata?.labels?.a).toBe('b');
    const labelled = await post(
      { method: 'PUT', body: JSON.stringify({ labels: { a: 'c' } }) },
      `${base}/ctl/labels`,
    );
    expect(labelled.body.metadata?.labels?.a).toBe('c');
    const dup = await post({ method: 'POST', body: JSON.stringify({ name: 'ctl' }) });
    expect(dup.status).toBe(409);
    const deleted = await post({ method: 'DELETE' }, `${base}/ctl`);
    expect(deleted.status).toBe(200);
    expect(server.namespaces.get('ctl')).toBeUndefined();
  });
});
