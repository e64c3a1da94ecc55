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
import { type PeerLinks, startPeerLinks } from './zookeeper-peer-links.ts';

/** Where Debian's `zookeeper` package puts the server's jar. */
export const ZOOKEEPER_JAR = '/usr/share/java/zookeeper.jar';

/** A started ZooKeeper ensemble (or one standalone server). */
export interface LocalZooKeeper {
  /** The connect string of every member, `127.0.0.1:PORT,...`. */
  readonly connect: string;
  readonly members: LocalService[];
  /** With `peerLinks`: the relays between the servers (cut one off, make one lag). */
  readonly links: PeerLinks | undefined;
  /** The 0-based index of the member that leads now (`srvr` says `Mode: leader`), or undefined. */
  leader(): Promise<number | undefined>;
  stop(): Promise<void>;
}

/** Options of {@link startZooKeeper}. */
export interface ZooKeeperOptions {
  /** 1 (default): a standalone server; more: an ensemble. */
  members?: number;
  /**
   * An ensemble's servers reach each other through relays (harness/sandbox/zookeeper-peer-links.ts), so that
   * one can be cut off from its peers while its clients still reach it (default false).
   */
  peerLinks?: boolean;
  /**
   * Ticks (500 ms) a follower waits for its leader, and the leader for a follower, before giving up
   * (default 10: 5 s).
   */
  syncLimit?: number;
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
export async function startZooKeeper(opts: ZooKeeperOptions = {}): Promise<LocalZooKeeper> {
  const java = requireBinary('java', 'default-jre-headless');
  if (!existsSync(ZOOKEEPER_JAR))
    throw new MissingBinaryError(
      `${ZOOKEEPER_JAR} not found: install it with \`apt-get update && apt-get install -y zookeeper\``,
    );
  return withPortRetry(() => startEnsemble(java, opts));
}

async function startEnsemble(java: string, opts: ZooKeeperOptions): Promise<LocalZooKeeper> {
  const n = opts.members ?? 1;
  const ports: { client: number; peer: number; election: number }[] = [];
  for (let i = 0; i < n; i++)
    ports.push({ client: await freePort(), peer: await freePort(), election: await freePort() });
  const links = n > 1 && opts.peerLinks ? await startPeerLinks(ports) : undefined;
  /** Server `i`'s `server.N` lines: itself on its own ports; its peers directly, or through their relays. */
  const serversFor = (i: number) =>
    ports.map((p, j) => {
      if (!links) return `server.${j + 1}=127.0.0.1:${p.peer}:${p.election}`;
      if (j === i) return `server.${j + 1}=0.0.0.0:${p.peer}:${p.election}`;
      const r = links.portsFor(i, j);
      return `server.${j + 1}=127.0.0.1:${r.quorum}:${r.election}`;
    });
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
        `syncLimit=${opts.syncLimit ?? 10}`,
        'minSessionTimeout=1000',
        'maxSessionTimeout=60000',
        `dataDir=${data}`,
        `clientPort=${p.client}`,
        'clientPortAddress=127.0.0.1',
        '4lw.commands.whitelist=srvr,ruok,cons',
        'admin.enableServer=false',
        ...(n > 1 ? serversFor(i) : []),
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
        // A server whose election found no peer (they were still starting: a restart of the whole ensemble)
        // looks again every 2 s at most, not after up to 60 s (ZooKeeper's default backoff).
        ...(n > 1 ? ['-Dzookeeper.fastleader.maxNotificationInterval=2000'] : []),
        '-cp',
        `/etc/zookeeper/conf:${ZOOKEEPER_JAR}`,
        'org.apache.zookeeper.server.quorum.QuorumPeerMain',
        cfg,
      ],
      ready: serving,
      // An ensemble serves once its members have elected a leader: on a busy machine, with the election's
      // backoff between rounds, that can take longer than one server's start.
      readyTimeoutMs: n > 1 ? 60_000 : undefined,
    });
  });
  const started = await Promise.allSettled(members.map((m) => m.start()));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    await Promise.all(members.map((m) => m.stop()));
    await links?.close();
    throw failed.reason;
  }
  return {
    connect: ports.map((p) => `127.0.0.1:${p.client}`).join(','),
    members,
    links,
    async leader() {
      const modes = await Promise.all(members.map((m) => fourLetters(m.port, 'srvr')));
      const i = modes.findIndex((m) => /Mode: (leader|standalone)/.test(m));
      return i < 0 ? undefined : i;
    },
    async stop() {
      await Promise.all(members.map((m) => m.stop()));
      await links?.close();
    },
  };
}
