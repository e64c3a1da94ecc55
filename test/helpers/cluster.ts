/**
 * The test cluster, started one way for every suite ({@link startTestServices}): real Redis (and etcd),
 * sandbox API servers (one per context) and a merged kubeconfig; {@link startTestCluster} adds replica
 * processes against them, and helpers to read the sandbox's request log.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import type { PermissionTable } from '../../harness/sandbox/apiserver/authorization.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import {
  type EtcdTlsOptions,
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../../harness/sandbox/local-services.ts';
import { type LogLine, type ReplicaProcess, spawnReplica } from '../../harness/sandbox/replica-process.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { type CleanupQueue, createCleanupQueue } from '../../src/queue/cleanup-queue.ts';
import { electionPrefix } from '../../src/queue/job-identity.ts';
import { memoryLogger } from './log.ts';

/** What {@link startTestServices} starts besides Redis. */
export interface TestServicesOptions {
  /** etcd: its members (default 1) and TLS; undefined: no etcd (single-server mode, ZooKeeper tests). */
  etcd?: { members?: number; tls?: EtcdTlsOptions };
  /** RBAC of every sandbox API server: its permission table and the token its kubeconfig carries. */
  rbac?: { permissions: PermissionTable; token: string };
}

/** The servers of a test: real Redis (and etcd), one sandbox API server per context, one kubeconfig. */
export interface TestServices {
  redis: LocalService;
  etcd: LocalEtcd | undefined;
  servers: Record<string, SandboxApiServer>;
  /** Every server's kubeconfig, as a `KUBECONFIG` list (the replicas merge them). */
  kubeconfig: string;
  /** The cluster name replicas derive for a context's server (src/kube/cluster-identity.ts). */
  clusterOf(context: string): string;
  /** Stops the servers, Redis and etcd. */
  stop(): Promise<void>;
}

/**
 * Starts the servers of a test: the one way every suite starts them (this file's {@link startTestCluster} for
 * replica processes, test/failure/helpers.ts for one context, test/ops/ops-env.ts for in-process replicas).
 */
export async function startTestServices(
  contexts: string[],
  opts: TestServicesOptions = {},
): Promise<TestServices> {
  const [redis, etcd] = await Promise.all([startRedis(), opts.etcd ? startEtcd(opts.etcd) : undefined]);
  const servers: Record<string, SandboxApiServer> = {};
  for (const name of contexts)
    servers[name] = await startSandboxApiServer({ contextName: name, ...(opts.rbac ?? {}) });
  return {
    redis,
    etcd,
    servers,
    kubeconfig: Object.values(servers)
      .map((s) => s.kubeconfigPath)
      .join(':'),
    clusterOf(context) {
      const server = servers[context];
      if (!server) throw new Error(`no sandbox server for context ${context}`);
      return server.clusterName;
    },
    async stop() {
      await Promise.all(Object.values(servers).map((s) => s.close()));
      await Promise.all([redis.stop(), etcd?.stop()]);
    },
  };
}

export interface TestCluster {
  redis: LocalService;
  etcd: LocalEtcd;
  servers: Record<string, SandboxApiServer>;
  /** One file listing every server's context (KUBECONFIG may name several files; we merge them). */
  kubeconfig: string;
  replicas: ReplicaProcess[];
  /**
   * Spawns a replica (`src/cli.ts run`) with the cluster's services; `env` overrides anything. `cliPath`:
   * another entry point (a previous release's `src/cli.ts`).
   */
  startReplica(id: string, env: Record<string, string>, cliPath?: string): ReplicaProcess;
  /** A target's cleanup queue as the replicas see it, on a Redis connection of its own. */
  queueOf(
    context: string,
    namespace: string,
    prefix: string,
  ): CleanupQueue & { redis: Redis; dispose(): Promise<void> };
  /** The replica id holding the target's leader key in etcd right now (lowest create revision). */
  leaderOf(context: string, namespace: string): Promise<string | undefined>;
  /** Kills the replicas (a frozen one is continued first), then stops the services. */
  stop(): Promise<void>;
}

/** The SDC_* environment that points a replica process at the test services (debug logs, free HTTP port). */
export function serviceEnv(kubeconfig: string, redis: LocalService, etcd: LocalEtcd): Record<string, string> {
  return {
    KUBECONFIG: kubeconfig,
    SDC_REDIS_URL: redis.url,
    SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
    SDC_HTTP_PORT: '0',
    SDC_LOG_LEVEL: 'debug',
  };
}

/**
 * Starts Redis, etcd (one member unless `opts.etcd` says otherwise) and one sandbox API server per context
 * name, and spawns replica processes against them.
 */
export async function startTestCluster(
  contexts: string[],
  opts: Omit<TestServicesOptions, 'etcd'> & { etcd?: { members?: number; tls?: EtcdTlsOptions } } = {},
): Promise<TestCluster> {
  const services = await startTestServices(contexts, { ...opts, etcd: opts.etcd ?? {} });
  const { redis, servers, kubeconfig, clusterOf } = services;
  const etcd = services.etcd as LocalEtcd;
  const replicas: ReplicaProcess[] = [];
  return {
    redis,
    etcd,
    servers,
    kubeconfig,
    replicas,
    startReplica(id, env, cliPath) {
      const r = spawnReplica({
        id,
        env: { ...serviceEnv(kubeconfig, redis, etcd), ...env },
        ...(cliPath ? { cliPath } : {}),
      });
      replicas.push(r);
      return r;
    },
    queueOf(context, namespace, prefix) {
      const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
      const queue = createCleanupQueue({
        target: { cluster: clusterOf(context), context, namespace },
        connection,
        prefix,
        tombstoneTtlMs: 60_000,
        log: memoryLogger().log,
        now: Date.now,
      });
      return Object.assign(queue, {
        redis: connection,
        async dispose() {
          await queue.close();
          connection.disconnect();
        },
      });
    },
    async leaderOf(context, namespace) {
      const client = new Etcd3({ hosts: etcd.endpoints });
      try {
        const ns = client.namespace(electionPrefix({ cluster: clusterOf(context), context, namespace }));
        const res = await ns.getAll().sort('Create', 'Ascend').limit(1).exec();
        return res.kvs[0]?.value.toString();
      } finally {
        client.close();
      }
    },
    async stop() {
      for (const r of replicas) {
        r.kill('SIGCONT');
        r.kill('SIGKILL');
      }
      await Promise.all(replicas.map((r) => r.exited));
      await services.stop();
    },
  };
}

/** Creates `n` terminated driver pods (finished now) in a namespace; returns them. */
export function createTerminatedDrivers(
  server: SandboxApiServer,
  namespace: string,
  n: number,
  prefix = 'app',
): V1Pod[] {
  const pods: V1Pod[] = [];
  for (let i = 0; i < n; i++) {
    const pod = sparkDriverPod({
      namespace,
      appName: `${prefix}-${i}`,
      phase: i % 3 === 2 ? 'Failed' : 'Succeeded',
      nowMs: server.clock.now(),
    });
    pods.push(server.pods.create(pod));
  }
  return pods;
}

/** DELETE requests per pod UID, for the given UIDs (0 when none). */
export function deletesPer(server: SandboxApiServer, uids: string[]): number[] {
  const m = server.requests.deletesByUid();
  return uids.map((u) => m.get(u)?.length ?? 0);
}

/** Log lines of every replica matching a predicate. */
export function linesWhere(
  replicas: ReplicaProcess[],
  match: (l: LogLine) => boolean,
): (LogLine & { replica: string })[] {
  return replicas.flatMap((r) => r.lines.filter(match).map((l) => ({ ...l, replica: r.id })));
}

/** Writes text to a fresh temp file and returns its path. */
export function tempFile(name: string, text: string): string {
  const p = join(mkdtempSync(join(tmpdir(), 'sdc-test-')), name);
  writeFileSync(p, text);
  return p;
}
