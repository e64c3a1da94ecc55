/**
 * kubectl (Debian's kubernetes-client) against the sandbox over HTTPS with a bearer token, through
 * the kubeconfig the sandbox writes: get (table and -o json), get -w, delete. If kubectl is missing
 * the test tries `apt-get install -y kubernetes-client` and skips with a printed reason only if that fails.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';

const run = promisify(execFile);

function ensureKubectl(): string | undefined {
  if (spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0) return undefined;
  const install = spawnSync('apt-get', ['install', '-y', 'kubernetes-client'], {
    stdio: 'ignore',
    timeout: 120_000,
  });
  if (spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0) return undefined;
  return `kubectl not found and 'apt-get install -y kubernetes-client' exited with ${install.status ?? install.error?.message}`;
}

const missing = ensureKubectl();
if (missing) console.warn(`skipping kubectl conformance: ${missing}`);

describe.skipIf(missing !== undefined)('kubectl', () => {
  let server: SandboxApiServer;
  const kubectl = (...args: string[]) =>
    run('kubectl', ['--kubeconfig', server.kubeconfigPath, ...args], { timeout: 20_000 });

  beforeAll(async () => {
    server = await startSandboxApiServer({ tls: true, token: 'kubectl-token', contextName: 'kc-test' });
    server.pods.create(
      pod('spark', 'driver-a', { labels: { 'spark-role': 'driver' }, status: { phase: 'Running' } }),
    );
    server.pods.create(
      pod('spark', 'driver-b', {
        spec: { containers: [{ name: 'c' }], nodeName: 'n1' },
        status: { phase: 'Succeeded' },
      }),
    );
  });
  afterAll(async () => {
    await server?.close();
  });

  it('get pods -n prints the table', async () => {
    const { stdout } = await kubectl('get', 'pods', '-n', 'spark');
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'driver-a 0/1 Running',
      'driver-b 0/1 Succeeded',
    ]);
  });

  it('get pods -o json returns a List with the pods', async () => {
    const { stdout } = await kubectl('get', 'pods', '-n', 'spark', '-o', 'json', '-l', 'spark-role=driver');
    const list = JSON.parse(stdout) as { items: { metadata: { name: string; uid: string } }[] };
    expect(list.items.map((p) => p.metadata.name)).toEqual(['driver-a']);
    expect(list.items[0]?.metadata.uid).toBe(server.pods.get('spark', 'driver-a')?.metadata?.uid);
  });

  it('get pods -w prints live events', async () => {
    const child = spawn('kubectl', [
      '--kubeconfig',
      server.kubeconfigPath,
      'get',
      'pods',
      '-n',
      'spark',
      '-w',
      '--output-watch-events',
    ]);
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    try {
      await waitFor(() => out.includes('driver-b'), 'initial rows', 15_000);
      server.pods.create(pod('spark', 'driver-c'));
      await waitFor(() => /ADDED\s+driver-c/.test(out), 'ADDED driver-c', 15_000);
      server.pods.patchStatus('spark', 'driver-c', { phase: 'Running' });
      await waitFor(() => /MODIFIED\s+driver-c\s+\S+\s+Running/.test(out), 'MODIFIED driver-c', 15_000);
    } finally {
      child.kill('SIGTERM');
    }
  });

  it('delete pod removes a terminated pod and reports NotFound for an absent one', async () => {
    const uid = server.pods.get('spark', 'driver-b')?.metadata?.uid ?? '';
    const { stdout } = await kubectl('delete', 'pod', 'driver-b', '-n', 'spark');
    expect(stdout.trim()).toBe('pod "driver-b" deleted');
    expect(server.pods.get('spark', 'driver-b')).toBeUndefined();
    expect(server.requests.deletesByUid().get(uid)).toEqual([200]);
    const absent = await kubectl('delete', 'pod', 'driver-b', '-n', 'spark').catch(
      (e: { stderr: string }) => e,
    );
    expect((absent as { stderr: string }).stderr).toContain(
      'Error from server (NotFound): pods "driver-b" not found',
    );
  });
});
