/**
 * The nemesis's world: real Redis, a real etcd behind the answer-losing proxy (etcd-proxy.ts) or a real
 * three-server ZooKeeper ensemble behind its answer-losing relays (zookeeper-proxy.ts), the sandbox
 * API server, and replica slots — each a real `spark-driver-cleaner run` process behind a recording HTTP
 * proxy of its own (which replica sent which request) and, with one Redis server, a TCP relay of its own to it
 * (its own path to Redis, which a fault can cut while the others' work), restartable under the same identity
 * (a container restart), one of them under libfaketime.
 *
 * With `clusters: 2`, two sandbox API servers stand for two clusters whose kubeconfigs name their context the
 * same, with the same namespaces, sharing the one Redis and the one etcd or ZooKeeper; slot i belongs to
 * cluster i mod 2. API faults go to the first cluster's server.
 */
import { Etcd3 } from 'etcd3';
import type { SandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import type { LocalEtcd, LocalService } from '../../harness/sandbox/local-services.ts';
import { type LocalRedisCluster, startRedisCluster } from '../../harness/sandbox/redis-cluster.ts';
import { type LocalRedisSentinel, startRedisSentinel } from '../../harness/sandbox/redis-sentinel.ts';
import { type ReplicaProcess, spawnReplica } from '../../harness/sandbox/replica-process.ts';
import { createZkHandle } from '../../src/leadership/zookeeper/client.ts';
import { ZOOKEEPER_DEFAULT_ROOT } from '../../src/leadership/zookeeper/session.ts';
import { parseCandidateName } from '../../src/leadership/zookeeper/view.ts';
import { electionPrefix, zookeeperElectionPrefix } from '../../src/queue/job-identity.ts';
import { type ApiProxy, startApiProxy } from '../failure/helpers.ts';
import type { EtcdProxy } from './etcd-proxy.ts';
import { createFakeClock, type FakeClock } from './faketime.ts';
import {
  type FrontedEtcd,
  type FrontedRedis,
  type FrontedZooKeeper,
  startFrontedEtcd,
  startFrontedRedis,
  startFrontedZooKeeper,
} from './fronts.ts';
import type { Leadership, RedisMode } from './schedule.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

/** One replica's place in the world: its identity, proxy and clock outlive its processes. */
export interface ReplicaSlot {
  /** `r0`, `r1`, …: the replica id (SDC_REPLICA_ID) of every process of the slot. */
  readonly id: string;
  /** The index of its cluster in {@link NemesisWorld.servers} (0 in a one-cluster world). */
  readonly cluster: number;
  /** The slot's recording proxy in front of the sandbox API server. */
  readonly proxy: ApiProxy;
  /** The slot's wall clock, when it runs under libfaketime. */
  readonly clock: FakeClock | undefined;
  /**
   * Single mode: the slot's own relay to Redis (to the shared relay in front of the server), which
   * `redis-path-cut` wedges or refuses.
   */
  readonly redisPath: TcpProxy | undefined;
  /**
   * Its path to Redis is cut until the run is judged: no process fault hits it any more (a restarted process
   * would forget that it stepped down).
   */
  cutForGood: boolean;
  /** The process running now; undefined between a kill and the restart. */
  readonly current: ReplicaProcess | undefined;
  /** True between SIGSTOP and SIGCONT. */
  frozen: boolean;
  /** True while a process fault (kill, freeze, termination and restart) is on this slot. */
  busy: boolean;
  /** Every process the slot ran, oldest first. */
  readonly generations: readonly ReplicaProcess[];
  /**
   * When a process of the slot ran (sandbox clock, epoch ms: from its spawn to its exit, open while it runs)
   * and the SDC_* settings it ran with beyond the fleet's (`retention-change`).
   */
  lifeOf(proc: ReplicaProcess): { startedAtMs: number; exitedAtMs?: number; env: Record<string, string> };
  /** Sends a signal to the current process and remembers it (so that its exit can be told from a crash). */
  signal(sig: NodeJS.Signals): void;
  /** The signals the nemesis sent to one process, in order. */
  signalsOf(proc: ReplicaProcess): readonly NodeJS.Signals[];
  /** Starts a new process (the previous one must have exited), with `env` over the fleet's settings. */
  start(env?: Record<string, string>): ReplicaProcess;
  /** Forgets the current process (after it exited). */
  exited(): void;
}

/** Options of {@link startNemesisWorld}. */
export interface NemesisWorldOptions {
  /** Context name of the sandbox API server. */
  context: string;
  /** The targets' namespaces (in that context). */
  namespaces: readonly string[];
  replicas: number;
  /** The slot that runs under libfaketime. */
  fakedReplica: number;
  /** SDC_* settings of every replica (targets, retention, TTL, …). */
  replicaEnv: Record<string, string>;
  /**
   * The Redis the replicas use (default `single`): one server behind a relay; a Sentinel setup (1 master,
   * 2 replicas, 3 sentinels, down-after 2 s); or a Cluster (3 masters with a replica each, node timeout 2 s).
   */
  redisMode?: RedisMode;
  /** The leadership backend (default `etcd`): etcd, or a three-server ZooKeeper ensemble (its default root). */
  leadership?: Leadership;
  /** Clusters (sandbox API servers) sharing the Redis and the leadership store (default 1). */
  clusters?: 1 | 2;
}

/** The running world. */
export interface NemesisWorld {
  /** Context name of the sandbox API server. */
  readonly context: string;
  /** The targets' namespaces. */
  readonly namespaces: readonly string[];
  readonly redisMode: RedisMode;
  readonly leadership: Leadership;
  /** Single mode: the redis-server process now (a restart moves it to a fresh port). */
  readonly redis: LocalService | undefined;
  /** Single mode: Redis behind its TCP relay: the replicas connect to the relay only. */
  readonly redisFront: FrontedRedis | undefined;
  /** Sentinel mode: the Sentinel setup, which the replicas find through its sentinels. */
  readonly sentinel: LocalRedisSentinel | undefined;
  /** Cluster mode: the Redis Cluster, which the replicas find from its initial masters. */
  readonly redisCluster: LocalRedisCluster | undefined;
  /** On etcd: the etcd member now (a restart moves it to fresh ports). */
  readonly etcd: LocalEtcd | undefined;
  /** On etcd: etcd behind its proxy: the replicas connect to the proxy only. */
  readonly etcdFront: FrontedEtcd | undefined;
  readonly etcdProxy: EtcdProxy | undefined;
  /** On ZooKeeper: the ensemble behind its relays: the replicas connect to the relays only. */
  readonly zookeeperFront: FrontedZooKeeper | undefined;
  /** The first cluster's sandbox API server (the API faults' target). */
  readonly server: SandboxApiServer;
  /** Every cluster's server, by cluster index. */
  readonly servers: readonly SandboxApiServer[];
  readonly slots: readonly ReplicaSlot[];
  /**
   * The slot leading a namespace's target of cluster `cluster` (default 0) now, read from the store itself
   * (etcd: the candidate key with the lowest create revision; ZooKeeper: the candidate node with the lowest
   * sequence); undefined when the store does not answer within a second or nobody campaigns.
   */
  leaderOf(namespace: string, cluster?: number): Promise<ReplicaSlot | undefined>;
  /**
   * A namespace's candidates in cluster `cluster` (default 0), leader first, read from the store itself, e.g.
   * `r1 (rev 12, lease 7)` or `r1 (_c_…-r1-latch-0000000004)`. @throws when the store does not answer
   * within a second.
   */
  candidates(namespace: string, cluster?: number): Promise<string[]>;
  /**
   * On ZooKeeper: a reader of every target's leader (its first candidate's replica id, undefined when none) on
   * one session of its own with a server that serves and is not cut off, for frequent reads (each answered
   * within a second, or rejected); undefined when no such server answers within 5 s. Close it after use.
   */
  zookeeperLeaders(): Promise<
    { read(namespace: string): Promise<string | undefined>; close(): void } | undefined
  >;
  /** Kills every process, closes the proxies and the server, stops Redis and etcd. */
  stop(): Promise<void>;
}

/** Starts the services, the proxies and one process per slot. */
export async function startNemesisWorld(opts: NemesisWorldOptions): Promise<NemesisWorld> {
  const redisMode = opts.redisMode ?? 'single';
  const leadership = opts.leadership ?? 'etcd';
  const [redisFront, sentinel, redisCluster, etcdFront, zookeeperFront, server, second] = await Promise.all([
    redisMode === 'single' ? startFrontedRedis() : undefined,
    redisMode === 'sentinel'
      ? startRedisSentinel({ replicas: 2, sentinels: 3, downAfterMs: 2000 })
      : undefined,
    redisMode === 'cluster' ? startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 2000 }) : undefined,
    leadership === 'etcd' ? startFrontedEtcd() : undefined,
    leadership === 'zookeeper' ? startFrontedZooKeeper(opts.replicas) : undefined,
    startSandboxApiServer({ contextName: opts.context }),
    opts.clusters === 2 ? startSandboxApiServer({ contextName: opts.context }) : undefined,
  ]);
  const servers = second ? [server, second] : [server];
  const redis = redisFront?.service;
  const redisEnv: Record<string, string> = redisFront
    ? { SDC_REDIS_URL: redisFront.url }
    : sentinel
      ? {
          SDC_REDIS_MODE: 'sentinel',
          SDC_REDIS_SENTINELS: sentinel.sentinels.map((x) => `${x.host}:${x.port}`).join(','),
          SDC_REDIS_MASTER_NAME: sentinel.masterName,
        }
      : {
          SDC_REDIS_MODE: 'cluster',
          SDC_REDIS_CLUSTER_NODES: (redisCluster?.nodes ?? []).map((n) => `${n.host}:${n.port}`).join(','),
        };
  const etcd = etcdFront?.etcd;
  const etcdProxy = etcdFront?.proxy;
  /** A slot's leadership settings: on ZooKeeper, its own relays (the harness can choose its server). */
  const leadershipEnv = (slot: number): Record<string, string> =>
    zookeeperFront
      ? { SDC_ZOOKEEPER: zookeeperFront.connectFor(slot), SDC_ETCD_ENDPOINTS: '' }
      : { SDC_ETCD_ENDPOINTS: etcdProxy?.url ?? '' };
  const slots: ReplicaSlot[] = [];
  for (let i = 0; i < opts.replicas; i++) {
    const cluster = i % servers.length;
    const proxy = await startApiProxy(servers[cluster] as SandboxApiServer);
    const clock = i === opts.fakedReplica ? createFakeClock() : undefined;
    const redisPath = redisFront ? await startTcpProxy(redisFront.proxy.port) : undefined;
    const slotRedisEnv = redisPath ? { SDC_REDIS_URL: `redis://127.0.0.1:${redisPath.port}` } : redisEnv;
    const id = `r${i}`;
    const generations: ReplicaProcess[] = [];
    const signals = new Map<ReplicaProcess, NodeJS.Signals[]>();
    const lives = new Map<
      ReplicaProcess,
      { startedAtMs: number; exitedAtMs?: number; env: Record<string, string> }
    >();
    let current: ReplicaProcess | undefined;
    const slot: ReplicaSlot = {
      id,
      cluster,
      proxy,
      clock,
      redisPath,
      cutForGood: false,
      frozen: false,
      busy: false,
      get current() {
        return current;
      },
      generations,
      signal(sig) {
        if (!current) return;
        signals.set(current, [...(signals.get(current) ?? []), sig]);
        current.kill(sig);
      },
      signalsOf: (proc) => signals.get(proc) ?? [],
      lifeOf: (proc) => lives.get(proc) ?? { startedAtMs: 0, env: {} },
      start(env = {}) {
        if (current && current.child.exitCode === null && current.child.signalCode === null)
          throw new Error(`${id}: start() while its process ${current.pid} still runs`);
        current = spawnReplica({
          id,
          env: {
            ...proxy.env,
            ...slotRedisEnv,
            ...leadershipEnv(i),
            SDC_HTTP_PORT: '0',
            SDC_LOG_LEVEL: 'debug',
            ...opts.replicaEnv,
            ...env,
            ...clock?.env,
          },
        });
        const life: { startedAtMs: number; exitedAtMs?: number; env: Record<string, string> } = {
          startedAtMs: server.clock.now(),
          env,
        };
        lives.set(current, life);
        void current.exited.then(() => {
          life.exitedAtMs = server.clock.now();
        });
        generations.push(current);
        return current;
      },
      exited() {
        current = undefined;
      },
    };
    slot.start();
    slots.push(slot);
  }
  // The harness's own etcd client, straight to etcd (not through the proxy that loses answers); a new one
  // when etcd moved to another port.
  let etcdClient: Etcd3 | undefined;
  let clientEndpoints = '';
  const harnessEtcd = (e: LocalEtcd) => {
    if (!etcdClient || e.endpoints.join(',') !== clientEndpoints) {
      etcdClient?.close();
      clientEndpoints = e.endpoints.join(',');
      etcdClient = new Etcd3({ hosts: [...e.endpoints], dialTimeout: 1000 });
    }
    return etcdClient;
  };
  const within = <T>(ms: number, p: Promise<T>): Promise<T> =>
    Promise.race([
      p,
      new Promise<T>((_, reject) =>
        setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref(),
      ),
    ]);
  const candidates = async (namespace: string, cluster = 0): Promise<{ id: string; text: string }[]> => {
    const target = { cluster: (servers[cluster] ?? server).clusterName, context: opts.context, namespace };
    if (zookeeperFront) {
      // Straight to a server (not through the relays that lose answers) that serves and is not cut off (the
      // leader when it can), one short-lived handle a read; never while the ensemble is down (a client retrying
      // against a closed port may connect to itself there and take the port a server restarts on).
      if (!zookeeperFront.up) throw new Error('ZooKeeper is down');
      const dir = zookeeperElectionPrefix(ZOOKEEPER_DEFAULT_ROOT, target).replace(/\/$/, '');
      const server = await zookeeperFront.readableServer();
      if (!server) throw new Error('no ZooKeeper server serves');
      const names = await zkChildren(server, dir, 1000);
      const seq = (n: string) => Number(/-latch-(\d+)$/.exec(n)?.[1] ?? Number.POSITIVE_INFINITY);
      return names
        .sort((a, b) => seq(a) - seq(b))
        .map((n) => ({ id: /^_c_[0-9a-f-]{36}-(.*)-latch-\d+$/.exec(n)?.[1] ?? n, text: n }));
    }
    if (!etcd) return [];
    const res = await within(
      1000,
      harnessEtcd(etcd).namespace(electionPrefix(target)).getAll().sort('Create', 'Ascend').exec(),
    );
    return res.kvs.map((kv) => ({
      id: kv.value.toString(),
      text: `rev ${kv.create_revision}, lease ${kv.lease}`,
    }));
  };
  return {
    context: opts.context,
    namespaces: opts.namespaces,
    redisMode,
    leadership,
    redis,
    redisFront,
    sentinel,
    redisCluster,
    etcd,
    etcdFront,
    etcdProxy,
    zookeeperFront,
    server,
    servers,
    slots,
    async leaderOf(namespace, cluster = 0) {
      const id = (await candidates(namespace, cluster).catch(() => []))[0]?.id;
      return slots.find((s) => s.id === id && s.cluster === cluster);
    },
    async candidates(namespace, cluster = 0) {
      return (await candidates(namespace, cluster)).map((c) => `${c.id} (${c.text})`);
    },
    async zookeeperLeaders() {
      const zk = zookeeperFront?.up ? await zookeeperFront.readableServer() : undefined;
      if (!zk) return undefined;
      const h = createZkHandle(zk, 4000);
      const ready = new Promise<boolean>((resolve) => {
        h.on('connect', () => resolve(true));
        setTimeout(() => resolve(false), 5000).unref();
      });
      h.init({});
      if (!(await ready)) {
        h.close();
        return undefined;
      }
      return {
        async read(namespace) {
          // The first cluster's elections (the leaders the stale-leader check judges).
          const dir = zookeeperElectionPrefix(ZOOKEEPER_DEFAULT_ROOT, {
            cluster: server.clusterName,
            context: opts.context,
            namespace,
          }).replace(/\/$/, '');
          const names = await within(1000, h.get_children(dir, false));
          return names
            .map((n) => parseCandidateName(dir, n))
            .filter((n) => n !== undefined)
            .sort((a, b) => a.sequence - b.sequence)[0]?.replicaId;
        },
        close: () => h.close(),
      };
    },
    async stop() {
      etcdClient?.close();
      for (const s of slots) {
        s.current?.kill('SIGCONT');
        s.current?.kill('SIGKILL');
      }
      await Promise.all(slots.flatMap((s) => (s.current ? [s.current.exited] : [])));
      await Promise.all(slots.map((s) => s.proxy.close()));
      await Promise.all(slots.map((s) => s.redisPath?.close()));
      await Promise.all(servers.map((x) => x.close()));
      await Promise.all([
        redisFront?.stop(),
        sentinel?.stop(),
        redisCluster?.stop(),
        etcdFront?.stop(),
        zookeeperFront?.stop(),
      ]);
    },
  };
}

/**
 * A node's children, read with a handle of its own, closed after (or after `timeoutMs`, the server down).
 * @throws when the read fails or does not finish within `timeoutMs`.
 */
async function zkChildren(connect: string, path: string, timeoutMs: number): Promise<string[]> {
  const h = createZkHandle(connect, 4000);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  const ready = new Promise<void>((resolve) => h.on('connect', () => resolve()));
  h.init({});
  try {
    return await Promise.race([ready.then(() => h.get_children(path, false)), timeout]);
  } finally {
    clearTimeout(timer);
    h.close();
  }
}
