/**
 * A real Redis Cluster for tests: N masters (Debian's `redis-server` with `cluster-enabled yes`), each with
 * `replicas` replicas (default none), on free loopback ports, joined by `redis-cli --cluster create …
 * --cluster-yes`, which assigns the 16,384 hash slots evenly. Every process is killed by
 * {@link LocalRedisCluster.stop} (and on exit).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, requireBinary } from './local-services.ts';

/** One redis-server of the cluster. */
export interface ClusterServer {
  readonly port: number;
  /** SIGKILL it and wait for its exit. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT. */
  pause(): void;
  resume(): void;
  /**
   * Starts a killed server again with its cluster configuration (empty data): it rejoins the cluster, as a
   * replica of whichever node took its slots. Resolves once it answers.
   */
  restart(): Promise<void>;
}

/** A started Redis Cluster. */
export interface LocalRedisCluster {
  /** The initial masters' addresses (ioredis `Cluster` startup nodes). */
  readonly nodes: readonly { host: string; port: number }[];
  /** Every redis-server, masters and replicas. */
  readonly servers: readonly ClusterServer[];
  /** The port of the master serving `key`'s slot now, as a live node sees it; undefined when none does. */
  masterPortOf(key: string): number | undefined;
  /**
   * Waits until `key`'s slot is served by a master other than `deadPort` that answers, and the cluster says
   * `cluster_state:ok` there; resolves with its port.
   */
  waitForFailover(key: string, deadPort: number, timeoutMs?: number): Promise<number>;
  /** The server on `port` is a replica whose link to its master is up (synced). */
  replicaOnline(port: number): boolean;
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
export async function startRedisCluster(
  opts: { masters?: number; replicas?: number; nodeTimeoutMs?: number } = {},
): Promise<LocalRedisCluster> {
  const server = requireBinary('redis-server', 'redis-server');
  const cli = requireBinary('redis-cli', 'redis-tools');
  const replicas = opts.replicas ?? 0;
  const n = (opts.masters ?? 3) * (1 + replicas);
  const children: ChildProcess[] = [];
  const launches: (() => ChildProcess)[] = [];
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
        'cluster-node-timeout': opts.nodeTimeoutMs ?? 5000,
        save: '',
        appendonly: 'no',
        'maxmemory-policy': 'noeviction',
        dir,
      };
      const launch = () => {
        const c = spawn(
          server,
          Object.entries(conf).flatMap(([k, v]) => [`--${k}`, String(v)]),
          { cwd: dir, stdio: ['ignore', 'ignore', 'ignore'] },
        );
        live.add(c);
        c.once('exit', () => live.delete(c));
        return c;
      };
      launches.push(launch);
      children.push(launch());
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
      String(replicas),
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
    // Replicas: every master has its replicas online (synced), else a master killed now would not fail over.
    if (replicas > 0) {
      await until(
        `every master with ${replicas} replica(s) online`,
        () => {
          const masters = nodes.filter(({ port }) =>
            redisCli(cli, ['-p', String(port), 'ROLE']).out.startsWith('master'),
          );
          return (
            masters.length === (opts.masters ?? 3) &&
            masters.every(
              ({ port }) =>
                (redisCli(cli, ['-p', String(port), 'INFO', 'replication']).out.match(/state=online/g) ?? [])
                  .length >= replicas,
            )
          );
        },
        30_000,
      );
    }
    const servers: ClusterServer[] = children.map((_, i) => {
      const port = (nodes[i] as { port: number }).port;
      const child = () => children[i] as ChildProcess;
      const kill = async () => {
        const c = child();
        c.kill('SIGCONT');
        c.kill('SIGKILL');
        if (c.exitCode === null && c.signalCode === null) await new Promise((r) => c.once('exit', r));
      };
      return {
        port,
        kill,
        pause: () => child().kill('SIGSTOP'),
        resume: () => child().kill('SIGCONT'),
        async restart() {
          await kill();
          children[i] = (launches[i] as () => ChildProcess)();
          await until(
            `node ${port} answering again`,
            () => redisCli(cli, ['-p', String(port), 'PING']).out.includes('PONG'),
            20_000,
          );
        },
      };
    });
    const alive = () => servers.filter((_, i) => children[i]?.exitCode === null && !children[i]?.signalCode);
    const masterPortOf = (key: string): number | undefined => {
      for (const s of alive()) {
        const slot = Number(redisCli(cli, ['-p', String(s.port), 'CLUSTER', 'KEYSLOT', key]).out.trim());
        // CLUSTER NODES: `<id> <ip:port@bus> <flags> <master> … <slots…>`; a master line lists its ranges.
        for (const line of redisCli(cli, ['-p', String(s.port), 'CLUSTER', 'NODES']).out.split('\n')) {
          const f = line.trim().split(' ');
          if (!f[2]?.includes('master') || f[2].includes('fail')) continue;
          const serves = f.slice(8).some((r) => {
            const [a, b] = r.split('-').map(Number);
            return slot >= (a as number) && slot <= (b ?? a ?? -1);
          });
          if (serves) return Number(f[1]?.split('@')[0]?.split(':')[1]);
        }
      }
      return undefined;
    };
    return {
      nodes: nodes.slice(0, opts.masters ?? 3),
      servers,
      masterPortOf,
      replicaOnline: (port) => {
        const info = redisCli(cli, ['-p', String(port), 'INFO', 'replication']).out;
        return info.includes('role:slave') && info.includes('master_link_status:up');
      },
      async waitForFailover(key, deadPort, timeoutMs = 60_000) {
        let port: number | undefined;
        await until(
          `a new master for ${key}`,
          () => {
            port = masterPortOf(key);
            return (
              port !== undefined &&
              port !== deadPort &&
              redisCli(cli, ['-p', String(port), 'CLUSTER', 'INFO']).out.includes('cluster_state:ok')
            );
          },
          timeoutMs,
        );
        return port as number;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
