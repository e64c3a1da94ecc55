/**
 * The namespace discovery (src/kube/namespace-discovery.ts) over our transport against the sandbox API server
 * (HTTPS, bearer token): the selector server-side, namespaces that gain and lose the label or are deleted,
 * a relist after 410 that finds what changed meanwhile, every request through the given rate limiter, stop().
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import type { ClusterAccess } from '../../src/kube/cluster-access.ts';
import { createKubeHttp, type KubeHttp } from '../../src/kube/kube-http.ts';
import { createNamespaceDiscovery } from '../../src/kube/namespace-discovery.ts';
import type { RateLimiter } from '../../src/kube/rate-limiter.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'disc0very';
let server: SandboxApiServer;
let http: KubeHttp;
beforeAll(async () => {
  server = await startSandboxApiServer({ tls: true, token: TOKEN, contextName: 'test' });
  const access: ClusterAccess = {
    context: 'test',
    server: server.url,
    tls: { ca: Buffer.from(server.caCertPem ?? '') },
    headers: async () => ({ authorization: `Bearer ${TOKEN}` }),
  };
  http = createKubeHttp(access);
});
afterAll(async () => {
  await http?.close();
  await server?.close();
});

/** A limiter that counts its tokens and never waits. */
function countingLimiter(): RateLimiter & { taken: string[] } {
  const taken: string[] = [];
  return { taken, take: async (_signal, priority = 'cleanup') => void taken.push(priority) };
}

describe('namespace discovery', () => {
  it('follows namespaces that gain, lose the label or are deleted, through the given rate limiter', async () => {
    server.namespaces.create('d-old', { clean: 'yes' });
    server.namespaces.create('d-other', { clean: 'no' });
    const limiter = countingLimiter();
    const discovery = createNamespaceDiscovery({
      http,
      limiter,
      selector: 'clean=yes',
      log: memoryLogger().log,
      now: Date.now,
      backoffMs: 50,
    });
    let changes = 0;
    discovery.onChange(() => {
      changes += 1;
    });
    await discovery.start();
    expect(discovery.synced).toBe(true);
    expect(discovery.namespaces()).toEqual(['d-old']);

    server.namespaces.create('d-new', { clean: 'yes' });
    await waitFor('d-new found', () => discovery.namespaces().includes('d-new'));
    server.namespaces.setLabels('d-other', { clean: 'yes' });
    await waitFor('d-other found once labelled', () => discovery.namespaces().includes('d-other'));
    server.namespaces.setLabels('d-old', {});
    await waitFor('d-old dropped once unlabelled', () => !discovery.namespaces().includes('d-old'));
    server.namespaces.delete('d-new');
    await waitFor('d-new dropped once deleted', () => !discovery.namespaces().includes('d-new'));
    expect(discovery.namespaces()).toEqual(['d-other']);
    expect(changes).toBeGreaterThanOrEqual(4);

    // Every list and watch took an informer token.
    expect(limiter.taken.length).toBeGreaterThanOrEqual(2);
    expect(new Set(limiter.taken)).toEqual(new Set(['informer']));
    await discovery.stop();
  });

  it('changes while its watch is down and the history compacted: the resumed watch gets 410, one relist finds them', async () => {
    server.namespaces.create('r-1', { relist: 'yes' });
    server.namespaces.create('r-gone', { relist: 'yes' });
    const { log, lines } = memoryLogger();
    const discovery = createNamespaceDiscovery({
      http,
      limiter: countingLimiter(),
      selector: 'relist=yes',
      log,
      now: Date.now,
    });
    await discovery.start();
    expect(discovery.namespaces()).toEqual(['r-1', 'r-gone']);
    const lists = () => server.requests.countsByVerb().list ?? 0;
    const before = lists();
    // In one turn of the event loop: the watch ends, the set changes, etcd compacts past what it saw.
    server.dropWatches();
    server.namespaces.create('r-2', { relist: 'yes' });
    server.namespaces.setLabels('r-gone', {});
    server.compact();
    await waitFor(
      'r-2 found and r-gone dropped',
      () => JSON.stringify(discovery.namespaces()) === JSON.stringify(['r-1', 'r-2']),
    );
    expect(lists()).toBe(before + 1);
    expect(lines.some((l) => l.msg === 'watch expired (410 Gone); relisting')).toBe(true);
    await discovery.stop();
  });
});
