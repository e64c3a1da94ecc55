/**
 * Launches real ZooKeeper servers (Debian's `zookeeper` package, run on the installed JRE) on free loopback
 * ports, each in its own temporary directory: one standalone server, or an ensemble of `members` servers. For
 * the tests of the ZooKeeper leadership backend. Tracked and killed like every local service
 * (harness/sandbox/local-services.ts).
 */
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  freePort,
  type LocalService,
  MissingBinaryError,
  makeService,
  requireBinary,
  withPortRetry,
} from './local-services.ts';

/** Where Debian's `zookeeper` package puts the server's jar. */
export const ZOOKEEPER_JAR = '/usr/share/java/zookeeper.jar';

/** A started ZooKeeper ensemble (or one standalone server). */
export interface LocalZooKeeper {
  /** The connect string of every member, `127.0.0.1:PORT,...`. */
  readonly connect: string;
  readonly members: LocalService[];
  stop(): Promise<void>;
}

/** Sends a four-letter word to `port`; resolves with the answer ('' when none). */
export function fourLetters(port: number, word: string): Promise<string> {
  return new Promise((resolve) => {
    const sock = new Socket();
    let got = '';
    sock.setTimeout(1000, () => sock.destroy());
    sock.once('connect', () => sock.write(word));
    sock.on('data', (d: Buffer) => {
      got += d.toString();
    });
    sock.once('error', () => undefined);
    sock.once('close', () => resolve(got));
    sock.connect(port, '127.0.0.1');
  });
}

/** The server serves clients: standalone, leader or follower (`srvr` names its mode). */
async function serving(port: number): Promise<boolean> {
  return /Mode: (standalone|leader|follower)/.test(await fourLetters(port, 'srvr'));
}

/**
 * Starts ZooKeeper: `members` = 1 (default) a standalone server, else an ensemble. tickTime 500 ms, so
 * sessions may last 1 s to 60 s. Resolves once every member serves.
 * @throws MissingBinaryError when java or the zookeeper package is not installed.
 */
export async function startZooKeeper(opts: { members?: number } = {}): Promise<LocalZooKeeper> {
  const java = requireBinary('java', 'default-jre-headless');
  if (!existsSync(ZOOKEEPER_JAR))
    throw new MissingBinaryError(
      `${ZOOKEEPER_JAR} not found: install it with \`apt-get update && apt-get install -y zookeeper\``,
    );
  return withPortRetry(() => startEnsemble(java, opts.members ?? 1));
}

async function startEnsemble(java: string, n: number): Promise<LocalZooKeeper> {
  const ports: { client: number; peer: number; election: number }[] = [];
  for (let i = 0; i < n; i++)
    ports.push({ client: await freePort(), peer: await freePort(), election: await freePort() });
  const servers = ports.map((p, i) => `server.${i + 1}=127.0.0.1:${p.peer}:${p.election}`);
  const members = ports.map((p, i) => {
    const dir = mkdtempSync(join(tmpdir(), `sdc-zookeeper-${i + 1}-`));
    const data = join(dir, 'data');
    mkdirSync(data);
    writeFileSync(join(data, 'myid'), `${i + 1}\n`);
    const cfg = join(dir, 'zoo.cfg');
    writeFileSync(
      cfg,
      [
        'tickTime=500',
        'initLimit=20',
        'syncLimit=10',
        'minSessionTimeout=1000',
        'maxSessionTimeout=60000',
        `dataDir=${data}`,
        `clientPort=${p.client}`,
        'clientPortAddress=127.0.0.1',
        '4lw.commands.whitelist=srvr,ruok,cons',
        'admin.enableServer=false',
        ...(n > 1 ? servers : []),
        '',
      ].join('\n'),
    );
    return makeService({ client: p.client }, 'redis', dir, {
      bin: java,
      what: `zookeeper ${i + 1}`,
      args: () => [
        '-Xmx256m',
        '-XX:+UseSerialGC',
        `-Dzookeeper.log.dir=${dir}`,
        '-cp',
        `/etc/zookeeper/conf:${ZOOKEEPER_JAR}`,
        'org.apache.zookeeper.server.quorum.QuorumPeerMain',
        cfg,
      ],
      ready: serving,
    });
  });
  const started = await Promise.allSettled(members.map((m) => m.start()));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    await Promise.all(members.map((m) => m.stop()));
    throw failed.reason;
  }
  return {
    connect: ports.map((p) => `127.0.0.1:${p.client}`).join(','),
    members,
    async stop() {
      await Promise.all(members.map((m) => m.stop()));
    },
  };
}
