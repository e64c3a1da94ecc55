/**
 * A real Redis Sentinel deployment for tests and benchmarks: one master and `replicas` replicas (Debian's
 * `redis-server`, no persistence, `maxmemory-policy noeviction`) and `sentinels` Sentinels (Debian's
 * `redis-sentinel`) on free loopback ports, the Sentinels voting with a quorum of a majority and declaring a
 * master down after `downAfterMs`. Every process is killed by {@link LocalRedisSentinel.stop} (and on exit).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, redisServerArgs, requireBinary } from './local-services.ts';

/** The master group name the Sentinels monitor. */
export const SENTINEL_MASTER_NAME = 'sdcmaster';

/** One redis-server of the deployment. */
export interface SentinelRedisNode {
  readonly port: number;
  /** SIGKILL it (no clean shutdown) and wait for its exit. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT. */
  pause(): void;
  resume(): void;
  /** Starts it again (empty: no persistence) as a replica of `master`'s port. */
  restartAsReplicaOf(masterPort: number): Promise<void>;
  readonly running: boolean;
}

/** A started Sentinel deployment. */
export interface LocalRedisSentinel {
  readonly masterName: string;
  /** The Sentinels' addresses (`host:port`, as `redisSentinels` takes them). */
  readonly sentinels: readonly { host: string; port: number }[];
  /** The redis-servers; the first is the initial master. */
  readonly nodes: readonly SentinelRedisNode[];
  /** The port of the master the Sentinels name now (asks each Sentinel until one answers). */
  masterPort(): number | undefined;
  /**
   * Waits until the master has `n` replicas online (synced) and every Sentinel counts them: a replica still
   * syncing cannot be promoted, so a kill before that waits for the Sentinels' failover timeout.
   */
  waitForReplicas(n: number, timeoutMs?: number): Promise<void>;
  /** Waits until the Sentinels name a master other than `oldPort` and it answers as a master. */
  waitForNewMaster(oldPort: number, timeoutMs?: number): Promise<number>;
  /** SIGTERM every process (SIGKILL after 5 s), remove their directories. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startRedisSentinel}. */
export interface RedisSentinelOptions {
  /** Replicas of the master (default 2). */
  replicas?: number;
  /** Sentinels (default 3; quorum: a majority). */
  sentinels?: number;
  /** Sentinels' `down-after-milliseconds` (default 2000). */
  downAfterMs?: number;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

function cli(bin: string, port: number, args: string[]): string {
  const r = spawnSync(bin, ['-p', String(port), ...args], { encoding: 'utf8', timeout: 5000 });
  return `${r.stdout ?? ''}`;
}

async function until<T>(what: string, check: () => T | undefined, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`redis sentinel: ${what} not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function exited(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  await new Promise<void>((resolve) => c.once('exit', () => resolve()));
}

function track(c: ChildProcess): ChildProcess {
  live.add(c);
  c.once('exit', () => live.delete(c));
  return c;
}

/**
 * Starts the deployment and resolves once every replica is linked to the master and every Sentinel knows the
 * master, its replicas and the other Sentinels.
 * @throws MissingBinaryError when redis-server, redis-sentinel or redis-cli is missing.
 */
export async function startRedisSentinel(opts: RedisSentinelOptions = {}): Promise<LocalRedisSentinel> {
  const server = requireBinary('redis-server', 'redis-server');
  const sentinelBin = requireBinary('redis-sentinel', 'redis-sentinel');
  const redisCli = requireBinary('redis-cli', 'redis-tools');
  const nReplicas = opts.replicas ?? 2;
  const nSentinels = opts.sentinels ?? 3;
  const downAfterMs = opts.downAfterMs ?? 2000;
  const dir = mkdtempSync(join(tmpdir(), 'sdc-redis-sentinel-'));
  const children: ChildProcess[] = [];
  let stopped = false;

  const spawnServer = (port: number, replicaOf?: number): ChildProcess => {
    const args = [
      ...redisServerArgs(port, dir),
      '--dbfilename',
      `dump-${port}.rdb`,
      ...(replicaOf ? ['--replicaof', '127.0.0.1', String(replicaOf)] : []),
    ];
    const c = track(spawn(server, args, { stdio: 'ignore' }));
    children.push(c);
    return c;
  };

  const nodes: SentinelRedisNode[] = [];
  const sentinels: { host: string; port: number }[] = [];
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(
      children.map(async (c) => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        c.kill('SIGCONT');
        c.kill('SIGTERM');
        const timer = setTimeout(() => c.kill('SIGKILL'), 5000);
        await exited(c);
        clearTimeout(timer);
      }),
    );
    rmSync(dir, { recursive: true, force: true });
  };

  const masterPort = (): number | undefined => {
    for (const s of sentinels) {
      const out = cli(redisCli, s.port, ['SENTINEL', 'get-master-addr-by-name', SENTINEL_MASTER_NAME]).trim();
      const port = Number(out.split('\n')[1]);
      if (Number.isInteger(port) && port > 0) return port;
    }
    return undefined;
  };

  try {
    const ports: number[] = [];
    for (let i = 0; i <= nReplicas; i++) ports.push(await freePort());
    const master = ports[0] as number;
    for (const [i, port] of ports.entries()) {
      let child = spawnServer(port, i === 0 ? undefined : master);
      nodes.push({
        port,
        get running() {
          return child.exitCode === null && child.signalCode === null;
        },
        async kill() {
          child.kill('SIGCONT');
          child.kill('SIGKILL');
          await exited(child);
        },
        pause: () => child.kill('SIGSTOP'),
        resume: () => child.kill('SIGCONT'),
        async restartAsReplicaOf(masterPortNow) {
          child.kill('SIGCONT');
          child.kill('SIGKILL');
          await exited(child);
          child = spawnServer(port, masterPortNow);
          await until(
            'restarted node answering',
            () => (cli(redisCli, port, ['PING']).includes('PONG') ? true : undefined),
            20_000,
          );
        },
      });
    }
    for (const port of ports) {
      await until(
        `node ${port} answering`,
        () => (cli(redisCli, port, ['PING']).includes('PONG') ? true : undefined),
        20_000,
      );
    }
    await until(
      'replicas linked',
      () =>
        cli(redisCli, master, ['INFO', 'replication']).includes(`connected_slaves:${nReplicas}`)
          ? true
          : undefined,
      20_000,
    );
    const quorum = Math.floor(nSentinels / 2) + 1;
    for (let i = 0; i < nSentinels; i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${master} ${quorum}`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} ${downAfterMs}`,
          `sentinel failover-timeout ${SENTINEL_MASTER_NAME} ${Math.max(10_000, 5 * downAfterMs)}`,
          `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      children.push(track(spawn(sentinelBin, [conf], { stdio: 'ignore' })));
      sentinels.push({ host: '127.0.0.1', port });
    }
    for (const s of sentinels) {
      await until(
        `sentinel ${s.port} knows the replicas and the other sentinels`,
        () => {
          const out = cli(redisCli, s.port, ['SENTINEL', 'master', SENTINEL_MASTER_NAME]);
          const field = (name: string) => {
            const lines = out.split('\n').map((l) => l.trim());
            const at = lines.indexOf(name);
            return at < 0 ? Number.NaN : Number(lines[at + 1]);
          };
          return field('num-slaves') >= nReplicas && field('num-other-sentinels') >= nSentinels - 1
            ? true
            : undefined;
        },
        30_000,
      );
    }
    return {
      masterName: SENTINEL_MASTER_NAME,
      sentinels,
      nodes,
      masterPort,
      async waitForReplicas(n, timeoutMs = 60_000) {
        await until(
          `${n} replicas online`,
          () => {
            const port = masterPort();
            if (port === undefined) return undefined;
            const online = (cli(redisCli, port, ['INFO', 'replication']).match(/state=online/g) ?? []).length;
            if (online < n) return undefined;
            return sentinels.every((s) => {
              const lines = cli(redisCli, s.port, ['SENTINEL', 'replicas', SENTINEL_MASTER_NAME]).split('\n');
              // One `flags` value per known replica; a usable one is plain `slave`.
              return (
                lines.filter((l, i) => lines[i - 1]?.trim() === 'flags' && l.trim() === 'slave').length >= n
              );
            })
              ? true
              : undefined;
          },
          timeoutMs,
        );
      },
      async waitForNewMaster(oldPort, timeoutMs = 60_000) {
        return until(
          `a master other than ${oldPort}`,
          () => {
            const port = masterPort();
            if (port === undefined || port === oldPort) return undefined;
            return cli(redisCli, port, ['ROLE']).startsWith('master') ? port : undefined;
          },
          timeoutMs,
        );
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
