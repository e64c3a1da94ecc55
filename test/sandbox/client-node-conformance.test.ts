/**
 * The unmodified @kubernetes/client-node against the sandbox: informer add/update/delete, relist
 * after 410, the informer's 'error' on 403; CoreV1Api create/get/list/delete with preconditions, and
 * 404/409 bodies that parse as Status. Runs over HTTPS with a bearer token, as a real cluster would.
 */
import { type ApiException, CoreV1Api, KubeConfig, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';

let server: SandboxApiServer;
let api: CoreV1Api;
let kc: KubeConfig;

beforeAll(async () => {
  server = await startSandboxApiServer({ tls: true, token: 't0ken', contextName: 'conformance' });
  kc = new KubeConfig();
  kc.loadFromFile(server.kubeconfigPath);
  api = kc.makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await server.close();
});

function statusOf(err: unknown): { code: number; status: Record<string, unknown> } {
  const e = err as ApiException<string>;
  return { code: e.code, status: JSON.parse(e.body) as Record<string, unknown> };
}

function startInformer(ns: string, labelSelector?: string) {
  const events: string[] = [];
  const errors: unknown[] = [];
  const informer = makeInformer(
    kc,
    `/api/v1/namespaces/${ns}/pods`,
    () => api.listNamespacedPod({ namespace: ns, labelSelector }),
    labelSelector,
  );
  informer.on('add', (p: V1Pod) => events.push(`add ${p.metadata?.name}`));
  informer.on('update', (p: V1Pod) => events.push(`update ${p.metadata?.name} ${p.status?.phase}`));
  informer.on('delete', (p: V1Pod) => events.push(`delete ${p.metadata?.name}`));
  informer.on('error', (e: unknown) => errors.push(e));
  return { informer, events, errors };
}

describe('CoreV1Api', () => {
  it('creates, gets, lists and deletes with a matching uid precondition', async () => {
    const created = await api.createNamespacedPod({ namespace: 'api', body: pod('api', 'one') });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.status?.phase).toBe('Pending');
    expect(created.spec?.terminationGracePeriodSeconds).toBe(30);
    const got = await api.readNamespacedPod({ namespace: 'api', name: 'one' });
    expect(got.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);
    const list = await api.listNamespacedPod({ namespace: 'api' });
    expect(list.items.map((p) => p.metadata?.name)).toEqual(['one']);
    expect(Number(list.metadata?.resourceVersion)).toBeGreaterThanOrEqual(
      Number(created.metadata?.resourceVersion),
    );
    // Unscheduled (no nodeName): removed at once, and the answer is the pod with deletionTimestamp.
    const deleted = await api.deleteNamespacedPod({
      namespace: 'api',
      name: 'one',
      body: { preconditions: { uid: created.metadata?.uid } },
    });
    expect(deleted.metadata?.deletionTimestamp).toBeDefined();
    expect(server.pods.get('api', 'one')).toBeUndefined();
    expect(server.requests.deletesByUid().get(created.metadata?.uid ?? '')).toEqual([200]);
  });

  it('answers a uid precondition mismatch with a 409 Conflict Status', async () => {
    const created = await api.createNamespacedPod({ namespace: 'api', body: pod('api', 'two') });
    const err = await api
      .deleteNamespacedPod({ namespace: 'api', name: 'two', body: { preconditions: { uid: 'other-uid' } } })
      .catch((e: unknown) => e);
    const { code, status } = statusOf(err);
    expect(code).toBe(409);
    expect(status).toMatchObject({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'Conflict',
      code: 409,
    });
    expect(status.message).toContain(
      'the UID in the precondition (other-uid) does not match the UID in record',
    );
    expect(server.pods.get('api', 'two')?.metadata?.uid).toBe(created.metadata?.uid);
    expect(server.requests.deletesByUid().get(created.metadata?.uid ?? '')).toEqual([409]);
  });

  it('answers an absent pod with the exact 404 NotFound Status', async () => {
    const err = await api.readNamespacedPod({ namespace: 'api', name: 'absent' }).catch((e: unknown) => e);
    expect((err as ApiException<string>).code).toBe(404);
    expect((err as ApiException<string>).body).toBe(
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"absent\\" not found","reason":"NotFound","details":{"name":"absent","kind":"pods"},"code":404}',
    );
    const del = await api.deleteNamespacedPod({ namespace: 'api', name: 'absent' }).catch((e: unknown) => e);
    expect(statusOf(del).status.reason).toBe('NotFound');
  });

  it('answers a duplicate create with 409 AlreadyExists', async () => {
    await api.createNamespacedPod({ namespace: 'api', body: pod('api', 'dup') });
    const err = await api
      .createNamespacedPod({ namespace: 'api', body: pod('api', 'dup') })
      .catch((e: unknown) => e);
    expect(statusOf(err)).toMatchObject({ code: 409, status: { reason: 'AlreadyExists' } });
  });

  it('pages with limit/_continue; a compacted token is a 410 Expired ApiException whose Status carries the inconsistent token', async () => {
    for (const n of ['a', 'b', 'c', 'd'])
      await api.createNamespacedPod({ namespace: 'pages', body: pod('pages', n) });
    const first = await api.listNamespacedPod({ namespace: 'pages', limit: 2 });
    expect(first.items.map((p) => p.metadata?.name)).toEqual(['a', 'b']);
    expect(first.metadata?.remainingItemCount).toBe(2);
    const cont = first.metadata?._continue ?? '';
    // Read at the first page's resourceVersion: a pod created meanwhile is not on the next page.
    await api.createNamespacedPod({ namespace: 'pages', body: pod('pages', 'bb') });
    const second = await api.listNamespacedPod({ namespace: 'pages', limit: 2, _continue: cont });
    expect(second.items.map((p) => p.metadata?.name)).toEqual(['c', 'd']);
    expect(second.metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);

    server.compact();
    const err = await api
      .listNamespacedPod({ namespace: 'pages', limit: 2, _continue: cont })
      .catch((e) => e);
    const { code, status } = statusOf(err);
    expect(code).toBe(410);
    expect(status).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Expired', code: 410 });
    expect(status.message).toMatch(
      /^The provided continue parameter is too old to display a consistent list/,
    );
    const inconsistent = (status.metadata as { continue?: string }).continue ?? '';
    const rest = await api.listNamespacedPod({ namespace: 'pages', limit: 2, _continue: inconsistent });
    expect(rest.items.map((p) => p.metadata?.name)).toEqual(['bb', 'c']);
  });

  it('rejects a request without the bearer token with 401', async () => {
    const anon = new KubeConfig();
    anon.loadFromString(server.kubeconfigYaml.replace(/token: .*/, 'token: wrong'));
    const err = await anon
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace: 'api' })
      .catch((e: unknown) => e);
    expect((err as ApiException<unknown>).code).toBe(401);
  });
});

describe('informer', () => {
  it('sees add, update and delete', async () => {
    const { informer, events } = startInformer('inf1', 'spark-role=driver');
    server.pods.create(pod('inf1', 'before', { labels: { 'spark-role': 'driver' } }));
    await informer.start();
    await waitFor(() => events.includes('add before'), 'initial list');
    server.pods.create(pod('inf1', 'later', { labels: { 'spark-role': 'driver' } }));
    server.pods.create(pod('inf1', 'executor', { labels: { 'spark-role': 'executor' } }));
    await waitFor(() => events.includes('add later'), 'ADDED');
    server.pods.patchStatus('inf1', 'later', { phase: 'Running' });
    await waitFor(() => events.includes('update later Running'), 'MODIFIED');
    await api.deleteNamespacedPod({ namespace: 'inf1', name: 'later' });
    await waitFor(() => events.includes('delete later'), 'DELETED');
    expect(events).not.toContain('add executor');
    await informer.stop();
  });

  it('relists after a 410 Expired on re-watch and catches up', async () => {
    const { informer, events, errors } = startInformer('inf2');
    server.pods.create(pod('inf2', 'a'));
    await informer.start();
    await waitFor(() => events.includes('add a'), 'initial list');
    const listsBefore = server.requests.countsByVerb().list ?? 0;
    const watchesBefore = server.requests.countsByVerb().watch ?? 0;
    // Hold the next watch request, change the state and compact meanwhile: it resumes from an old RV.
    server.faults.inject({ verb: 'watch', path: '/namespaces/inf2/', latencyMs: 300, count: 1 });
    server.dropWatches();
    await waitFor(() => (server.requests.countsByVerb().watch ?? 0) > watchesBefore, 're-watch arrival');
    server.pods.create(pod('inf2', 'b'));
    server.pods.delete('inf2', 'a');
    server.compact();
    await waitFor(() => events.includes('add b') && events.includes('delete a'), 'relist after 410');
    expect(server.requests.countsByVerb().list).toBeGreaterThan(listsBefore);
    expect(errors).toEqual([]);
    await informer.stop();
  });

  it("emits 'error' when list is forbidden (403)", async () => {
    const { informer, errors } = startInformer('inf3');
    const id = server.faults.inject({ verb: 'list', path: '/namespaces/inf3/', status: 403 });
    await informer.start();
    await waitFor(() => errors.length > 0, 'informer error');
    const err = errors[0] as ApiException<string>;
    expect(err.code).toBe(403);
    expect(JSON.parse(err.body)).toMatchObject({ reason: 'Forbidden', code: 403 });
    server.faults.clear(id);
    await informer.stop();
  });

  it("emits 'error' when a re-watch is forbidden (403)", async () => {
    const { informer, events, errors } = startInformer('inf4');
    await informer.start();
    await waitFor(() => server.openWatches() > 0 && errors.length === 0, 'watch open');
    server.pods.create(pod('inf4', 'x'));
    await waitFor(() => events.includes('add x'), 'ADDED');
    server.faults.inject({ verb: 'watch', path: '/namespaces/inf4/', status: 403, count: 1 });
    server.dropWatches();
    await waitFor(() => errors.length > 0, 'informer error');
    expect((errors[0] as { statusCode?: number }).statusCode).toBe(403);
    await informer.stop();
  });
});
