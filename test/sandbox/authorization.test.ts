/**
 * The sandbox's authorization (harness/sandbox/apiserver/authorization.ts) as kube-apiserver's RBAC answers:
 * a permission table per token, `SelfSubjectAccessReview` answered from it (also to `kubectl auth can-i`), 403
 * Forbidden worded as kube words it for every verb the table does not allow, 401 for a token it does not know;
 * without a table, everything allowed as before. Also the namespace writes kubectl sends (`create namespace`,
 * `label namespace`, `delete namespace`) and the kubelet stand-in that runs pods created through the API.
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { PermissionTable } from '../../harness/sandbox/apiserver/authorization.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { startKubelet } from '../../harness/sandbox/kubelet.ts';
import { pod, waitFor } from './helpers.ts';

const run = promisify(execFile);
const kubectlMissing = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status !== 0;
if (kubectlMissing) console.warn('kubectl not found (Debian kubernetes-client): its cases are skipped');

const CLEANER = 'system:serviceaccount:spark-driver-cleaner:spark-driver-cleaner';
const TABLE: PermissionTable = {
  'cleaner-token': {
    name: CLEANER,
    rules: [
      { verbs: ['get', 'list', 'watch', 'delete'], resources: ['pods'], namespaces: ['team-a'] },
      { verbs: ['list', 'watch'], resources: ['namespaces'] },
    ],
  },
  'reader-token': {
    name: 'reader',
    rules: [{ verbs: ['get', 'list', 'watch'], resources: ['pods'], namespaces: ['team-a'] }],
  },
  'admin-token': { name: 'admin', rules: [{ verbs: ['*'], resources: ['*'] }] },
};

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function call(
  server: SandboxApiServer,
  token: string,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': contentType }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  // A watch answers 200 and streams: only the status matters then.
  return { status: res.status, body: text.startsWith('{') && !text.includes('\n{') ? JSON.parse(text) : {} };
}

const review = (server: SandboxApiServer, token: string, attrs: Record<string, string>) =>
  call(server, token, 'POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: { resourceAttributes: attrs },
  });

describe('with a permission table', () => {
  let server: SandboxApiServer;
  beforeAll(async () => {
    server = await startSandboxApiServer({ permissions: TABLE, token: 'cleaner-token', contextName: 'rbac' });
    server.namespaces.create('team-a');
    server.pods.create(pod('team-a', 'driver-1'));
    server.pods.create(pod('team-b', 'driver-2'));
  });
  afterAll(async () => {
    await server.close();
  });

  it('SelfSubjectAccessReview answers 201 from the token’s rules, per verb and namespace', async () => {
    const allowed = async (token: string, verb: string, resource: string, namespace = '') =>
      (
        (await review(server, token, { verb, resource, namespace, group: '' })).body.status as {
          allowed: boolean;
        }
      ).allowed;
    const created = await review(server, 'cleaner-token', {
      verb: 'delete',
      resource: 'pods',
      namespace: 'team-a',
    });
    expect(created).toMatchObject({
      status: 201,
      body: {
        kind: 'SelfSubjectAccessReview',
        apiVersion: 'authorization.k8s.io/v1',
        status: { allowed: true },
      },
    });
    expect(
      await Promise.all([
        allowed('cleaner-token', 'get', 'pods', 'team-a'),
        allowed('cleaner-token', 'watch', 'pods', 'team-a'),
        allowed('cleaner-token', 'delete', 'pods', 'team-b'),
        allowed('cleaner-token', 'create', 'pods', 'team-a'),
        allowed('cleaner-token', 'list', 'namespaces'),
        allowed('reader-token', 'delete', 'pods', 'team-a'),
        allowed('reader-token', 'list', 'pods', 'team-a'),
        allowed('admin-token', 'create', 'pods', 'team-b'),
      ]),
    ).toEqual([true, true, false, false, true, false, true, true]);
    expect(
      await review(server, 'cleaner-token', {
        verb: 'get',
        resource: 'deployments',
        group: 'apps',
        namespace: 'team-a',
      }),
    ).toMatchObject({ body: { status: { allowed: false } } });
  });

  it('every verb the table does not allow is 403 Forbidden, worded as kube words it', async () => {
    const ns = '/api/v1/namespaces/team-a/pods';
    const refused: [string, string, string, unknown?, string?][] = [
      ['reader-token', 'DELETE', `${ns}/driver-1`],
      ['reader-token', 'POST', ns, pod('team-a', 'new-1')],
      ['reader-token', 'PUT', `${ns}/driver-1`, pod('team-a', 'driver-1')],
      [
        'reader-token',
        'PATCH',
        `${ns}/driver-1`,
        { metadata: { labels: { a: 'b' } } },
        'application/merge-patch+json',
      ],
      ['cleaner-token', 'GET', '/api/v1/namespaces/team-b/pods/driver-2'],
      ['cleaner-token', 'GET', '/api/v1/pods'],
      ['cleaner-token', 'GET', '/api/v1/namespaces/team-b/pods?watch=1'],
      ['cleaner-token', 'POST', '/api/v1/namespaces', { metadata: { name: 'x' } }],
    ];
    const answers = await Promise.all(refused.map(([t, m, p, b, ct]) => call(server, t, m, p, b, ct)));
    expect(answers.map((a) => a.status)).toEqual(refused.map(() => 403));
    expect(answers[0]?.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'pods "driver-1" is forbidden: User "reader" cannot delete resource "pods" in API group "" in the namespace "team-a"',
      reason: 'Forbidden',
      details: { name: 'driver-1', kind: 'pods' },
      code: 403,
    });
    expect(answers[5]?.body.message).toBe(
      `pods is forbidden: User "${CLEANER}" cannot list resource "pods" in API group "" at the cluster scope`,
    );
    expect(answers[6]?.body.message).toBe(
      `pods is forbidden: User "${CLEANER}" cannot watch resource "pods" in API group "" in the namespace "team-b"`,
    );
    // Nothing refused was applied.
    expect(server.pods.get('team-a', 'driver-1')?.metadata?.labels).toEqual({});
    expect(server.pods.get('team-a', 'new-1')).toBeUndefined();
    expect(server.namespaces.get('x')).toBeUndefined();
  });

  it('what the table allows is served; an unknown token is 401', async () => {
    expect((await call(server, 'cleaner-token', 'GET', '/api/v1/namespaces/team-a/pods')).status).toBe(200);
    expect((await call(server, 'cleaner-token', 'GET', '/api/v1/namespaces')).status).toBe(200);
    expect(
      (await call(server, 'reader-token', 'GET', '/api/v1/namespaces/team-a/pods/driver-1')).status,
    ).toBe(200);
    expect((await call(server, 'nobody', 'GET', '/api/v1/namespaces/team-a/pods')).status).toBe(401);
    expect((await review(server, 'nobody', { verb: 'get', resource: 'pods' })).status).toBe(401);
    expect((await call(server, 'reader-token', 'GET', '/version')).status).toBe(200);
  });

  it.skipIf(kubectlMissing)('kubectl auth can-i asks the review: yes (exit 0) and no (exit 1)', async () => {
    // kubectl sends a bearer token over TLS only.
    const tls = await startSandboxApiServer({ tls: true, permissions: TABLE, contextName: 'rbac-tls' });
    onTestFinished(() => tls.close());
    const can = async (token: string, ...args: string[]) => {
      const kubeconfig = tls.kubeconfigFor(token);
      try {
        const { stdout } = await run('kubectl', ['--kubeconfig', kubeconfig, 'auth', 'can-i', ...args], {
          timeout: 20_000,
        });
        return { code: 0, out: stdout.trim() };
      } catch (err) {
        const e = err as { code?: number; stdout?: string };
        return { code: e.code, out: String(e.stdout ?? '').trim() };
      }
    };
    expect(await can('cleaner-token', 'delete', 'pods', '-n', 'team-a')).toEqual({ code: 0, out: 'yes' });
    expect(await can('cleaner-token', 'delete', 'pods', '-n', 'team-b')).toEqual({ code: 1, out: 'no' });
    expect(await can('reader-token', 'delete', 'pods', '-n', 'team-a')).toEqual({ code: 1, out: 'no' });
    expect(await can('cleaner-token', 'watch', 'namespaces')).toEqual({ code: 0, out: 'yes' });
  });
});

describe('without a permission table (as before)', () => {
  let server: SandboxApiServer;
  beforeAll(async () => {
    server = await startSandboxApiServer({ token: 'only-token', contextName: 'open' });
  });
  afterAll(async () => {
    await server.close();
  });

  it('every review is allowed, every verb served; a wrong token is still 401', async () => {
    expect(
      await review(server, 'only-token', { verb: 'create', resource: 'pods', namespace: 'x' }),
    ).toMatchObject({
      status: 201,
      body: { status: { allowed: true } },
    });
    expect(
      (await call(server, 'only-token', 'POST', '/api/v1/namespaces/x/pods', pod('x', 'p'))).status,
    ).toBe(201);
    expect((await call(server, 'only-token', 'DELETE', '/api/v1/namespaces/x/pods/p')).status).toBe(200);
    expect((await call(server, 'wrong', 'GET', '/api/v1/pods')).status).toBe(401);
  });
});

describe.skipIf(kubectlMissing)('namespace writes from kubectl', () => {
  let server: SandboxApiServer;
  const kubectl = (...args: string[]) =>
    run('kubectl', ['--kubeconfig', server.kubeconfigPath, ...args], { timeout: 20_000 });
  beforeAll(async () => {
    server = await startSandboxApiServer({ tls: true, token: 'ns-token', contextName: 'ns-writes' });
  });
  afterAll(async () => {
    await server.close();
  });

  it('create namespace, label namespace, delete namespace: stored, labelled, Terminating then gone', async () => {
    expect((await kubectl('create', 'namespace', 'spark-x')).stdout).toContain('namespace/spark-x created');
    expect(server.namespaces.get('spark-x')?.status?.phase).toBe('Active');
    await expect(kubectl('create', 'namespace', 'spark-x')).rejects.toMatchObject({
      stderr: expect.stringContaining('namespaces "spark-x" already exists'),
    });
    expect((await kubectl('label', 'namespace', 'spark-x', 'spark-cleanup=enabled')).stdout).toContain(
      'namespace/spark-x labeled',
    );
    expect(server.namespaces.get('spark-x')?.metadata?.labels).toEqual({
      'spark-cleanup': 'enabled',
      'kubernetes.io/metadata.name': 'spark-x',
    });
    const { stdout } = await kubectl('get', 'ns', '-l', 'spark-cleanup=enabled', '-o', 'name');
    expect(stdout.trim()).toBe('namespace/spark-x');
    await kubectl('label', 'namespace', 'spark-x', 'spark-cleanup-');
    expect(server.namespaces.get('spark-x')?.metadata?.labels).toEqual({
      'kubernetes.io/metadata.name': 'spark-x',
    });
    await kubectl('delete', 'namespace', 'spark-x', '--wait=false');
    expect(server.namespaces.get('spark-x')).toBeUndefined();
  });
});

describe('the kubelet stand-in', () => {
  let server: SandboxApiServer;
  beforeAll(async () => {
    server = await startSandboxApiServer({ contextName: 'kubelet' });
  });
  afterAll(async () => {
    await server.close();
  });

  it('a pod created through the API is scheduled, runs and ends Succeeded with exit code 0; an in-process scheduled pod is left alone', async () => {
    const kubelet = startKubelet(server, { pendingMs: 20, runMs: 50 });
    try {
      server.pods.create({ ...pod('k', 'scheduled'), spec: { containers: [{ name: 'c' }], nodeName: 'n1' } });
      const res = await fetch(`${server.url}/api/v1/namespaces/k/pods`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(pod('k', 'canary', { labels: { canary: 'yes' } })),
      });
      expect(res.status).toBe(201);
      const done = await waitFor(() => {
        const p = server.pods.get('k', 'canary');
        return p?.status?.phase === 'Succeeded' ? p : undefined;
      }, 'the pod ended');
      expect(done.spec?.nodeName).toBe('sandbox-node-1');
      expect(done.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
        exitCode: 0,
        reason: 'Completed',
      });
      expect(kubelet.finished).toEqual(['k/canary']);
      expect(server.pods.get('k', 'scheduled')?.status?.phase).toBe('Pending');
    } finally {
      kubelet.stop();
    }
  });
});
