/**
 * The official Kubernetes Python client (Debian's python3-kubernetes, installed by scripts/setup.sh) against
 * the sandbox over HTTPS with a bearer token, through the kubeconfig the sandbox writes: create, paged list,
 * a watch from a list's resourceVersion (it sends `watch=True`), precondition DELETEs, and a watch from a
 * compacted resourceVersion ending in 410. The scripts are test/sandbox/python/*.py; each prints JSON lines.
 * Skips, saying why, only when Debian's python3 cannot import `kubernetes`.
 */
import { type ChildProcessWithoutNullStreams, execFile, spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';

const run = promisify(execFile);
/** Debian's interpreter, where python3-kubernetes installs (a pyenv or venv python3 on PATH may lack it). */
const PYTHON = '/usr/bin/python3';
const SCRIPTS = join(import.meta.dirname, 'python');
/** No __pycache__ left in the source tree. */
const ENV = { ...process.env, PYTHONDONTWRITEBYTECODE: '1' };

function missingClient(): string | undefined {
  const r = spawnSync(PYTHON, ['-c', 'import kubernetes'], { encoding: 'utf8' });
  if (r.status === 0) return undefined;
  return `${PYTHON} cannot import kubernetes (${(r.error?.message ?? r.stderr).trim().split('\n').at(-1)}); install Debian's python3-kubernetes (bash scripts/setup.sh does)`;
}

const missing = missingClient();
if (missing) console.warn(`skipping Python client conformance: ${missing}`);

describe.skipIf(missing !== undefined)('the Kubernetes Python client', () => {
  let server: SandboxApiServer;

  /** Runs a script to its end and returns its JSON lines. */
  async function script(name: string, namespace: string): Promise<Record<string, unknown>[]> {
    const { stdout } = await run(PYTHON, [join(SCRIPTS, name), server.kubeconfigPath, namespace], {
      timeout: 60_000,
      env: ENV,
    });
    return stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  beforeAll(async () => {
    server = await startSandboxApiServer({
      tls: true,
      token: 'py-t0ken',
      contextName: 'py-conformance',
      compactionIntervalMs: 0,
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('creates pods and lists them in pages with limit/continue, every page at the first one’s resourceVersion', async () => {
    const out = (await script('create_and_page.py', 'py-page'))[0] ?? {};
    const created = out.created as { name: string; uid: string; phase: string }[];
    expect(created.map((p) => [p.name, p.uid, p.phase])).toEqual(
      server.pods.list('py-page').map((p) => [p.metadata?.name, p.metadata?.uid, 'Pending']),
    );
    expect(out.pages).toEqual([['page-0', 'page-1'], ['page-2', 'page-3'], ['page-4']]);
    expect(out.continues).toEqual([true, true, false]);
    const rvs = out.pageRvs as string[];
    expect(new Set(rvs).size).toBe(1);
  });

  it('watches from a list’s resourceVersion: the later change and the live deletion, nothing replayed', async () => {
    server.pods.create(pod('py-watch', 'keep'));
    server.pods.create(pod('py-watch', 'gone'));
    server.requests.reset();
    const out = (await script('watch_from_list.py', 'py-watch'))[0] ?? {};
    expect(out.listed).toEqual(['gone', 'keep']);
    expect(out.events).toEqual(['MODIFIED keep', 'MODIFIED gone', 'DELETED gone']);
    // Served as one watch (the client's watch=True), not as a list answered in its place.
    expect(server.requests.countsByVerb()).toMatchObject({ list: 1, watch: 1, patch: 1, delete: 1 });
    expect(server.requests.arrivals().find((a) => a.verb === 'watch')?.path).toBe(
      '/api/v1/namespaces/py-watch/pods',
    );
  });

  it('DELETE with a uid precondition: a mismatch is a 409 Conflict Status, the matching uid deletes', async () => {
    const out = (await script('precondition_delete.py', 'py-pre'))[0] ?? {};
    const mismatch = out.mismatch as { status: number; body: Record<string, unknown> };
    const uid = (out.matched as { uid: string }).uid;
    expect(mismatch.status).toBe(409);
    expect(mismatch.body).toMatchObject({
      kind: 'Status',
      status: 'Failure',
      reason: 'Conflict',
      code: 409,
      details: { name: 'guarded', kind: 'Pod' },
    });
    expect(mismatch.body.message).toBe(
      `Operation cannot be fulfilled on Pod "guarded": the UID in the precondition (not-its-uid) does not match the UID in record (${uid}). The object might have been deleted and then recreated`,
    );
    expect(out.afterwards).toBe(404);
    expect(server.requests.deletesByUid().get(uid)).toEqual([409, 200]);
  });

  it('a watch from a compacted resourceVersion ends in 410: the client retries once, then raises', async () => {
    server.pods.create(pod('py-expired', 'p'));
    const child: ChildProcessWithoutNullStreams = spawn(
      PYTHON,
      [join(SCRIPTS, 'watch_expired.py'), server.kubeconfigPath, 'py-expired'],
      { env: ENV },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      await waitFor(() => stdout.includes('\n'), `the listed resourceVersion (stderr: ${stderr})`, 30_000);
      const listRv = Number((JSON.parse(stdout.split('\n')[0] ?? '') as { listRv: string }).listRv);
      server.pods.patchStatus('py-expired', 'p', { phase: 'Running' });
      server.compact();
      expect(server.resourceVersion()).toBeGreaterThan(listRv);
      server.requests.reset();
      child.stdin.write('go\n');
      expect(await exited).toBe(0);
      const last = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as { status?: number; reason?: string };
      expect(last.status).toBe(410);
      expect(last.reason).toMatch(/^Expired: too old resource version: /);
      expect(server.requests.countsByVerb().watch).toBe(2);
    } finally {
      child.kill();
    }
  });
});
