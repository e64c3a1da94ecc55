/**
 * Redis, etcd and ZooKeeper behind stable front addresses for the nemesis: the replicas only know the proxies'
 * ports, and a restart starts the service on FRESH free ports (ZooKeeper: on its own, which its ensemble's
 * configuration names) and repoints its proxy. On a shared machine
 * another process may take a service's port while it is down; restarting on the port it had then failed
 * ("address already in use", "did not become ready") and the run had no verdict.
 */
import {
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../../harness/sandbox/local-services.ts';
import { fourLetters, type LocalZooKeeper, startZooKeeper } from '../../harness/sandbox/local-zookeeper.ts';
import { type EtcdProxy, startEtcdProxy } from './etcd-proxy.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';
import { createDropFault, startZooKeeperProxy, type ZooKeeperDropSpec } from './zookeeper-proxy.ts';

/** Redis behind a TCP relay. */
export interface FrontedRedis {
  /** The redis-server process now (its port changes at each restart). */
  readonly service: LocalService;
  readonly proxy: TcpProxy;
  /** `redis://127.0.0.1:PORT` of the proxy: what the replicas get. */
  readonly url: string;
  /**
   * A new, empty redis-server on a fresh port (retried once on another), then the proxy points to it; the
   * clients' connections are closed and they reconnect through the proxy.
   * @throws when neither start succeeded (the proxy then refuses connections).
   */
  restartEmpty(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts redis-server and its relay. */
export async function startFrontedRedis(): Promise<FrontedRedis> {
  const service = await startRedis();
  const proxy = await startTcpProxy(service.port);
  return {
    service,
    proxy,
    url: `redis://127.0.0.1:${proxy.port}`,
    async restartEmpty() {
      proxy.repoint(undefined);
      await service.restartOnFreshPort();
      proxy.repoint(service.port);
    },
    async stop() {
      await proxy.close();
      await service.stop();
    },
  };
}

/** One etcd member behind the answer-losing HTTP/2 proxy. */
export interface FrontedEtcd {
  readonly etcd: LocalEtcd;
  readonly proxy: EtcdProxy;
  /** SIGKILL the member; the proxy refuses connections until {@link FrontedEtcd.restart}. */
  kill(): Promise<void>;
  /**
   * Starts the member again on its data dir, on fresh client and peer ports (retried once on others), then
   * points the proxy at it.
   * @throws when neither start succeeded (the proxy then refuses connections).
   */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts a one-member etcd and its proxy. */
export async function startFrontedEtcd(): Promise<FrontedEtcd> {
  const etcd = await startEtcd();
  const member = etcd.members[0];
  if (!member) throw new Error('no etcd member');
  const proxy = await startEtcdProxy(member.url);
  return {
    etcd,
    proxy,
    async kill() {
      proxy.repoint(undefined);
      await member.kill();
    },
    async restart() {
      proxy.repoint(undefined);
      await member.restartOnFreshPort();
      proxy.repoint(member.url);
    },
    async stop() {
      await proxy.close();
      await etcd.stop();
    },
  };
}

/** The ensemble's `tickTime` × `syncLimit`: how long a cut-off follower goes on answering its clients, ms. */
export const ZOOKEEPER_SYNC_LIMIT_MS = 20 * 500;

/**
 * A three-server ZooKeeper ensemble, each replica slot reaching each server through an answer-losing relay of
 * its own (zookeeper-proxy.ts) — so that the harness can choose which server a replica is on — and the servers'
 * links to one another through relays too (harness/sandbox/zookeeper-peer-links.ts). A follower gives up on
 * its leader after 10 s ({@link ZOOKEEPER_SYNC_LIMIT_MS}), well past the replicas' 3 s sessions: cut off from
 * its peers, it goes on answering its clients from what it has that long.
 */
export interface FrontedZooKeeper {
  readonly zookeeper: LocalZooKeeper;
  /** The connect string of replica slot `slot`: its relays, one per server. */
  connectFor(slot: number): string;
  /** False from a kill until every server serves again. */
  readonly up: boolean;
  /** Creates seen and create answers lost, over every relay (for the report). */
  readonly stats: { creates: number; dropped: number };
  /** SIGKILL every server; the relays refuse connections until {@link FrontedZooKeeper.restart}. */
  kill(): Promise<void>;
  /**
   * Starts every server again on its data dir and ports (its configuration names them), then points the relays
   * at them: the sessions they had are in their snapshots and live on if their clients come back in time.
   * @throws when a start failed (the relays then refuse connections).
   */
  restart(): Promise<void>;
  /** Loses up to `spec.count` create answers in all, on whichever relays the creates go through. */
  dropAnswers(spec: ZooKeeperDropSpec): Promise<number>;
  /**
   * Lets slot `slot` reach only `servers` (its connections to the others are closed, new ones refused), or
   * every server again (undefined; open connections stay where they are).
   */
  pin(slot: number, servers: readonly number[] | undefined): void;
  /** Connections slot `slot` has open to server `server` now. */
  connectionsOf(slot: number, server: number): number;
  /** Cuts server `i` off from its peers, silently; its clients still reach it. */
  isolate(i: number): void;
  /** Ends every cut. */
  heal(): void;
  /** The servers that serve as followers and are not cut off, by index. */
  followers(): Promise<number[]>;
  /** A server that serves and is not cut off (the leader if it can), `127.0.0.1:PORT`; undefined if none. */
  readableServer(): Promise<string | undefined>;
  /**
   * Runs the store faults (a kill, a cut) one at a time: one that overran its plan (a slow restart) delays the
   * next instead of overlapping it — a server restarted while it is cut off could not join its ensemble.
   */
  serially<T>(fault: () => Promise<T>): Promise<T>;
  stop(): Promise<void>;
}

/** Starts a three-server ensemble and the relays of `slots` replica slots. */
export async function startFrontedZooKeeper(slots: number): Promise<FrontedZooKeeper> {
  const zookeeper = await startZooKeeper({
    members: 3,
    peerLinks: true,
    syncLimit: ZOOKEEPER_SYNC_LIMIT_MS / 500,
  });
  const servers = zookeeper.members;
  /** relays[slot][server] */
  const relays = await Promise.all(
    Array.from({ length: slots }, () => Promise.all(servers.map((m) => startZooKeeperProxy(m.port)))),
  );
  const all = relays.flat();
  const links = zookeeper.links;
  if (!links) throw new Error('the ensemble has no peer links');
  let up = true;
  let faults: Promise<unknown> = Promise.resolve();
  const modes = () =>
    Promise.all(servers.map(async (m) => /Mode: (\w+)/.exec(await fourLetters(m.port, 'srvr'))?.[1]));
  return {
    zookeeper,
    connectFor: (slot) => (relays[slot] ?? []).map((p) => p.connect).join(','),
    get up() {
      return up;
    },
    get stats() {
      return {
        creates: all.reduce((n, p) => n + p.stats.creates, 0),
        dropped: all.reduce((n, p) => n + p.stats.dropped, 0),
      };
    },
    async kill() {
      up = false;
      for (const p of all) p.repoint(undefined);
      await Promise.all(servers.map((m) => m.kill()));
    },
    async restart() {
      up = false;
      for (const p of all) p.repoint(undefined);
      // Together: each one serves only once a quorum has elected a leader.
      await Promise.all(servers.map((m) => m.restart()));
      for (const row of relays)
        row.forEach((p, i) => {
          p.repoint(servers[i]?.port);
        });
      up = true;
    },
    async dropAnswers(spec) {
      const fault = createDropFault(spec);
      for (const p of all) p.arm(fault);
      return fault.done;
    },
    pin(slot, allowed) {
      (relays[slot] ?? []).forEach((p, i) => {
        p.block(allowed !== undefined && !allowed.includes(i));
      });
    },
    connectionsOf: (slot, server) => relays[slot]?.[server]?.open ?? 0,
    isolate: (i) => links.isolate(i),
    heal: () => links.heal(),
    async followers() {
      const now = await modes();
      return now.flatMap((mode, i) => (mode === 'follower' && !links.isolated(i) ? [i] : []));
    },
    async readableServer() {
      const now = await modes();
      const ok = (i: number) => (now[i] === 'leader' || now[i] === 'follower') && !links.isolated(i);
      const i = [now.indexOf('leader'), 0, 1, 2].find((x) => x >= 0 && ok(x));
      return i === undefined ? undefined : `127.0.0.1:${servers[i]?.port}`;
    },
    serially(fault) {
      const next = faults.then(fault, fault);
      faults = next.catch(() => undefined);
      return next;
    },
    async stop() {
      await Promise.all(all.map((p) => p.close()));
      await zookeeper.stop();
    },
  };
}
