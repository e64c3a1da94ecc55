/**
 * A real Redis Cluster for tests: N masters (Debian's `redis-server` with `cluster-enabled yes`, no
 * replicas) on free loopback ports, joined by `redis-cli --cluster create … --cluster-yes`, which assigns
 * the 16,384 hash slots evenly. Every process is killed by {@link LocalRedisCluster.stop} (and on exit).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, requireBinary } from './local-services.ts';

/** A started Redis Cluster. */
export interface LocalRedisCluster {
  /** The masters' addresses (ioredis `Cluster` startup nodes). */
  readonly nodes: readonly { host: string; port: number }[];
  /** SIGTERM every node (SIGKILL after 5 s), remove their directories. Idempotent. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

function redisCli(cli: string, args: string[]): { ok: boolean; out: string } {
  const r = spawnSync(cli, args, { encoding: 'utf8', timeout: 30_000 });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`redis cluster: ${what} not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts `masters` (default 3, at least 3 as `redis-cli --cluster create` requires) cluster-enabled
 * redis-servers (`maxmemory-policy noeviction` as BullMQ requires, no persistence) and creates the cluster.
 * Resolves once every node reports `cluster_state:ok`.
 * @throws MissingBinaryError when redis-server or redis-cli is missing; Error with redis-cli's output when
 *   the cluster cannot be created.
 */
export async function startRedisCluster(opts: { masters?: number } = {}): Promise<LocalRedisCluster> {
  const server = requireBinary('redis-server', 'redis-server');
  const cli = requireBinary('redis-cli', 'redis-tools');
  const n = opts.masters ?? 3;
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  const nodes: { host: string; port: number }[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(
      children.map(async (c) => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
        c.kill('SIGTERM');
        const timer = setTimeout(() => c.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }),
    );
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < n; i++) {
      const [port, busPort] = [await freePort(), await freePort()];
      const dir = mkdtempSync(join(tmpdir(), 'sdc-redis-cluster-'));
      dirs.push(dir);
      const conf: Record<string, string | number> = {
        port,
        'cluster-port': busPort,
        bind: '127.0.0.1',
        'cluster-enabled': 'yes',
        'cluster-config-file': join(dir, 'nodes.conf'),
        'cluster-node-timeout': 5000,
        save: '',
        appendonly: 'no',
        'maxmemory-policy': 'noeviction',
        dir,
      };
      const c = spawn(
        server,
        Object.entries(conf).flatMap(([k, v]) => [`--${k}`, String(v)]),
        { cwd: dir, stdio: ['ignore', 'ignore', 'ignore'] },
      );
      live.add(c);
      c.once('exit', () => live.delete(c));
      children.push(c);
      nodes.push({ host: '127.0.0.1', port });
    }
    for (const { port } of nodes) {
      await until(
        `node ${port} answering`,
        () => redisCli(cli, ['-p', String(port), 'PING']).out.includes('PONG'),
        20_000,
      );
    }
    const addresses = nodes.map((x) => `${x.host}:${x.port}`);
    const created = redisCli(cli, [
      '--cluster',
      'create',
      ...addresses,
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    if (!created.ok) throw new Error(`redis-cli --cluster create failed:\n${created.out}`);
    for (const { port } of nodes) {
      await until(
        `node ${port} cluster_state:ok`,
        () => redisCli(cli, ['-p', String(port), 'CLUSTER', 'INFO']).out.includes('cluster_state:ok'),
        30_000,
      );
    }
    return { nodes, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
