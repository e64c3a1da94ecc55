/**
 * Redis, etcd and ZooKeeper behind stable front addresses for the nemesis: the replicas only know the proxies'
 * ports, and a restart starts the service on FRESH free ports and repoints its proxy. On a shared machine
 * another process may take a service's port while it is down; restarting on the port it had then failed
 * ("address already in use", "did not become ready") and the run had no verdict.
 */
import {
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../../harness/sandbox/local-services.ts';
import { type LocalZooKeeper, startZooKeeper } from '../../harness/sandbox/local-zookeeper.ts';
import { type EtcdProxy, startEtcdProxy } from './etcd-proxy.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';
import { startZooKeeperProxy, type ZooKeeperProxy } from './zookeeper-proxy.ts';

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

/** One ZooKeeper server behind the answer-losing relay (zookeeper-proxy.ts). */
export interface FrontedZooKeeper {
  readonly zookeeper: LocalZooKeeper;
  readonly proxy: ZooKeeperProxy;
  /** False from a kill until the restart succeeded. */
  readonly up: boolean;
  /** SIGKILL the server; the relay refuses connections until {@link FrontedZooKeeper.restart}. */
  kill(): Promise<void>;
  /**
   * Starts the server again on its data dir and port (its configuration names the port), then points the
   * relay at it: the sessions it had are in its snapshot and live on if their clients come back in time.
   * @throws when the start failed (the relay then refuses connections).
   */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts a standalone ZooKeeper server and its relay. */
export async function startFrontedZooKeeper(): Promise<FrontedZooKeeper> {
  const zookeeper = await startZooKeeper();
  const member = zookeeper.members[0];
  if (!member) throw new Error('no ZooKeeper server');
  const proxy = await startZooKeeperProxy(member.port);
  let up = true;
  return {
    zookeeper,
    proxy,
    get up() {
      return up;
    },
    async kill() {
      up = false;
      proxy.repoint(undefined);
      await member.kill();
    },
    async restart() {
      up = false;
      proxy.repoint(undefined);
      await member.restart();
      proxy.repoint(member.port);
      up = true;
    },
    async stop() {
      await proxy.close();
      await zookeeper.stop();
    },
  };
}
