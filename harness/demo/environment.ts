/**
 * The demo's infrastructure: Redis and etcd or ZooKeeper (real local processes on free ports, or existing
 * ones named by REDIS_URL / ETCD_ENDPOINTS / ZOOKEEPER), and two sandbox Kubernetes API servers standing for two clusters,
 * `cluster-a` and `cluster-b`, each with two namespaces of Spark drivers, in one merged kubeconfig.
 */
import { join } from 'node:path';
import { type SandboxApiServer, startSandboxApiServer } from '../sandbox/apiserver/server.ts';
import { startEtcd, startRedis } from '../sandbox/local-services.ts';
import { startZooKeeper } from '../sandbox/local-zookeeper.ts';
import type { Teardown } from './teardown.ts';

/** The demo's clusters (kubeconfig contexts) and their namespaces: four targets. */
export const DEMO_CLUSTERS: readonly { context: string; namespaces: readonly string[] }[] = [
  { context: 'cluster-a', namespaces: ['spark-etl', 'spark-adhoc'] },
  { context: 'cluster-b', namespaces: ['spark-ml', 'spark-reports'] },
];

/** Where the replicas elect their leaders: etcd, or ZooKeeper (`--leadership`). */
export type DemoLeadership = 'etcd' | 'zookeeper';

/** Where the coordinated replicas find Redis and etcd or ZooKeeper. */
export interface DemoServices {
  redisUrl: string;
  /** On etcd: its endpoints; on ZooKeeper: []. */
  etcdEndpoints: string[];
  /** On ZooKeeper: its connect string `127.0.0.1:PORT`; on etcd: undefined. */
  zookeeper?: string;
  /** What the demo launched itself (for the start message). */
  launched: string[];
}

/**
 * Uses `env.REDIS_URL` / `env.ETCD_ENDPOINTS` (on etcd) / `env.ZOOKEEPER` (on ZooKeeper) when set, else
 * starts `redis-server` / `etcd` / a standalone ZooKeeper server and registers their stop on `teardown`.
 * @throws MissingBinaryError (its message has the install command) when a needed binary is absent.
 */
export async function startServices(
  teardown: Teardown,
  env: Readonly<Record<string, string | undefined>>,
  leadership: DemoLeadership = 'etcd',
): Promise<DemoServices> {
  const redisUrl = env.REDIS_URL || undefined;
  const etcdEndpoints = env.ETCD_ENDPOINTS?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const zookeeperConnect = env.ZOOKEEPER?.trim() || undefined;
  const onEtcd = leadership === 'etcd';
  const [redis, etcd, zookeeper] = await Promise.allSettled([
    redisUrl ? Promise.resolve(undefined) : startRedis(),
    !onEtcd || etcdEndpoints?.length ? Promise.resolve(undefined) : startEtcd(),
    onEtcd || zookeeperConnect ? Promise.resolve(undefined) : startZooKeeper(),
  ]);
  if (redis.status === 'fulfilled' && redis.value) {
    const r = redis.value;
    teardown.add('redis-server', () => r.stop());
  }
  if (etcd.status === 'fulfilled' && etcd.value) {
    const e = etcd.value;
    teardown.add('etcd', () => e.stop());
  }
  if (zookeeper.status === 'fulfilled' && zookeeper.value) {
    const z = zookeeper.value;
    teardown.add('zookeeper', () => z.stop());
  }
  if (redis.status === 'rejected') throw redis.reason;
  if (etcd.status === 'rejected') throw etcd.reason;
  if (zookeeper.status === 'rejected') throw zookeeper.reason;
  const launched: string[] = [];
  if (redis.value) launched.push(`redis-server ${redis.value.url}`);
  if (etcd.value) launched.push(`etcd ${etcd.value.endpoints.join(',')}`);
  if (zookeeper.value) launched.push(`zookeeper ${zookeeper.value.connect}`);
  if (!onEtcd)
    return {
      redisUrl: redisUrl ?? redis.value?.url ?? '',
      etcdEndpoints: [],
      zookeeper: zookeeperConnect ?? zookeeper.value?.connect,
      launched,
    };
  return {
    redisUrl: redisUrl ?? redis.value?.url ?? '',
    etcdEndpoints: etcdEndpoints?.length ? etcdEndpoints : (etcd.value?.endpoints ?? []),
    launched,
  };
}

/** One sandbox cluster of the demo. */
export interface DemoCluster {
  context: string;
  namespaces: readonly string[];
  server: SandboxApiServer;
}

/**
 * Starts one sandbox API server per {@link DEMO_CLUSTERS} entry, writing each kubeconfig into `dir`.
 * @returns the clusters, the `KUBECONFIG` value listing both files, and `close()` for all servers.
 */
export async function startClusters(
  dir: string,
): Promise<{ clusters: DemoCluster[]; kubeconfig: string; close(): Promise<void> }> {
  const clusters: DemoCluster[] = [];
  try {
    for (const c of DEMO_CLUSTERS) {
      const server = await startSandboxApiServer({
        contextName: c.context,
        kubeconfigOut: join(dir, `${c.context}.kubeconfig.yaml`),
      });
      clusters.push({ context: c.context, namespaces: c.namespaces, server });
    }
  } catch (err) {
    await Promise.all(clusters.map((c) => c.server.close()));
    throw err;
  }
  return {
    clusters,
    kubeconfig: clusters.map((c) => c.server.kubeconfigPath).join(':'),
    close: async () => {
      await Promise.all(clusters.map((c) => c.server.close()));
    },
  };
}
