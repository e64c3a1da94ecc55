/**
 * Deletion semantics as kube-apiserver applies them, seen through raw watch streams: terminal and
 * unscheduled pods go at once (MODIFIED with deletionTimestamp, then DELETED), running pods wait for
 * their grace period (driven by the sandbox clock), finalizers hold pods, a second DELETE returns the
 * pod unchanged, executors are garbage-collected with their driver, and selectors turn a pod that
 * stops matching into a DELETED event for that watch.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';
import { openRawWatch } from './raw-watch.ts';

let server: SandboxApiServer;
beforeAll(async () => {
  // A long sweep interval: only clock.advance() ends grace periods, so the tests decide when.
  server = await startSandboxApiServer({ sweepIntervalMs: 3_600_000, bookmarkIntervalMs: 50 });
});
afterAll(async () => {
  await server.close();
});

const running = (ns: string, name: string, finalizers?: string[]) => {
  const p = pod(ns, name, {
    spec: { containers: [{ name: 'c' }], nodeName: 'node-1' },
    status: { phase: 'Running' },
  });
  if (finalizers && p.metadata) p.metadata.finalizers = finalizers;
  return p;
};

function names(events: { type: string; object: { metadata?: { name?: string } } }[]): string[] {
  return events.filter((e) => e.type !== 'BOOKMARK').map((e) => `${e.type} ${e.object.metadata?.name}`);
}

describe('deletion', () => {
  it('removes a terminal pod at once: MODIFIED with deletionTimestamp, then DELETED', async () => {
    const rv = server.resourceVersion();
    server.pods.create(
      pod('del1', 'done', {
        spec: { containers: [{ name: 'c' }], nodeName: 'n' },
        status: { phase: 'Succeeded' },
      }),
    );
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/del1/pods?watch=true&resourceVersion=${rv}`,
    );
    const res = await fetch(`${server.url}/api/v1/namespaces/del1/pods/done`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      kind: string;
      metadata: { deletionTimestamp?: string; deletionGracePeriodSeconds?: number };
    };
    expect(body.kind).toBe('Pod');
    expect(body.metadata.deletionGracePeriodSeconds).toBe(0);
    await waitFor(() => w.events.length >= 3, 'three events');
    expect(names(w.events)).toEqual(['ADDED done', 'MODIFIED done', 'DELETED done']);
    const rvs = w.events.map((e) => Number(e.object.metadata?.resourceVersion));
    expect(rvs).toEqual([...rvs].sort((a, b) => a - b));
    await w.close();
  });

  it('keeps a running pod for its grace period, then removes it when the clock passes it', async () => {
    server.pods.create(running('del2', 'busy'));
    const first = server.pods.delete('del2', 'busy', { gracePeriodSeconds: 20 });
    expect(first.removed).toBe(false);
    expect(first.pod.metadata?.deletionGracePeriodSeconds).toBe(20);
    // Deleting again while it is being deleted returns it unchanged.
    const again = await fetch(`${server.url}/api/v1/namespaces/del2/pods/busy`, { method: 'DELETE' });
    expect(again.status).toBe(200);
    const againBody = (await again.json()) as { metadata: { resourceVersion: string } };
    expect(againBody.metadata.resourceVersion).toBe(first.pod.metadata?.resourceVersion);
    server.clock.advance(19_000);
    expect(server.pods.get('del2', 'busy')).toBeDefined();
    server.clock.advance(1_000);
    expect(server.pods.get('del2', 'busy')).toBeUndefined();
  });

  it('shortens the grace period when a later DELETE asks for less', () => {
    server.pods.create(running('del2', 'shorten'));
    server.pods.delete('del2', 'shorten', { gracePeriodSeconds: 60 });
    const r = server.pods.delete('del2', 'shorten', { gracePeriodSeconds: 0 });
    expect(r.removed).toBe(true);
  });

  it('holds a pod with finalizers until an update empties them', async () => {
    server.pods.create(running('del3', 'held', ['example.com/audit']));
    server.pods.delete('del3', 'held', { gracePeriodSeconds: 5 });
    server.clock.advance(10_000);
    const held = server.pods.get('del3', 'held');
    expect(held?.metadata?.deletionTimestamp).toBeDefined();
    expect(held?.metadata?.deletionGracePeriodSeconds).toBe(0);
    const res = await fetch(`${server.url}/api/v1/namespaces/del3/pods/held`, {
      method: 'PATCH',
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { finalizers: null } }),
    });
    expect(res.status).toBe(200);
    expect(server.pods.get('del3', 'held')).toBeUndefined();
  });

  it('garbage-collects executors when their driver is removed', async () => {
    const driver = server.pods.create(
      pod('del4', 'driver', {
        spec: { containers: [{ name: 'c' }], nodeName: 'n' },
        status: { phase: 'Failed' },
      }),
    );
    const exec = pod('del4', 'exec-1', {
      spec: { containers: [{ name: 'c' }] },
      status: { phase: 'Succeeded' },
    });
    exec.metadata = {
      ...exec.metadata,
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Pod', name: 'driver', uid: driver.metadata?.uid ?? '', controller: true },
      ],
    };
    server.pods.create(exec);
    server.pods.create(pod('del4', 'unrelated'));
    server.pods.delete('del4', 'driver');
    await waitFor(() => server.pods.get('del4', 'exec-1') === undefined, 'executor collected');
    expect(server.pods.get('del4', 'unrelated')).toBeDefined();
  });

  it('answers a resourceVersion precondition mismatch with 409', async () => {
    server.pods.create(pod('del5', 'p'));
    const res = await fetch(`${server.url}/api/v1/namespaces/del5/pods/p`, {
      method: 'DELETE',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ preconditions: { resourceVersion: '1' } }),
    });
    expect(res.status).toBe(409);
    expect(((await res.json()) as { message: string }).message).toContain(
      'the ResourceVersion in the precondition (1)',
    );
  });
});

describe('watch', () => {
  it('turns a pod that stops matching the label selector into DELETED for that watch', async () => {
    server.pods.create(pod('w1', 'p', { labels: { role: 'driver' } }));
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/w1/pods?watch=true&labelSelector=role%3Ddriver`,
    );
    await waitFor(() => w.events.length >= 1, 'initial ADDED');
    const cur = server.pods.get('w1', 'p');
    if (!cur?.metadata) throw new Error('missing pod');
    server.pods.update({ ...cur, metadata: { ...cur.metadata, labels: { role: 'executor' } } });
    server.pods.update({
      ...(server.pods.get('w1', 'p') ?? {}),
      metadata: { ...cur.metadata, labels: { role: 'driver' }, resourceVersion: undefined },
    });
    await waitFor(() => w.events.length >= 3, 'transitions');
    expect(names(w.events)).toEqual(['ADDED p', 'DELETED p', 'ADDED p']);
    await w.close();
  });

  it('sends one ERROR event with a 410 Expired Status for a compacted resourceVersion, then ends', async () => {
    const old = server.resourceVersion();
    server.pods.create(pod('w2', 'p'));
    server.compact();
    const w = await openRawWatch(`${server.url}/api/v1/namespaces/w2/pods?watch=true&resourceVersion=${old}`);
    expect(w.status).toBe(200);
    await waitFor(() => w.ended, 'stream end');
    expect(w.events).toHaveLength(1);
    expect(w.events[0]).toMatchObject({
      type: 'ERROR',
      object: { kind: 'Status', code: 410, reason: 'Expired' },
    });
  });

  it('sends bookmarks with the current resourceVersion when allowed', async () => {
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/w3/pods?watch=true&allowWatchBookmarks=true`,
    );
    await waitFor(() => w.events.some((e) => e.type === 'BOOKMARK'), 'bookmark');
    const bm = w.events.find((e) => e.type === 'BOOKMARK');
    expect(Number(bm?.object.metadata?.resourceVersion)).toBe(server.resourceVersion());
    await w.close();
  });

  it('watches every namespace at /api/v1/pods: the selector applied, resumable from a resourceVersion, 410 once compacted', async () => {
    const from = server.resourceVersion();
    const w = await openRawWatch(
      `${server.url}/api/v1/pods?watch=true&labelSelector=role%3Ddriver&resourceVersion=${from}`,
    );
    server.pods.create(pod('cw-a', 'd1', { labels: { role: 'driver' } }));
    server.pods.create(pod('cw-b', 'd2', { labels: { role: 'driver' } }));
    server.pods.create(pod('cw-b', 'x1', { labels: { role: 'executor' } }));
    server.pods.delete('cw-a', 'd1');
    await waitFor(() => w.events.length >= 4, 'events of both namespaces');
    expect(
      w.events.map((e) => `${e.type} ${e.object.metadata?.namespace}/${e.object.metadata?.name}`),
    ).toEqual(['ADDED cw-a/d1', 'ADDED cw-b/d2', 'MODIFIED cw-a/d1', 'DELETED cw-a/d1']);
    await w.close();

    // Resumed from the first event's resourceVersion: the rest, across namespaces, in order.
    const rv = w.events[0]?.object.metadata?.resourceVersion;
    const resumed = await openRawWatch(
      `${server.url}/api/v1/pods?watch=true&labelSelector=role%3Ddriver&resourceVersion=${rv}`,
    );
    await waitFor(() => resumed.events.length >= 3, 'resumed events');
    expect(resumed.events.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual([
      'ADDED d2',
      'MODIFIED d1',
      'DELETED d1',
    ]);
    await resumed.close();

    server.compact();
    const expired = await openRawWatch(`${server.url}/api/v1/pods?watch=true&resourceVersion=${from}`);
    await waitFor(() => expired.ended, 'stream end');
    expect(expired.events).toEqual([
      expect.objectContaining({
        type: 'ERROR',
        object: expect.objectContaining({ code: 410, reason: 'Expired' }),
      }),
    ]);
  });

  it('ends the stream after timeoutSeconds', async () => {
    const w = await openRawWatch(`${server.url}/api/v1/namespaces/w4/pods?watch=true&timeoutSeconds=1`);
    await waitFor(() => w.ended, 'timeout end', 3000);
    expect(server.openWatches()).toBe(0);
  });
});
