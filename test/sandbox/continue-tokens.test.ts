/**
 * Paged lists as kube-apiserver serves them (etcd3/store.go GetList, storage/continue.go, etcd3/errors.go),
 * with plain fetch: the token's format, later pages read at the first page's resourceVersion, 410 Expired
 * with the inconsistent-continue token once that resourceVersion is compacted (POST /_sandbox/compact, the
 * periodic compaction, the event window overflowing), bad tokens, and the empty last page of a filtered list.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';

/** kube-apiserver's message, word for word (etcd3/errors.go `inconsistentContinue`). */
const INCONSISTENT_CONTINUE =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.';

interface PodList {
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: { metadata: { name: string; resourceVersion: string } }[];
}

let server: SandboxApiServer;
beforeAll(async () => {
  server = await startSandboxApiServer();
});
afterAll(async () => {
  await server.close();
});

/** Creates pods `p00`…`p<n-1>` in `ns`. */
function seed(ns: string, n: number, labels: Record<string, string> = {}): void {
  for (let i = 0; i < n; i++) server.pods.create(pod(ns, `p${String(i).padStart(2, '0')}`, { labels }));
}

async function page(
  path: string,
  query: Record<string, string>,
  srv = server,
): Promise<{ status: number; body: PodList & Record<string, unknown>; text: string }> {
  const res = await fetch(`${srv.url}${path}?${new URLSearchParams(query)}`);
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), text };
}

const decode = (token: string) => JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
const names = (l: PodList) => l.items.map((p) => p.metadata.name);

describe('the token', () => {
  it('is base64url without padding of {v, rv: the first page resourceVersion, start: the key after the page}', async () => {
    seed('fmt', 5);
    const first = await page('/api/v1/namespaces/fmt/pods', { limit: '2' });
    const token = first.body.metadata.continue ?? '';
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    // Namespaced list: the key relative to /registry/pods/fmt/; the NUL makes the next read start after it.
    expect(decode(token)).toEqual({
      v: 'meta.k8s.io/v1',
      rv: Number(first.body.metadata.resourceVersion),
      start: 'p01\u0000',
    });
    // Across namespaces the key keeps its namespace.
    const all = await page('/api/v1/pods', { limit: '1' });
    expect(decode(all.body.metadata.continue ?? '').start).toBe('fmt/p00\u0000');
  });

  const bad: [string, string, string][] = [
    [
      'standard base64 with padding',
      Buffer.from('{"v":"meta.k8s.io/v1","rv":5,"start":"a"}').toString('base64'),
      'continue key is not valid: illegal base64 data',
    ],
    ['not JSON', Buffer.from('nope').toString('base64url'), 'continue key is not valid: '],
    [
      'another version',
      Buffer.from('{"v":"meta.k8s.io/v2","rv":5,"start":"a"}').toString('base64url'),
      'server does not recognize this encoded version meta.k8s.io/v2',
    ],
    [
      'rv 0',
      Buffer.from('{"v":"meta.k8s.io/v1","rv":0,"start":"a"}').toString('base64url'),
      'incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
    ],
    [
      'an empty start',
      Buffer.from('{"v":"meta.k8s.io/v1","rv":5,"start":""}').toString('base64url'),
      'encoded start key empty (version meta.k8s.io/v1)',
    ],
    [
      'a start climbing out of the namespace',
      Buffer.from('{"v":"meta.k8s.io/v1","rv":5,"start":"../other/a"}').toString('base64url'),
      'continue key is not valid: ../other/a',
    ],
  ];
  for (const [label, token, message] of bad) {
    it(`${label} → 400 BadRequest "invalid continue token: …"`, async () => {
      const r = await page('/api/v1/namespaces/fmt/pods', { limit: '2', continue: token });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'BadRequest', code: 400 });
      expect(r.body.message).toMatch(/^invalid continue token: continue key is not valid/);
      expect(r.body.message).toContain(message);
    });
  }

  it('with a resourceVersion other than "0" → 400, as GetList refuses it', async () => {
    const first = await page('/api/v1/namespaces/fmt/pods', { limit: '2' });
    const cont = first.body.metadata.continue ?? '';
    const r = await page('/api/v1/namespaces/fmt/pods', { limit: '2', continue: cont, resourceVersion: '7' });
    expect(r.status).toBe(400);
    expect(r.body.message).toBe('specifying resource version is not allowed when using continue');
    expect(
      (await page('/api/v1/namespaces/fmt/pods', { limit: '2', continue: cont, resourceVersion: '0' }))
        .status,
    ).toBe(200);
  });
  it('from a resourceVersion the server has not reached (another etcd) → 500, as etcd refuses a future revision', async () => {
    const future = Buffer.from(
      JSON.stringify({ v: 'meta.k8s.io/v1', rv: server.resourceVersion() + 100, start: 'p01\u0000' }),
    ).toString('base64url');
    const r = await page('/api/v1/namespaces/fmt/pods', { limit: '2', continue: future });
    expect(r.status).toBe(500);
    expect(r.body.message).toContain('required revision is a future revision');
  });
});

describe('later pages', () => {
  it('are read at the first page resourceVersion: changes made meanwhile show only in the watch', async () => {
    seed('snap', 6);
    const first = await page('/api/v1/namespaces/snap/pods', { limit: '2' });
    const rv = first.body.metadata.resourceVersion;
    const before = server.pods.get('snap', 'p03')?.metadata?.resourceVersion;
    // After the first page: one pod of the rest deleted, one changed, one created.
    server.pods.delete('snap', 'p02');
    server.pods.patchStatus('snap', 'p03', { phase: 'Succeeded' });
    server.pods.create(pod('snap', 'p02a'));
    const rest = await page('/api/v1/namespaces/snap/pods', { continue: first.body.metadata.continue ?? '' });
    expect(rest.status).toBe(200);
    expect(rest.body.metadata.resourceVersion).toBe(rv);
    expect(names(rest.body)).toEqual(['p02', 'p03', 'p04', 'p05']);
    expect(rest.body.items[1]?.metadata.resourceVersion).toBe(before);
    expect(rest.body.metadata.continue).toBeUndefined();
    // A new list sees the present.
    expect(names((await page('/api/v1/namespaces/snap/pods', {})).body)).toEqual([
      'p00',
      'p01',
      'p02a',
      'p03',
      'p04',
      'p05',
    ]);
  });

  it('of a filtered list end with an empty page when only non-matching pods follow (etcd reads keys, then filters)', async () => {
    seed('tail', 4, { 'spark-role': 'driver' });
    server.pods.create(pod('tail', 'p99-exec-1', { labels: { 'spark-role': 'executor' } }));
    const first = await page('/api/v1/namespaces/tail/pods', {
      limit: '4',
      labelSelector: 'spark-role=driver',
    });
    expect(names(first.body)).toHaveLength(4);
    expect(first.body.metadata.continue).toBeTruthy();
    expect(first.body.metadata.remainingItemCount).toBeUndefined();
    const last = await page('/api/v1/namespaces/tail/pods', {
      limit: '4',
      labelSelector: 'spark-role=driver',
      continue: first.body.metadata.continue ?? '',
    });
    expect(last.body.items).toEqual([]);
    expect(last.body.metadata.continue).toBeUndefined();
  });
});

describe('410 Expired', () => {
  it('after POST /_sandbox/compact: the exact Status, with a token that reads the rest at the latest resourceVersion', async () => {
    seed('gone', 5);
    const first = await page('/api/v1/namespaces/gone/pods', { limit: '2' });
    const cont = first.body.metadata.continue ?? '';
    server.pods.delete('gone', 'p03');
    server.pods.create(pod('gone', 'p02a'));
    expect((await fetch(`${server.url}/_sandbox/compact`, { method: 'POST' })).status).toBe(204);

    const r = await page('/api/v1/namespaces/gone/pods', { limit: '2', continue: cont });
    expect(r.status).toBe(410);
    const inconsistent = (r.body.metadata as { continue: string }).continue;
    expect(decode(inconsistent)).toEqual({ v: 'meta.k8s.io/v1', rv: -1, start: 'p01\u0000' });
    // Key order as kube-apiserver marshals metav1.Status.
    expect(r.text).toBe(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: { continue: inconsistent },
        status: 'Failure',
        message: INCONSISTENT_CONTINUE,
        reason: 'Expired',
        code: 410,
      }),
    );

    // The inconsistent continuation: the present state of the rest, with a fresh token.
    const rest = await page('/api/v1/namespaces/gone/pods', { limit: '2', continue: inconsistent });
    expect(rest.status).toBe(200);
    expect(names(rest.body)).toEqual(['p02', 'p02a']);
    expect(rest.body.metadata.resourceVersion).toBe(String(server.resourceVersion()));
    expect(decode(rest.body.metadata.continue ?? '').rv).toBe(server.resourceVersion());
    const end = await page('/api/v1/namespaces/gone/pods', {
      limit: '2',
      continue: rest.body.metadata.continue ?? '',
    });
    expect(names(end.body)).toEqual(['p04']);
  });

  it('after its own compaction interval, even with no pod changing (the compactor takes a revision itself)', async () => {
    const compacting = await startSandboxApiServer({ compactionIntervalMs: 20 });
    try {
      for (let i = 0; i < 3; i++) compacting.pods.create(pod('c', `p${i}`));
      const first = await page('/api/v1/namespaces/c/pods', { limit: '1' }, compacting);
      const rv = Number(first.body.metadata.resourceVersion);
      await waitFor(async () => {
        const state = (await (await fetch(`${compacting.url}/_sandbox/state`)).json()) as {
          compactedResourceVersion: number;
        };
        return state.compactedResourceVersion > rv;
      }, 'a compaction past the first page');
      const r = await page(
        '/api/v1/namespaces/c/pods',
        { limit: '1', continue: first.body.metadata.continue ?? '' },
        compacting,
      );
      expect(r.status).toBe(410);
      expect(r.body).toMatchObject({ reason: 'Expired', message: INCONSISTENT_CONTINUE });
    } finally {
      await compacting.close();
    }
  });

  it('a compaction interval that is not a number of ms ≥ 0 is refused before anything listens', async () => {
    await expect(startSandboxApiServer({ compactionIntervalMs: -1 })).rejects.toThrow(
      'compactionIntervalMs must be a number of ms ≥ 0 (0: off), got -1',
    );
  });

  it('once the event window has moved past the token resourceVersion', async () => {
    const small = await startSandboxApiServer({ watchWindow: 3 });
    try {
      for (let i = 0; i < 3; i++) small.pods.create(pod('w', `p${i}`));
      const first = await page('/api/v1/namespaces/w/pods', { limit: '1' }, small);
      const cont = first.body.metadata.continue ?? '';
      for (let i = 0; i < 3; i++) small.pods.create(pod('w', `q${i}`));
      // The window still holds every event after the token's resourceVersion: the page is served.
      expect((await page('/api/v1/namespaces/w/pods', { limit: '1', continue: cont }, small)).status).toBe(
        200,
      );
      small.pods.create(pod('w', 'q3'));
      const r = await page('/api/v1/namespaces/w/pods', { limit: '1', continue: cont }, small);
      expect(r.status).toBe(410);
      expect(r.body).toMatchObject({ reason: 'Expired', message: INCONSISTENT_CONTINUE });
    } finally {
      await small.close();
    }
  });
});
