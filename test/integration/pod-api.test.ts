import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPodApi, KubeApiError } from '../../src/kube/pod-api.ts';
import { createRateLimiter } from '../../src/kube/rate-limiter.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../../src/sandbox/apiserver/server.ts';
import { createTerminatedDrivers } from '../helpers/cluster.ts';

let server: SandboxApiServer;
beforeAll(async () => {
  server = await startSandboxApiServer({ contextName: 'secure', tls: true, token: 's3cret' });
});
afterAll(async () => {
  await server?.close();
});

function api(token?: string) {
  const kc = new KubeConfig();
  kc.loadFromFile(server.kubeconfigPath);
  if (token !== undefined) {
    const user = kc.getCurrentUser();
    if (user) Object.assign(user, { token });
  }
  return createPodApi({ kc, limiter: createRateLimiter({ qps: 1e6, burst: 1e6, now: Date.now }) });
}

describe('pod API over HTTPS with a bearer token (sandbox)', () => {
  it('GETs and DELETEs with preconditions.uid, reusing one connection pool across requests', async () => {
    const pods = createTerminatedDrivers(server, 'tls', 30);
    const pods1 = api();
    const got = await Promise.all(pods.map((p) => pods1.get('tls', p.metadata?.name ?? '')));
    expect(got.map((p) => p?.metadata?.uid)).toEqual(pods.map((p) => p.metadata?.uid));
    const results = await Promise.all(
      pods.map((p) => pods1.delete('tls', p.metadata?.name ?? '', p.metadata?.uid ?? '')),
    );
    expect(results).toEqual(pods.map(() => 'accepted'));
    // A second DELETE of a deleted pod is a no-op the API tells us about; a wrong UID is refused.
    const [first] = pods;
    expect(await pods1.delete('tls', first?.metadata?.name ?? '', first?.metadata?.uid ?? '')).toBe(
      'not-found',
    );
    const [other] = createTerminatedDrivers(server, 'tls', 1, 'other');
    expect(
      await pods1.delete('tls', other?.metadata?.name ?? '', '00000000-0000-4000-8000-000000000000'),
    ).toBe('uid-mismatch');
    expect(server.pods.get('tls', other?.metadata?.name ?? '')).toBeDefined();
  });

  it('a wrong token is a 401 KubeApiError carrying the Status reason', async () => {
    const err = await api('wrong')
      .get('tls', 'x')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(err).toMatchObject({ code: 401, reason: 'Unauthorized' });
  });
});
