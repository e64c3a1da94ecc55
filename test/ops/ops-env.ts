/**
 * The operations tests' environment: real Redis (and etcd when asked), sandbox API servers, and
 * in-process replicas (`startReplica`) with their own telemetry and HTTP server, so that tests can read
 * spans from an in-memory exporter and call the HTTP surface directly.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll } from 'vitest';
import type { SandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import type { LocalEtcd, LocalService } from '../../harness/sandbox/local-services.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { monotonicClock, systemClock } from '../../src/clock.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { CleanerConfig } from '../../src/config/schema.ts';
import { type HttpServer, startHttpServer } from '../../src/http/server.ts';
import { type Replica, startReplica } from '../../src/replica.ts';
import { createTelemetry, type Telemetry } from '../../src/telemetry/telemetry.ts';
import { startTestServices } from '../helpers/cluster.ts';
import { type MemoryLog, memoryLogger } from '../helpers/log.ts';

export interface OpsEnv {
  redis: LocalService;
  etcd: LocalEtcd | undefined;
  servers: Record<string, SandboxApiServer>;
  kubeconfig: string;
  /** Starts an in-process replica (config from SDC_* style values) with telemetry and an HTTP server. */
  startReplica(id: string, env: Record<string, string>, opts?: { traces?: boolean }): Promise<OpsReplica>;
  stop(): Promise<void>;
}

export interface OpsReplica {
  id: string;
  config: CleanerConfig;
  replica: Replica;
  telemetry: Telemetry;
  /** Spans this replica exported (when started with `traces: true`). */
  spans: InMemorySpanExporter;
  http: HttpServer;
  logs: MemoryLog;
  stop(): Promise<void>;
}

/** Starts Redis, optionally etcd, and one sandbox API server per context name. */
export async function startOpsEnv(contexts: string[], opts: { etcd?: boolean } = {}): Promise<OpsEnv> {
  const services = await startTestServices(contexts, opts.etcd ? { etcd: {} } : {});
  const { redis, etcd, servers, kubeconfig } = services;
  const started: OpsReplica[] = [];
  return {
    redis,
    etcd,
    servers,
    kubeconfig,
    async startReplica(id, env, o = {}) {
      const config = loadConfig({
        env: {
          KUBECONFIG: kubeconfig,
          SDC_REDIS_URL: redis.url,
          ...(etcd ? { SDC_ETCD_ENDPOINTS: etcd.endpoints.join(',') } : {}),
          SDC_HTTP_PORT: '0',
          SDC_REPLICA_ID: id,
          SDC_RETENTION: '1s',
          SDC_ELECTION_TTL_SECONDS: '3',
          SDC_RETRY_BASE_DELAY: '200ms',
          SDC_RETRY_MAX_DELAY: '2s',
          ...env,
        },
        serviceAccountNamespace: () => undefined,
      });
      const logs = memoryLogger('debug');
      const log = logs.log.child({ replica: id });
      const spans = new InMemorySpanExporter();
      const telemetry = await createTelemetry({
        replicaId: id,
        electionTtlSeconds: config.electionTtlSeconds,
        dryRun: config.dryRun,
        env: {},
        ...(o.traces ? { exporter: spans } : {}),
      });
      const replica = await startReplica(config, {
        log,
        now: systemClock,
        monotonicNow: monotonicClock,
        telemetry,
      });
      const http = await startHttpServer({
        config,
        replica,
        log,
        monotonicNow: monotonicClock,
        metrics: telemetry.metrics,
      });
      let stopping: Promise<void> | undefined;
      const r: OpsReplica = {
        id,
        config,
        replica,
        telemetry,
        spans,
        http,
        logs,
        stop() {
          stopping ??= (async () => {
            await replica.stop();
            await http.close();
            await telemetry.shutdown();
          })();
          return stopping;
        },
      };
      started.push(r);
      return r;
    },
    async stop() {
      await Promise.allSettled(started.map((r) => r.stop()));
      await services.stop();
    },
  };
}

/**
 * Gives the calling test file its own {@link OpsEnv}. Call it once, at the top level of the file: it
 * registers a vitest `beforeAll` (hook timeout 60 000 ms) that starts the environment with
 * {@link startOpsEnv}(`contexts`, `opts`) and an `afterAll` that stops it (its replicas, servers, Redis and etcd).
 * @returns an accessor for the started environment, to call inside tests and hooks; it throws an `Error`
 *   when called before the `beforeAll` has started it (at import time, or after the start failed).
 */
export function useOpsEnv(contexts: string[], opts: { etcd?: boolean } = {}): () => OpsEnv {
  let env: OpsEnv | undefined;
  beforeAll(async () => {
    env = await startOpsEnv(contexts, opts);
  }, 60_000);
  afterAll(async () => {
    await env?.stop();
  });
  return () => {
    if (!env) throw new Error('the ops environment is not started: call the accessor inside a test or hook');
    return env;
  };
}

/** Creates one terminated (Succeeded) driver pod that finished now, with a Kyuubi tag; returns it as stored. */
export function createTerminatedDriver(
  server: SandboxApiServer,
  namespace: string,
  appName: string,
  phase: 'Succeeded' | 'Failed' = 'Succeeded',
): V1Pod {
  return server.pods.create(sparkDriverPod({ namespace, appName, phase, nowMs: server.clock.now() }));
}

/** GET/POST/PUT a path of a replica's HTTP server; `auth` as `user:password`. */
export async function http(
  base: string,
  path: string,
  init: { method?: string; auth?: string; body?: unknown } = {},
): Promise<{ status: number; headers: Headers; text: string; json: () => unknown }> {
  const headers: Record<string, string> = {};
  if (init.auth) headers.authorization = `Basic ${Buffer.from(init.auth).toString('base64')}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(new URL(path, base), {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}
