/**
 * A Redis whose TLS certificate a private CA signed (docs/deployment.md, "A Redis with a private CA";
 * infra/k8s/components/redis-ca): the cleaner reaches it over `rediss://` once NODE_EXTRA_CA_CERTS names the CA's
 * certificate, as the component sets it, and not without. A real redis-server with TLS on a free port, certificates
 * from the openssl CLI; `status` is the cleaner's own Redis connection (exit 3 when Redis does not answer).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildKubeconfig } from '../../harness/sandbox/apiserver/kubeconfig.ts';
import { freePort, requireBinary } from '../../harness/sandbox/local-services.ts';
import { tempFile } from '../helpers/cluster.ts';
import { issueCert, makeCa } from '../helpers/etcd-pki.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const pki = mkdtempSync(path.join(tmpdir(), 'sdc-redis-ca-'));
let redis: ChildProcess | undefined;
let url = '';
let redisLog = '';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}
/** `status` with only the settings it needs, and `extra` in its environment. */
function status(extra: Record<string, string>): Promise<Run> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  // The replicas' kubeconfig: `status` reads the context's cluster entry for the cluster's name (it contacts
  // no API server).
  const kubeconfig = tempFile(
    'kubeconfig.yaml',
    buildKubeconfig([{ contextName: 'ctx', url: 'http://127.0.0.1:9' }]),
  );
  Object.assign(env, { SDC_TARGETS: 'ctx:spark', SDC_REDIS_URL: url, KUBECONFIG: kubeconfig, ...extra });
  return new Promise((resolve) =>
    execFile(process.execPath, ['src/cli.ts', 'status'], { cwd: ROOT, env }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
    ),
  );
}

beforeAll(async () => {
  const bin = requireBinary('redis-server', 'redis-server');
  const ca = makeCa(pki, 'private-ca');
  const server = issueCert(ca, pki, 'redis', 'redis');
  const port = await freePort();
  url = `rediss://127.0.0.1:${port}`;
  // biome-ignore format: an option and its value on one line
  redis = spawn(bin, [
    '--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1',
    '--tls-cert-file', server.certFile, '--tls-key-file', server.keyFile, '--tls-ca-cert-file', ca.certFile,
    '--tls-auth-clients', 'no', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction', '--dir', pki,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  redis.stdout?.on('data', (d: Buffer) => {
    redisLog += d.toString();
  });
  await waitFor(
    'redis-server with TLS ready',
    () => redisLog.includes('Ready to accept connections'),
    30_000,
  );
}, 60_000);

afterAll(() => {
  redis?.kill('SIGKILL');
  rmSync(pki, { recursive: true, force: true });
});

describe('a Redis with a private CA', () => {
  it('answers the cleaner over rediss:// with NODE_EXTRA_CA_CERTS naming the CA (status exits 1: no leader, not 3)', async () => {
    const r = await status({ NODE_EXTRA_CA_CERTS: path.join(pki, 'private-ca.pem') });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain('ctx:spark');
    expect(r.stdout).toContain('no leader');
  });

  it('is refused without it: status exits 3 naming redisUrl', async () => {
    const r = await status({});
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('redisUrl');
    expect(r.stderr).toContain('Redis does not answer');
  });
});
