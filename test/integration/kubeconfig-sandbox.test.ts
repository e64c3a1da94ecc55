/**
 * The kubeconfig the sandbox API server writes (HTTPS with its own CA, a bearer token; and plain HTTP),
 * loaded by loadClusterAccess and used through createKubeHttp: what the replica does at start.
 */
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { createKubeHttp } from '../../src/kube/kube-http.ts';
import { loadClusterAccess } from '../../src/kube/kubeconfig.ts';

let secure: SandboxApiServer;
let plain: SandboxApiServer;
beforeAll(async () => {
  [secure, plain] = await Promise.all([
    startSandboxApiServer({ contextName: 'secure', tls: true, token: 's3cret' }),
    startSandboxApiServer({ contextName: 'plain' }),
  ]);
});
afterAll(async () => {
  await Promise.all([secure?.close(), plain?.close()]);
});

describe('loadClusterAccess + createKubeHttp on the sandbox kubeconfig', () => {
  it('HTTPS with the kubeconfig CA and token: GET pods → 200; a wrong token → 401', async () => {
    const access = loadClusterAccess(secure.kubeconfigPath, undefined);
    expect(access.context).toBe('secure');
    expect(access.server).toBe(secure.url);
    const http = createKubeHttp(access);
    try {
      const res = await http.request('GET', '/api/v1/namespaces/default/pods');
      expect(res.statusCode).toBe(200);
      expect((res.body as { kind?: string }).kind).toBe('PodList');
    } finally {
      await http.close();
    }
    const wrongPath = `${secure.kubeconfigPath}.wrong`;
    writeFileSync(wrongPath, secure.kubeconfigYaml.replace(/token: .*/, 'token: wrong'));
    const wrong = createKubeHttp(loadClusterAccess(wrongPath, 'secure'));
    try {
      expect((await wrong.request('GET', '/api/v1/namespaces/default/pods')).statusCode).toBe(401);
    } finally {
      await wrong.close();
    }
  });

  it('both servers in one KUBECONFIG list, each context its own server', async () => {
    const path = `${plain.kubeconfigPath}:${secure.kubeconfigPath}`;
    const a = loadClusterAccess(path, undefined);
    expect(a.context).toBe('plain'); // the first file's current context
    expect(a.server).toBe(plain.url);
    const b = loadClusterAccess(path, 'secure');
    const clients = [createKubeHttp(a), createKubeHttp(b)];
    try {
      const codes = await Promise.all(
        clients.map(async (h) => (await h.request('GET', '/api/v1/namespaces/default/pods')).statusCode),
      );
      expect(codes).toEqual([200, 200]);
    } finally {
      await Promise.all(clients.map((h) => h.close()));
    }
  });
});
