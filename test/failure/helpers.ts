/**
 * Helpers of the failure-mode suite: a self-contained cluster per test file (real Redis, real etcd with
 * 1 or 3 members, one sandbox API server), an attributing HTTP proxy (which replica sent which request),
 * pod factories, and the three invariants every case asserts from the sandbox's request log:
 *
 * 1. at most one DELETE request per pod (or, where a case documents why, at most one *accepted* one);
 * 2. no terminal, selected pod left past its deadline once the fault is over;
 * 3. no DELETE of a pod that was not an eligible (terminal, selected) driver.
 *
 * `SOAK=1` switches the suite to its long variant (bigger counts, longer outages); CI runs the short one.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
import type { PermissionTable } from '../../harness/sandbox/apiserver/authorization.ts';
import { buildKubeconfig } from '../../harness/sandbox/apiserver/kubeconfig.ts';
import type { SandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import type { EtcdTlsOptions, LocalEtcd, LocalService } from '../../harness/sandbox/local-services.ts';
import { CLI_PATH, type LogLine, type ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { AppStateSettings } from '../../src/kube/application-state.ts';
import type { TargetRef } from '../../src/queue/job-identity.ts';
import { startTestCluster, tempFile } from '../helpers/cluster.ts';
import { judgePod } from '../helpers/invariants.ts';
import { waitFor } from '../helpers/wait.ts';

/** The long, on-demand variant: `SOAK=1 npx vitest run test/failure`. */
export const SOAK = process.env.SOAK === '1';

/** The product's default selector: what counts as "a driver pod we may delete". */
export const SELECTOR = 'spark-role=driver,kyuubi-unique-tag';
const _selector = parseLabelSelector(SELECTOR);

/** Options of {@link startFailureCluster}. */
export interface FailureClusterOptions {
  /** etcd members (default 1). */
  etcdMembers?: number;
  /** Context name of the sandbox API server (default `fm`). */
  context?: string;
  /** etcd with TLS and client certificate authentication (harness/sandbox/local-services.ts). */
  etcdTls?: EtcdTlsOptions;
  /**
   * RBAC of the sandbox API server: its permission table and the token its kubeconfig carries (one of the
   * table's); default none, every request allowed.
   */
  rbac?: { permissions: PermissionTable; token: string };
}

/** One test file's world: its own Redis, etcd and sandbox API server. */
export interface FailureCluster {
  redis: LocalService;
  etcd: LocalEtcd;
  server: SandboxApiServer;
  context: string;
  /** The cluster name replicas derive for the server (src/kube/cluster-identity.ts). */
  clusterName: string;
  replicas: ReplicaProcess[];
  /**
   * Spawns a replica (`src/cli.ts run`) with the cluster's services; `env` overrides anything, e.g.
   * `SDC_ETCD_ENDPOINTS` for a single endpoint or `KUBECONFIG` for a proxy's kubeconfig. `cliPath`: another
   * entry point (a previous release's `src/cli.ts`).
   */
  startReplica(id: string, env: Record<string, string>, cliPath?: string): ReplicaProcess;
  stop(): Promise<void>;
}

/** Starts Redis, etcd (`etcdMembers`) and a sandbox API server: {@link startTestCluster} with one context. */
export async function startFailureCluster(opts: FailureClusterOptions = {}): Promise<FailureCluster> {
  const context = opts.context ?? 'fm';
  const cluster = await startTestCluster([context], {
    etcd: { members: opts.etcdMembers ?? 1, ...(opts.etcdTls ? { tls: opts.etcdTls } : {}) },
    ...(opts.rbac ? { rbac: opts.rbac } : {}),
  });
  const server = cluster.servers[context] as SandboxApiServer;
  return {
    redis: cluster.redis,
    etcd: cluster.etcd,
    server,
    context,
    clusterName: server.clusterName,
    replicas: cluster.replicas,
    startReplica: (id, env, cliPath) => cluster.startReplica(id, env, cliPath),
    stop: () => cluster.stop(),
  };
}

/**
 * Gives the calling test file its own {@link FailureCluster}. Call it once, at the top level of the file:
 * it registers a vitest `beforeAll` (hook timeout 60 000 ms) that starts the cluster with
 * {@link startFailureCluster}: Redis, etcd with `opts.etcdMembers` members (default 1) and a sandbox API
 * server whose context is `opts.context` (default `fm`); and an `afterAll` that stops it (kills the
 * replicas started through it, closes the server, stops Redis and etcd). When the start fails (e.g. no
 * `redis-server` or `etcd` on PATH), the `beforeAll` rejects and every test of the file fails.
 *
 * @returns an accessor for the started cluster, to call inside tests and hooks; it throws an `Error`
 *   when called before the `beforeAll` has started the cluster (at import time, or after the start failed).
 */
export function useFailureCluster(opts: FailureClusterOptions = {}): () => FailureCluster {
  let cluster: FailureCluster | undefined;
  beforeAll(async () => {
    cluster = await startFailureCluster(opts);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  return () => {
    if (!cluster)
      throw new Error('the failure cluster is not started: call the accessor inside a test or hook');
    return cluster;
  };
}

/** The target (cluster, context, namespace) of `namespace` in the cluster's server, as its replicas name it. */
export function targetIn(c: Pick<FailureCluster, 'clusterName' | 'context'>, namespace: string): TargetRef {
  return { cluster: c.clusterName, context: c.context, namespace };
}

/** SDC_* settings of a fast-moving replica for one target: short retention, TTL and retry delays. */
export function replicaEnv(
  cluster: FailureCluster,
  namespace: string,
  prefix: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    SDC_TARGETS: `${cluster.context}:${namespace}`,
    SDC_QUEUE_PREFIX: prefix,
    SDC_RETENTION: '1s',
    SDC_ELECTION_TTL_SECONDS: '3',
    SDC_RETRY_BASE_DELAY: '200ms',
    SDC_RETRY_MAX_DELAY: '2s',
    SDC_LABEL_SELECTOR: SELECTOR,
    ...extra,
  };
}

/**
 * Resolves with the replica that leads the namespace once leadership has settled: the first to log
 * `elected leader` for it (past or future line), or — with etcd, where leaderships are balanced — the
 * replica the target is assigned to, once every replica is a member, ready for the target, and it leads
 * (`/api/v1/leaders`): the first elected may hand the target over to its assigned replica as the others join.
 */
export async function firstLeader(
  replicas: ReplicaProcess[],
  namespace: string,
  timeoutMs = 60_000,
): Promise<ReplicaProcess> {
  let first: ReplicaProcess;
  try {
    first = await Promise.any(
      replicas.map((r) =>
        r
          .waitForLine((l) => l.msg === 'elected leader' && l.namespace === namespace, timeoutMs)
          .then(() => r),
      ),
    );
  } catch {
    const tails = replicas.map(
      (r) =>
        `${r.id} (exit ${r.child.exitCode}): ${r.lines
          .slice(-8)
          .map((l) => JSON.stringify(l).slice(0, 300))
          .join('\n')}\n${r.stderr().slice(-500)}`,
    );
    throw new Error(`no leader elected for ${namespace} within ${timeoutMs} ms:\n${tails.join('\n')}`);
  }
  const url = await httpUrl(first);
  return waitFor(
    `the leadership of ${namespace} settled on its assigned replica`,
    async () => {
      const body = (await (
        await fetch(`${url}/api/v1/leaders`, { signal: AbortSignal.timeout(5000) })
      ).json()) as {
        targets: Record<string, { cluster?: string; leader: string | null; assigned?: string | null }>;
        balance?: { members: string[]; notReady?: Record<string, string[]> };
      };
      if (!body.balance) return first; // local leadership: nothing to balance
      const row = Object.entries(body.targets).find(([t]) => t.endsWith(`:${namespace}`))?.[1];
      if (body.balance.members.length !== replicas.length || !row?.leader || row.leader !== row.assigned)
        return undefined;
      // A replica still listing the target's pods is assigned nothing yet: once it can clean the target, the
      // assignment may move to it (a handover). Settled means every replica can.
      if ((body.balance.notReady?.[`${row.cluster}/${namespace}`] ?? []).length > 0) return undefined;
      const leader = replicas.find((r) => r.id === row.leader);
      // The leader itself says so (its last leadership line for the namespace).
      const last = leader?.lines.findLast(
        (l) =>
          l.namespace === namespace &&
          (l.msg === 'elected leader' || l.msg === 'leadership lost' || l.msg === 'leadership ended'),
      );
      return last?.msg === 'elected leader' ? leader : undefined;
    },
    timeoutMs,
  );
}

/** Epoch ms of a log line (pino writes ISO-8601 `time`); NaN when absent. */
export function timeOf(l: LogLine | undefined): number {
  return Date.parse(String(l?.time ?? ''));
}

/** Lines of one replica matching `match` logged at or after `sinceMs` (epoch ms). */
export function linesSince(r: ReplicaProcess, sinceMs: number, match: (l: LogLine) => boolean): LogLine[] {
  return r.lines.filter((l) => timeOf(l) >= sinceMs && match(l));
}

/** The replica's HTTP base URL, from its `http server listening` line. */
export async function httpUrl(r: ReplicaProcess, timeoutMs = 30_000): Promise<string> {
  const line = await r.waitForLine((l) => l.msg === 'http server listening', timeoutMs);
  return String(line.url);
}

/**
 * Creates `n` terminated driver pods (Succeeded, every third Failed) that finished `finishedAgoMs` ago by
 * the sandbox clock (0: just now). Returns the stored pods (with their UIDs).
 */
export function createDrivers(
  server: SandboxApiServer,
  namespace: string,
  n: number,
  prefix: string,
  finishedAgoMs = 0,
): V1Pod[] {
  const nowMs = server.clock.now() - finishedAgoMs;
  const pods: V1Pod[] = [];
  for (let i = 0; i < n; i++) {
    const phase = i % 3 === 2 ? 'Failed' : 'Succeeded';
    pods.push(server.pods.create(sparkDriverPod({ namespace, appName: `${prefix}-${i}`, phase, nowMs })));
  }
  return remember(pods);
}

/**
 * Pods that must never be deleted, to sit beside a case's eligible pods: a running driver, a finished
 * driver outside the selector (no `kyuubi-unique-tag`, e.g. spark-submit'ed by hand), and a finished
 * pod labelled as an executor. Check with {@link bystandersIntact} at the end.
 */
export function createBystanders(server: SandboxApiServer, namespace: string): V1Pod[] {
  const nowMs = server.clock.now() - 60_000;
  const running = sparkDriverPod({ namespace, appName: 'bystander-running', phase: 'Running', nowMs });
  const unselected = sparkDriverPod({ namespace, appName: 'bystander-manual', phase: 'Succeeded', nowMs });
  delete unselected.metadata?.labels?.['kyuubi-unique-tag'];
  const executor = sparkDriverPod({ namespace, appName: 'bystander-exec', phase: 'Succeeded', nowMs });
  if (executor.metadata?.labels) executor.metadata.labels['spark-role'] = 'executor';
  return remember([running, unselected, executor].map((p) => server.pods.create(p)));
}

/** True when every bystander is still stored with its UID and got no DELETE request. */
export function bystandersIntact(server: SandboxApiServer, bystanders: V1Pod[]): boolean {
  const deletes = server.requests.deletesByUid();
  return bystanders.every(
    (p) =>
      server.pods.get(p.metadata?.namespace ?? '', nameOf(p))?.metadata?.uid === uidOf(p) &&
      !deletes.has(uidOf(p)),
  );
}

export const uidOf = (p: V1Pod | undefined): string => p?.metadata?.uid ?? '';
export const nameOf = (p: V1Pod | undefined): string => p?.metadata?.name ?? '';

/** Waits until none of `pods` (by name and UID) is stored any more. */
export async function waitGone(
  server: SandboxApiServer,
  pods: V1Pod[],
  what: string,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    what,
    () =>
      pods.every((p) => {
        const cur = server.pods.get(p.metadata?.namespace ?? '', nameOf(p));
        return !cur || cur.metadata?.uid !== uidOf(p);
      }),
    timeoutMs,
    100,
  );
}

/** Namespace of every pod the suite created, so a DELETE of an unknown UID is always a violation. */
const namespaceOfUid = new Map<string, string>();
/**
 * Records pods the test created (the factories here do it themselves): a DELETE of a UID never recorded
 * counts as a wrong DELETE in every namespace.
 */
export function remember<T extends V1Pod | V1Pod[]>(pods: T): T {
  for (const p of Array.isArray(pods) ? pods : [pods])
    namespaceOfUid.set(uidOf(p), p.metadata?.namespace ?? '');
  return pods;
}

/** What {@link checkInvariants} found; every list empty means the case held. */
export interface InvariantReport {
  /** Pods with more DELETE requests (or accepted DELETEs, in `acceptedOnly` mode) than allowed. */
  repeatedDeletes: { uid: string; codes: number[] }[];
  /** DELETEs of a UID that was not among the eligible pods (not terminal, not selected, unknown). */
  wrongDeletes: { uid: string; codes: number[] }[];
  /** Terminal, selected, not-deleting pods of the namespace whose deadline passed `slackMs` ago or more. */
  leftovers: { name: string; uid: string; overdueMs: number }[];
}

/**
 * Reads the sandbox's request log and store and checks the suite's three invariants for a namespace.
 *
 * @param eligible UIDs the test created as terminal, selected drivers (the only ones we may DELETE).
 * @param opts.retentionMs the replicas' retention, to compute each pod's deadline (finishedAt + retention).
 * @param opts.acceptedOnly count only DELETEs answered 200/202: for cases where rejected or timed-out
 *   DELETEs are retried by design (API faults); the UID precondition makes the retries harmless.
 * @param opts.slackMs how overdue a leftover may be before it counts (default 0: any overdue pod).
 */
export function checkInvariants(
  server: SandboxApiServer,
  namespace: string,
  eligible: Iterable<string>,
  opts: {
    retentionMs: number;
    acceptedOnly?: boolean;
    slackMs?: number;
    appState?: Pick<AppStateSettings, 'source'>;
  },
): InvariantReport {
  const ok = new Set(eligible);
  const report: InvariantReport = { repeatedDeletes: [], wrongDeletes: [], leftovers: [] };
  for (const [uid, codes] of server.requests.deletesByUid()) {
    // deletesByUid covers every namespace: keep the ones of this namespace's pods (or unknown ones).
    if (!ok.has(uid)) {
      // Another namespace's pod (other cases share the server) is that case's business.
      const ns = namespaceOfUid.get(uid);
      if (ns !== undefined && ns !== namespace) continue;
      if (uid.startsWith('unknown:') && !uid.includes(`/namespaces/${namespace}/`)) continue;
      report.wrongDeletes.push({ uid, codes });
      continue;
    }
    const counted = opts.acceptedOnly ? codes.filter((c) => c === 200 || c === 202) : codes;
    if (counted.length > 1) report.repeatedDeletes.push({ uid, codes });
  }
  // Leftovers judged as the nemesis judges them (test/helpers/invariants.ts), not with the product's own rules.
  const now = server.clock.now();
  const source = opts.appState?.source ?? 'POD';
  for (const pod of server.pods.list(namespace)) {
    if (pod.metadata?.deletionTimestamp) continue;
    const j = judgePod(pod, opts.retentionMs, source);
    if (!j.selected || j.deadlineMs === undefined) continue;
    const overdueMs = now - j.deadlineMs;
    if (overdueMs >= (opts.slackMs ?? 0))
      report.leftovers.push({ name: nameOf(pod), uid: uidOf(pod), overdueMs });
  }
  return report;
}

/** An empty report, to compare with `toEqual`. */
export const CLEAN: InvariantReport = { repeatedDeletes: [], wrongDeletes: [], leftovers: [] };

/** One request seen by an {@link ApiProxy}. */
export interface ProxiedRequest {
  method: string;
  path: string;
  /** Epoch ms at arrival (system clock). */
  atMs: number;
  /** DELETE: the body's `preconditions.uid` (`''` when it had none), once the body has been read. */
  uid?: string;
  /** HTTP code of the answer, once it came (0: no answer, the connection failed). */
  code?: number;
  /**
   * True when the client closed the connection before the whole answer reached it: it gave up on the request
   * (its own timeout), so whatever the server did, the client will retry.
   */
  abandoned?: boolean;
}

/** A plain HTTP proxy in front of the sandbox API server: tells which replica sent which request. */
export interface ApiProxy {
  /** A kubeconfig whose context (same name as the server's) points at the proxy. */
  kubeconfigPath: string;
  /**
   * The environment of a replica behind the proxy: its kubeconfig, and the name of the server's cluster
   * (`SDC_CLUSTER_NAME`): a cluster reached without a CA has its name derived from the URL it is reached at
   * (src/kube/cluster-identity.ts), and the proxy's URL is not the server's.
   */
  readonly env: Readonly<Record<string, string>>;
  readonly requests: ProxiedRequest[];
  deletes(sinceMs?: number): ProxiedRequest[];
  close(): Promise<void>;
}

/**
 * Starts a forwarding proxy to `server` (streams both ways, so watches work). Give each replica its own
 * proxy's kubeconfig to attribute API requests to replicas.
 */
export async function startApiProxy(server: SandboxApiServer): Promise<ApiProxy> {
  const target = new URL(server.url);
  const requests: ProxiedRequest[] = [];
  const proxy = createHttpServer((req, res) => {
    const seen: ProxiedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', atMs: Date.now() };
    requests.push(seen);
    if (seen.method === 'DELETE') {
      const body: Buffer[] = [];
      req.on('data', (c: Buffer) => body.push(c));
      req.on('end', () => {
        try {
          seen.uid = JSON.parse(Buffer.concat(body).toString()).preconditions?.uid ?? '';
        } catch {
          seen.uid = ''; // no JSON body: no precondition
        }
      });
    }
    const up = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (upRes) => {
        seen.code = upRes.statusCode ?? 0;
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
        // The server reset the connection mid-answer (a reset fault on a watch): reset the client's too.
        // pipe() ends `res` only on a clean end; without this the client's watch hung, silent, forever.
        upRes.on('close', () => {
          if (!upRes.complete) res.destroy();
        });
      },
    );
    up.on('error', () => {
      seen.code ??= 0;
      res.destroy();
    });
    res.on('close', () => {
      if (!res.writableFinished) seen.abandoned = true;
      up.destroy();
    });
    req.pipe(up);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  const port = (proxy.address() as AddressInfo).port;
  const kubeconfigPath = tempFile(
    'kubeconfig.yaml',
    buildKubeconfig([{ contextName: server.contextName, url: `http://127.0.0.1:${port}` }]),
  );
  return {
    kubeconfigPath,
    env: { KUBECONFIG: kubeconfigPath, SDC_CLUSTER_NAME: server.clusterName },
    requests,
    deletes: (sinceMs = 0) => requests.filter((r) => r.method === 'DELETE' && r.atMs >= sinceMs),
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections();
        proxy.close(() => resolve());
      }),
  };
}

/** GET `url` and return the HTTP status, or 0 when it cannot connect. */
export async function statusOf(url: string): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** Stops replicas gracefully (SIGTERM) and waits for them to exit; returns their exit codes. */
export async function stopAll(replicas: ReplicaProcess[]): Promise<(number | string)[]> {
  for (const r of replicas) {
    r.kill('SIGCONT');
    r.kill('SIGTERM');
  }
  return Promise.all(replicas.map((r) => r.exited));
}

/**
 * The value of `name{…namespace="ns"…}` in a replica's /metrics, summed over its other labels (0: no such
 * series). `timeoutMs`: how long to wait for the replica's HTTP server, ms.
 */
export async function replicaMetric(
  r: ReplicaProcess,
  name: string,
  ns: string,
  timeoutMs?: number,
): Promise<number> {
  const text = await (
    await fetch(`${await httpUrl(r, timeoutMs)}/metrics`, { signal: AbortSignal.timeout(5000) })
  ).text();
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}{`) && line.includes(`namespace="${ns}"`))
      sum += Number(line.split(' ').pop());
  return sum;
}

/**
 * The values of a gauge per namespace in a replica's /metrics; `where` keeps only the series whose line
 * contains it (e.g. `reason="stepped-down"`).
 */
export async function gaugeByNamespace(url: string, name: string, where = ''): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const out = new Map<string, number>();
  for (const l of text.split('\n')) {
    if (!l.startsWith(`${name}{`) || !l.includes(where)) continue;
    const ns = /namespace="([^"]+)"/.exec(l)?.[1];
    if (ns) out.set(ns, Number(l.split(' ').pop()));
  }
  return out;
}

/** What the tests read of `status --json`. */
export interface StatusJson {
  targets: { target: string; leader: string | null; assigned?: string | null; notReadyOn?: string[] }[];
  balance?: { members: string[]; notReady: Record<string, string[]> };
}

/** Runs `src/cli.ts status --json` as an operator beside the replicas; resolves with its parsed output. */
export function runStatus(env: Record<string, string>): Promise<{ code: number | null; json: StatusJson }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CLI_PATH, 'status', '--json'],
      { env: { ...process.env, ...env, SDC_LOG_LEVEL: 'silent' }, timeout: 60_000 },
      (err, stdout, stderr) => {
        try {
          resolve({
            code: err ? (typeof err.code === 'number' ? err.code : null) : 0,
            json: JSON.parse(stdout),
          });
        } catch {
          reject(new Error(`status printed no JSON: ${stdout}\n${stderr}`));
        }
      },
    );
  });
}
