/**
 * The nemesis's world: real Redis, a real etcd behind the answer-losing proxy (etcd-proxy.ts), the sandbox
 * API server, and replica slots — each a real `spark-driver-cleaner run` process behind a recording HTTP
 * proxy of its own (which replica sent which request), restartable under the same identity (a container
 * restart), one of them under libfaketime.
 */
import { Etcd3 } from 'etcd3';
import type { SandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import type { LocalEtcd, LocalService } from '../../harness/sandbox/local-services.ts';
import { type LocalRedisCluster, startRedisCluster } from '../../harness/sandbox/redis-cluster.ts';
import { type LocalRedisSentinel, startRedisSentinel } from '../../harness/sandbox/redis-sentinel.ts';
import { type ReplicaProcess, spawnReplica } from '../../harness/sandbox/replica-process.ts';
import { electionPrefix } from '../../src/queue/job-identity.ts';
import { type ApiProxy, startApiProxy } from '../failure/helpers.ts';
import type { EtcdProxy } from './etcd-proxy.ts';
import { createFakeClock, type FakeClock } from './faketime.ts';
import { type FrontedEtcd, type FrontedRedis, startFrontedEtcd, startFrontedRedis } from './fronts.ts';
import type { RedisMode } from './schedule.ts';

/** One replica's place in the world: its identity, proxy and clock outlive its processes. */
export interface ReplicaSlot {
  /** `r0`, `r1`, …: the replica id (SDC_REPLICA_ID) of every process of the slot. */
  readonly id: string;
  /** The slot's recording proxy in front of the sandbox API server. */
  readonly proxy: ApiProxy;
  /** The slot's wall clock, when it runs under libfaketime. */
  readonly clock: FakeClock | undefined;
  /** The process running now; undefined between a kill and the restart. */
  readonly current: ReplicaProcess | undefined;
  /** True between SIGSTOP and SIGCONT. */
  frozen: boolean;
  /** True while a process fault (kill, freeze, termination and restart) is on this slot. */
  busy: boolean;
  /** Every process the slot ran, oldest first. */
  readonly generations: readonly ReplicaProcess[];
  /** Sends a signal to the current process and remembers it (so that its exit can be told from a crash). */
  signal(sig: NodeJS.Signals): void;
  /** The signals the nemesis sent to one process, in order. */
  signalsOf(proc: ReplicaProcess): readonly NodeJS.Signals[];
  /** Starts a new process (the previous one must have exited). */
  start(): ReplicaProcess;
  /** Forgets the current process (after it exited). */
  exited(): void;
}

/** Options of {@link startNemesisWorld}. */
export interface NemesisWorldOptions {
  /** Context name of the sandbox API server. */
  context: string;
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
}

/** The running world. */
export interface NemesisWorld {
  /** Context name of the sandbox API server. */
  readonly context: string;
  readonly redisMode: RedisMode;
  /** Single mode: the redis-server process now (a restart moves it to a fresh port). */
  readonly redis: LocalService | undefined;
  /** Single mode: Redis behind its TCP relay: the replicas connect to the relay only. */
  readonly redisFront: FrontedRedis | undefined;
  /** Sentinel mode: the Sentinel setup, which the replicas find through its sentinels. */
  readonly sentinel: LocalRedisSentinel | undefined;
  /** Cluster mode: the Redis Cluster, which the replicas find from its initial masters. */
  readonly redisCluster: LocalRedisCluster | undefined;
  /** The etcd member now (a restart moves it to fresh ports). */
  readonly etcd: LocalEtcd;
  /** etcd behind its proxy: the replicas connect to the proxy only. */
  readonly etcdFront: FrontedEtcd;
  readonly etcdProxy: EtcdProxy;
  readonly server: SandboxApiServer;
  readonly slots: readonly ReplicaSlot[];
  /**
   * The slot leading a namespace's target now, read from etcd itself (the candidate key with the lowest
   * create revision); undefined when etcd does not answer within a second or nobody campaigns.
   */
  leaderOf(namespace: string): Promise<ReplicaSlot | undefined>;
  /** Kills every process, closes the proxies and the server, stops Redis and etcd. */
  stop(): Promise<void>;
}

/** Starts the services, the proxies and one process per slot. */
export async function startNemesisWorld(opts: NemesisWorldOptions): Promise<NemesisWorld> {
  const redisMode = opts.redisMode ?? 'single';
  const [redisFront, sentinel, redisCluster, etcdFront, server] = await Promise.all([
    redisMode === 'single' ? startFrontedRedis() : undefined,
    redisMode === 'sentinel'
      ? startRedisSentinel({ replicas: 2, sentinels: 3, downAfterMs: 2000 })
      : undefined,
    redisMode === 'cluster' ? startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 2000 }) : undefined,
    startFrontedEtcd(),
    startSandboxApiServer({ contextName: opts.context }),
  ]);
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
  const etcd = etcdFront.etcd;
  const etcdProxy = etcdFront.proxy;
  const slots: ReplicaSlot[] = [];
  for (let i = 0; i < opts.replicas; i++) {
    const proxy = await startApiProxy(server);
    const clock = i === opts.fakedReplica ? createFakeClock() : undefined;
    const id = `r${i}`;
    const generations: ReplicaProcess[] = [];
    const signals = new Map<ReplicaProcess, NodeJS.Signals[]>();
    let current: ReplicaProcess | undefined;
    const slot: ReplicaSlot = {
      id,
      proxy,
      clock,
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
      start() {
        if (current && current.child.exitCode === null && current.child.signalCode === null)
          throw new Error(`${id}: start() while its process ${current.pid} still runs`);
        current = spawnReplica({
          id,
          env: {
            KUBECONFIG: proxy.kubeconfigPath,
            ...redisEnv,
            SDC_ETCD_ENDPOINTS: etcdProxy.url,
            SDC_HTTP_PORT: '0',
            SDC_LOG_LEVEL: 'debug',
            ...opts.replicaEnv,
            ...clock?.env,
          },
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
  let etcdClient = new Etcd3({ hosts: [...etcd.endpoints], dialTimeout: 1000 });
  let clientEndpoints = etcd.endpoints.join(',');
  const harnessEtcd = () => {
    if (etcd.endpoints.join(',') !== clientEndpoints) {
      etcdClient.close();
      clientEndpoints = etcd.endpoints.join(',');
      etcdClient = new Etcd3({ hosts: [...etcd.endpoints], dialTimeout: 1000 });
    }
    return etcdClient;
  };
  return {
    context: opts.context,
    redisMode,
    redis,
    redisFront,
    sentinel,
    redisCluster,
    etcd,
    etcdFront,
    etcdProxy,
    server,
    slots,
    async leaderOf(namespace) {
      const read = harnessEtcd()
        .namespace(electionPrefix({ context: opts.context, namespace }))
        .getAll()
        .sort('Create', 'Ascend')
        .limit(1)
        .exec();
      const timeout = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000).unref());
      const res = await Promise.race([read.catch(() => undefined), timeout]);
      const id = res?.kvs[0]?.value.toString();
      return slots.find((s) => s.id === id);
    },
    async stop() {
      etcdClient.close();
      for (const s of slots) {
        s.current?.kill('SIGCONT');
        s.current?.kill('SIGKILL');
      }
      await Promise.all(slots.flatMap((s) => (s.current ? [s.current.exited] : [])));
      await Promise.all(slots.map((s) => s.proxy.close()));
      await server.close();
      await Promise.all([redisFront?.stop(), sentinel?.stop(), redisCluster?.stop(), etcdFront.stop()]);
    },
  };
}
