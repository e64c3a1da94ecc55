/**
 * Launches real `redis-server` and `etcd` processes on free loopback ports in a temporary directory,
 * for the demo, the tests and the benchmarks. Nothing here is mocked: these are the Debian binaries.
 *
 * Every launched process is tracked and killed by {@link stopAllLocalServices} (and on process exit),
 * so nothing is left running.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A binary we need is not installed. `message` carries the install command. */
export class MissingBinaryError extends Error {
  override name = 'MissingBinaryError';
}

/** A launched local service: a real child process listening on loopback. */
export interface LocalService {
  /** `redis://127.0.0.1:PORT` or `http://127.0.0.1:PORT` (etcd client URL); changes after {@link LocalService.restartOnFreshPort}. */
  readonly url: string;
  /** The client port now. */
  readonly port: number;
  /** PID of the current process (changes after {@link LocalService.restart}). */
  readonly pid: number | undefined;
  /** SIGKILL the process (no clean shutdown) and wait for it to exit. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: freeze and thaw the process (a partition as seen from its peers). */
  pause(): void;
  resume(): void;
  /** Start it again on the same port (same data dir for etcd; redis keeps nothing). */
  restart(): Promise<void>;
  /**
   * Start it again (killing it first if it runs) on fresh free ports — client and, for etcd, peer — so
   * that a port another process took while it was down cannot fail the start; once more on other fresh
   * ports when that start fails. Same data dir for etcd (etcd 3.4 accepts new listen URLs for a
   * single-member cluster with an existing data dir: the stored peer URL stays, the client URL is
   * re-published); redis keeps nothing. `url` and `port` then name the new port.
   * @throws the second start's error.
   */
  restartOnFreshPort(): Promise<void>;
  /** SIGTERM, wait for exit, remove its directory. Idempotent. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Binds `port` (0 = any) on 127.0.0.1 and releases it; resolves with the port, or undefined when taken. */
function tryPort(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(undefined));
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : undefined));
    });
  });
}

/**
 * A free TCP port on 127.0.0.1 for a server we are about to start. Picked at random below Linux's ephemeral
 * range (32768–60999): a port the kernel hands out for `listen(0)` comes from the range outgoing connections
 * also draw their source ports from, and one of them could take it before our server binds it.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await tryPort(20_000 + Math.floor(Math.random() * 12_000));
    if (port) return port;
  }
  const any = await tryPort(0);
  if (!any) throw new Error('no free port on 127.0.0.1');
  return any;
}

/** Starts a service on fresh ports, again (up to 3 times) when a port was taken between the pick and the bind. */
export async function withPortRetry<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= 3 || !/address already in use/i.test((err as Error).message)) throw err;
    }
  }
}

/** Finds a binary on PATH; throws {@link MissingBinaryError} naming the Debian package to install. */
export function requireBinary(name: string, debianPackage: string): string {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const path = found.stdout.trim();
  if (found.status !== 0 || !path) {
    throw new MissingBinaryError(
      `${name} not found on PATH: install it with \`apt-get update && apt-get install -y ${debianPackage}\`, ` +
        'or point at an existing server (REDIS_URL / ETCD_ENDPOINTS).',
    );
  }
  return path;
}

/** Redis answers PING with +PONG on `port` (not merely: something accepts connections there). */
function redisAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = new Socket();
    let got = '';
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(1000, () => done(false));
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d: Buffer) => {
      got += d.toString();
      if (got.includes('\r\n')) done(got.startsWith('+PONG'));
    });
    sock.once('error', () => done(false));
    sock.once('close', () => resolve(false));
    sock.connect(port, '127.0.0.1');
  });
}

/** etcd answers `GET /health` on its client `port` with a JSON body naming `health`. */
async function etcdAnswers(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
    return /"health"/.test(await res.text());
  } catch {
    return false;
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, child: ChildProcess, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode} during start`);
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not become ready within ${timeoutMs} ms`);
}

async function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
}

/** The ports a service listens on: its client port, and etcd's peer port. */
interface Ports {
  client: number;
  peer?: number;
}

interface Launch {
  bin: string;
  args: (ports: Ports) => string[];
  ready: (port: number) => Promise<boolean>;
  what: string;
  /** How long a start may take to become ready, ms (default 20 000). */
  readyTimeoutMs?: number;
}

export function makeService(
  initial: Ports,
  scheme: 'redis' | 'http' | 'https',
  dir: string,
  launch: Launch,
): LocalService & { start(): Promise<void> } {
  let child: ChildProcess | undefined;
  let stopped = false;
  let ports = initial;
  /** Every process this service spawned that has not exited: at most one may run (etcd locks its data dir). */
  const own = new Set<ChildProcess>();
  /**
   * Lifecycle operations run one at a time: a restart that overran its fault (a slow start retried) and the
   * next fault's kill must not interleave, or a process spawned by one is orphaned by the other — it keeps
   * the data directory's lock and every later start waits for it until it times out (the 30-minute nemesis
   * soak of seed 1954400105: etcd "did not become ready" 11 times, an orphan serving on an old port).
   */
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(op: () => Promise<T>): Promise<T> => {
    const next = queue.then(op, op);
    queue = next.catch(() => undefined);
    return next;
  };
  const killAll = async () => {
    for (const c of [...own]) {
      c.kill('SIGCONT');
      c.kill('SIGKILL');
      await exited(c);
    }
  };
  const start = async () => {
    // No earlier process of this service may outlive a new start.
    await killAll();
    const port = ports.client;
    const c = spawn(launch.bin, launch.args(ports), { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    c.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    live.add(c);
    own.add(c);
    c.once('exit', () => {
      live.delete(c);
      own.delete(c);
    });
    child = c;
    try {
      await waitFor(launch.what, () => launch.ready(port), c, launch.readyTimeoutMs);
    } catch (err) {
      c.kill('SIGKILL');
      await exited(c);
      throw new Error(`${(err as Error).message}\n${stderr}`);
    }
  };
  return {
    get url() {
      return `${scheme}://127.0.0.1:${ports.client}`;
    },
    get port() {
      return ports.client;
    },
    get pid() {
      return child?.pid;
    },
    start: () => serial(start),
    kill: () => serial(killAll),
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
    restart: () => serial(start),
    restartOnFreshPort: () =>
      serial(async () => {
        await killAll();
        const fresh = async (): Promise<Ports> => ({
          client: await freePort(),
          ...(initial.peer === undefined ? {} : { peer: await freePort() }),
        });
        ports = await fresh();
        try {
          await start();
        } catch {
          ports = await fresh();
          await start();
        }
      }),
    async stop() {
      if (stopped) return;
      stopped = true;
      if (child) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child?.kill('SIGKILL'), 5000);
        await exited(child);
        clearTimeout(timer);
      }
      await killAll();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The `redis-server` arguments of every test server (one server, Sentinel's and Cluster's nodes): loopback only,
 * no persistence, `maxmemory-policy noeviction` (BullMQ requires it), files in `dir`.
 */
export function redisServerArgs(port: number, dir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--maxmemory-policy',
    'noeviction',
    '--dir',
    dir,
  ];
}

/**
 * Starts `redis-server` on a free port with `maxmemory-policy noeviction` (BullMQ requires it) and no
 * persistence. Resolves once it answers on its port.
 * @throws MissingBinaryError when redis-server is not installed.
 */
export async function startRedis(opts: { port?: number } = {}): Promise<LocalService> {
  const bin = requireBinary('redis-server', 'redis-server');
  if (opts.port === undefined) return withPortRetry(async () => startRedisOn(bin, await freePort()));
  return startRedisOn(bin, opts.port);
}

async function startRedisOn(bin: string, port: number): Promise<LocalService> {
  const dir = mkdtempSync(join(tmpdir(), 'sdc-redis-'));
  const svc = makeService({ client: port }, 'redis', dir, {
    bin,
    what: 'redis-server',
    args: ({ client }) => redisServerArgs(client, dir),
    // A PING answered, not merely an open port: another process may listen on a port we picked.
    ready: redisAnswers,
  });
  await svc.start();
  return svc;
}

/**
 * TLS of a local etcd's client port (PEM file paths). Read at each start, so a test can point them at new
 * files (a rotated CA) before `restart()`.
 */
export interface EtcdTlsOptions {
  /** The server's certificate (SAN 127.0.0.1) and key. */
  certFile: string;
  keyFile: string;
  /** The CA bundle that client certificates must chain to (`--trusted-ca-file`, `--client-cert-auth`). */
  clientCaFile: string;
  /** A client certificate and key that this CA accepts, and the CA of the server's certificate: for the readiness check. */
  readyClient: { caFile: string; certFile: string; keyFile: string };
}

/** etcd answers any HTTP status on its TLS client `port` (with a client certificate `client` accepts). */
function etcdAnswersTls(port: number, tls: EtcdTlsOptions): Promise<boolean> {
  return new Promise((resolve) => {
    const c = tls.readyClient;
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/health',
        ca: readFileSync(c.caFile),
        cert: readFileSync(c.certFile),
        key: readFileSync(c.keyFile),
        timeout: 1000,
      },
      (res) => {
        res.resume();
        resolve(res.statusCode !== undefined);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** A started etcd cluster: one {@link LocalService} per member, and the client endpoints of all. */
export interface LocalEtcd {
  /** The members' client URLs now (a member restarted on a fresh port has a new one). */
  readonly endpoints: string[];
  readonly members: LocalService[];
  stop(): Promise<void>;
}

/**
 * Starts an etcd cluster of `members` (default 1) real `etcd` processes on free loopback ports, each with
 * its own data directory. Resolves once every member answers on its client port.
 * @throws MissingBinaryError when etcd is not installed (Debian package `etcd-server`).
 */
export async function startEtcd(opts: { members?: number; tls?: EtcdTlsOptions } = {}): Promise<LocalEtcd> {
  const bin = requireBinary('etcd', 'etcd-server');
  return withPortRetry(() => startEtcdCluster(bin, opts.members ?? 1, opts.tls));
}

async function startEtcdCluster(bin: string, n: number, tls: EtcdTlsOptions | undefined): Promise<LocalEtcd> {
  const clientScheme = tls ? 'https' : 'http';
  const ports: { client: number; peer: number; name: string }[] = [];
  for (let i = 0; i < n; i++) ports.push({ client: await freePort(), peer: await freePort(), name: `m${i}` });
  const initialCluster = ports.map((p) => `${p.name}=http://127.0.0.1:${p.peer}`).join(',');
  const token = `sdc-${process.pid}-${Date.now()}`;
  const members = ports.map((p) => {
    const dir = mkdtempSync(join(tmpdir(), `sdc-etcd-${p.name}-`));
    return makeService({ client: p.client, peer: p.peer }, clientScheme, dir, {
      bin,
      what: `etcd ${p.name}`,
      // `--initial-*` only matter for the first start; later starts read the member from the data dir.
      args: ({ client, peer }) => [
        '--name',
        p.name,
        '--data-dir',
        join(dir, 'data'),
        '--listen-client-urls',
        `${clientScheme}://127.0.0.1:${client}`,
        '--advertise-client-urls',
        `${clientScheme}://127.0.0.1:${client}`,
        ...(tls
          ? [
              '--cert-file',
              tls.certFile,
              '--key-file',
              tls.keyFile,
              '--trusted-ca-file',
              tls.clientCaFile,
              '--client-cert-auth',
            ]
          : []),
        '--listen-peer-urls',
        `http://127.0.0.1:${peer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${peer}`,
        '--initial-cluster',
        initialCluster,
        '--initial-cluster-token',
        token,
        '--initial-cluster-state',
        'new',
        '--log-level',
        'error',
        '--logger',
        'zap',
      ],
      ready: tls ? (port) => etcdAnswersTls(port, tls) : etcdAnswers,
    });
  });
  const started = await Promise.allSettled(members.map((m) => m.start()));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    await Promise.all(members.map((m) => m.stop()));
    throw failed.reason;
  }
  return {
    get endpoints() {
      return members.map((m) => m.url);
    },
    members,
    async stop() {
      await Promise.all(members.map((m) => m.stop()));
    },
  };
}

/** Kills every service this process launched (used by signal handlers). */
export function killAllLocalServices(): void {
  for (const child of live) child.kill('SIGKILL');
}
