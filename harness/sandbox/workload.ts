/**
 * A synthetic Spark-on-Kubernetes workload for the sandbox API server, shaped like what Kyuubi and
 * Spark really create: driver pods (labels `spark-role=driver`, `spark-app-selector`,
 * `spark-app-name`, `spark-version`, `kyuubi-unique-tag`; container `spark-kubernetes-driver`;
 * `spec.nodeName` set) moving Pending → Running → Succeeded | Failed (exit code 0 / 1 / 137 with
 * reason Completed / Error / OOMKilled and `finishedAt`), and executor pods with an ownerReference to
 * their driver, left terminated when the app ends so that deleting the driver garbage-collects them.
 * Spark never deletes a finished driver pod itself: that is the cleaner's job.
 *
 * Also loads the realistic fixture PodList `../shared/fixtures/driver-pods.json` (beside the repo).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Pod } from '@kubernetes/client-node';
import { rfc3339 } from './apiserver/pod-object.ts';
import type { SandboxApiServer } from './apiserver/server.ts';

/** How a driver ends. */
export type DriverOutcome = 'succeeded' | 'failed' | 'oomKilled';

/** Options of {@link startSparkWorkload}. */
export interface SparkWorkloadOptions {
  /** Namespaces to create drivers in, round-robin. Must not be empty. */
  namespaces: string[];
  /** Total number of drivers to create, then stop creating (default: until `stop()`). */
  pods?: number;
  /** Driver creations per second (default 5). */
  ratePerSecond?: number;
  /** Time in ms a driver stays Running before it terminates (default 2,000). */
  runMs?: number;
  /** Time in ms a driver stays Pending before it runs (default 500). */
  pendingMs?: number;
  /** Relative weights of the outcomes (default succeeded 7, failed 2, oomKilled 1). */
  mix?: { succeeded: number; failed: number; oomKilled: number };
  /** Executor pods per driver, created when the driver runs (default 1). */
  executorsPerDriver?: number;
  /** Clock for timestamps, epoch ms (default the server's sandbox clock). */
  now?: () => number;
  /** Random source in [0, 1) for the outcome mix (default Math.random). */
  random?: () => number;
}

/** A driver that reached a terminal phase. */
export interface TerminatedDriver {
  namespace: string;
  name: string;
  uid: string;
  /** `finishedAt` of the driver container, epoch ms. */
  finishedAtMs: number;
  phase: 'Succeeded' | 'Failed';
  /** Container termination reason: Completed, Error or OOMKilled. */
  reason: string;
}

/** A running workload. */
export interface SparkWorkload {
  /** Stops creating drivers and cancels pending transitions; resolves `done`. Idempotent. */
  stop(): void;
  /** Resolves when every created driver has terminated (or was deleted), or on `stop()`. */
  readonly done: Promise<void>;
  readonly stats: {
    /** Drivers created so far. */
    created: number;
    /** Drivers that reached a terminal phase, in order. */
    terminated: TerminatedDriver[];
  };
}

/** Options of {@link sparkDriverPod}. */
export interface SparkDriverPodOptions {
  namespace: string;
  /** spark-app-name; a random one when absent. */
  appName?: string;
  phase?: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  /** Terminal reason for Failed pods: Error (default) or OOMKilled. */
  failureReason?: 'Error' | 'OOMKilled';
  /** Epoch ms used for startTime and, for terminal phases, the container's startedAt/finishedAt. */
  nowMs: number;
  nodeName?: string;
}

const SPARK_VERSION = '3.5.3';
/** How long before `nowMs` a driver built Running or terminal was created, ms. */
const TERMINAL_RUN_MS = 60_000;
const IMAGE = `registry.example.com/spark:${SPARK_VERSION}`;
const APP_WORDS = [
  'daily-orders-etl',
  'sessionize-clicks',
  'wide-join-report',
  'ad-hoc-sql',
  'churn-features',
];

function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

function driverContainer(): NonNullable<V1Pod['spec']>['containers'][number] {
  return {
    name: 'spark-kubernetes-driver',
    image: IMAGE,
    args: ['driver'],
    ports: [
      { name: 'driver-rpc-port', containerPort: 7078, protocol: 'TCP' },
      { name: 'spark-ui', containerPort: 4040, protocol: 'TCP' },
    ],
    resources: { limits: { memory: '1408Mi' }, requests: { cpu: '1', memory: '1408Mi' } },
  };
}

function terminated(reason: string, startedMs: number, finishedMs: number) {
  const exitCode = reason === 'Completed' ? 0 : reason === 'OOMKilled' ? 137 : 1;
  return {
    terminated: {
      exitCode,
      reason,
      startedAt: rfc3339(startedMs) as unknown as Date,
      finishedAt: rfc3339(finishedMs) as unknown as Date,
      containerID: `containerd://${hex(32)}`,
    },
  };
}

/**
 * Builds a realistic Spark driver pod (not stored). Terminal phases get a terminated driver
 * container with exit code 0 (Completed), 1 (Error) or 137 (OOMKilled) finished at `nowMs`.
 */
export function sparkDriverPod(o: SparkDriverPodOptions): V1Pod {
  const appName = o.appName ?? `${APP_WORDS[Math.floor(Math.random() * APP_WORDS.length)]}-${hex(2)}`;
  const tag = randomUUID();
  const phase = o.phase ?? 'Pending';
  const nodeName = o.nodeName ?? 'ip-10-0-3-17.compute.internal';
  const name = `kyuubi-${appName}-${tag.slice(0, 8)}-driver`;
  const containerStatus = {
    name: 'spark-kubernetes-driver',
    image: IMAGE,
    imageID: `${IMAGE}@sha256:${hex(32)}`,
  };
  let state: Record<string, unknown>;
  if (phase === 'Pending') state = { waiting: { reason: 'ContainerCreating' } };
  else if (phase === 'Running') state = { running: { startedAt: rfc3339(o.nowMs) } };
  else
    state = terminated(phase === 'Succeeded' ? 'Completed' : (o.failureReason ?? 'Error'), o.nowMs, o.nowMs);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: name.length > 63 ? `${name.slice(0, 56)}-driver` : name,
      namespace: o.namespace,
      // Created before it ran and ended (a driver built Running or terminal ran a minute): a finish time is
      // never before the creation. Kept by an in-process create; one through the API gets the store's clock.
      creationTimestamp: rfc3339(
        phase === 'Pending' ? o.nowMs : o.nowMs - TERMINAL_RUN_MS,
      ) as unknown as Date,
      labels: {
        'spark-app-name': appName,
        'spark-app-selector': `spark-${hex(16)}`,
        'spark-role': 'driver',
        'spark-version': SPARK_VERSION,
        'kyuubi-unique-tag': tag,
      },
    },
    spec: {
      containers: [driverContainer()],
      restartPolicy: 'Never',
      serviceAccountName: 'spark',
      terminationGracePeriodSeconds: 30,
      nodeName,
    },
    status: {
      phase,
      hostIP: '10.0.3.17',
      podIP:
        phase === 'Pending'
          ? undefined
          : `10.244.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`,
      startTime: rfc3339(o.nowMs) as unknown as Date,
      qosClass: 'Burstable',
      containerStatuses: [
        {
          ...containerStatus,
          ready: phase === 'Running',
          restartCount: 0,
          started: phase === 'Running',
          state,
        } as NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>[number],
      ],
    },
  };
}

function executorPod(driver: V1Pod, index: number, nowMs: number): V1Pod {
  const labels = driver.metadata?.labels ?? {};
  const app = labels['spark-app-name'] ?? 'app';
  return {
    metadata: {
      name: `${app}-${hex(8)}-exec-${index}`.slice(0, 63),
      namespace: driver.metadata?.namespace,
      labels: {
        'spark-app-name': app,
        'spark-app-selector': labels['spark-app-selector'] ?? '',
        'spark-role': 'executor',
        'spark-version': SPARK_VERSION,
        'spark-exec-id': String(index),
        'spark-exec-resourceprofile-id': '0',
      },
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Pod',
          name: driver.metadata?.name ?? '',
          uid: driver.metadata?.uid ?? '',
          controller: true,
        },
      ],
    },
    spec: {
      containers: [{ name: 'spark-kubernetes-executor', image: IMAGE, args: ['executor'] }],
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 30,
      nodeName: driver.spec?.nodeName,
    },
    status: {
      phase: 'Running',
      startTime: rfc3339(nowMs) as unknown as Date,
      containerStatuses: [
        {
          name: 'spark-kubernetes-executor',
          image: IMAGE,
          imageID: `${IMAGE}@sha256:${hex(32)}`,
          ready: true,
          restartCount: 0,
          started: true,
          state: { running: { startedAt: rfc3339(nowMs) as unknown as Date } },
        },
      ],
    },
  };
}

function pickOutcome(mix: NonNullable<SparkWorkloadOptions['mix']>, r: number): DriverOutcome {
  const total = mix.succeeded + mix.failed + mix.oomKilled;
  const x = r * total;
  if (x < mix.succeeded) return 'succeeded';
  if (x < mix.succeeded + mix.failed) return 'failed';
  return 'oomKilled';
}

/**
 * Starts creating drivers in `server` at `ratePerSecond` and moving each through its lifecycle with
 * real timers. Writes go through the in-process API (not logged, no faults), as the kubelet's would
 * not be the cleaner's requests. A driver deleted or replaced before a transition is left alone.
 * @throws TypeError for an empty namespace list or non-positive rate.
 */
export function startSparkWorkload(server: SandboxApiServer, opts: SparkWorkloadOptions): SparkWorkload {
  if (opts.namespaces.length === 0) throw new TypeError('startSparkWorkload: namespaces must not be empty');
  const rate = opts.ratePerSecond ?? 5;
  if (!(rate > 0)) throw new TypeError(`startSparkWorkload: ratePerSecond must be > 0, got ${rate}`);
  const now = opts.now ?? server.clock.now;
  const random = opts.random ?? Math.random;
  const mix = opts.mix ?? { succeeded: 7, failed: 2, oomKilled: 1 };
  const runMs = opts.runMs ?? 2000;
  const pendingMs = opts.pendingMs ?? 500;
  const executors = opts.executorsPerDriver ?? 1;
  const stats = { created: 0, terminated: [] as TerminatedDriver[] };
  const timers = new Set<NodeJS.Timeout>();
  let live = 0;
  let stopped = false;
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((r) => {
    resolveDone = r;
  });
  const startedAt = performance.now();

  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  const finishOne = () => {
    live--;
    if (live === 0 && opts.pods !== undefined && stats.created >= opts.pods) resolveDone();
  };
  const current = (ns: string, name: string, uid: string) => {
    const p = server.pods.get(ns, name);
    return p && p.metadata?.uid === uid && !p.metadata.deletionTimestamp ? p : undefined;
  };

  const launch = () => {
    const ns = opts.namespaces[stats.created % opts.namespaces.length] as string;
    const created = server.pods.create(sparkDriverPod({ namespace: ns, phase: 'Pending', nowMs: now() }));
    stats.created++;
    live++;
    const name = created.metadata?.name ?? '';
    const uid = created.metadata?.uid ?? '';
    later(pendingMs, () => {
      const pod = current(ns, name, uid);
      if (!pod) return finishOne();
      const t = now();
      const cs = pod.status?.containerStatuses?.[0];
      if (cs) {
        cs.state = { running: { startedAt: rfc3339(t) as unknown as Date } };
        cs.ready = true;
        cs.started = true;
      }
      const running = server.pods.update({
        ...pod,
        status: { ...pod.status, phase: 'Running', podIP: `10.244.${stats.created % 250}.${live % 250}` },
      });
      for (let i = 1; i <= executors; i++) server.pods.create(executorPod(running, i, t));
      later(runMs, () => {
        const pod2 = current(ns, name, uid);
        if (!pod2) return finishOne();
        const outcome = pickOutcome(mix, random());
        const end = now();
        const reason =
          outcome === 'succeeded' ? 'Completed' : outcome === 'oomKilled' ? 'OOMKilled' : 'Error';
        const phase = outcome === 'succeeded' ? 'Succeeded' : 'Failed';
        const started = Date.parse(String(pod2.status?.startTime ?? '')) || end;
        const c = pod2.status?.containerStatuses?.[0];
        if (c) {
          c.state = terminated(reason, started, end);
          c.ready = false;
          c.started = false;
        }
        server.pods.update({ ...pod2, status: { ...pod2.status, phase } });
        // Executors end with their application; they stay until the driver is garbage-collected.
        for (const ex of server.pods.list(ns)) {
          if (!ex.metadata?.ownerReferences?.some((o) => o.uid === uid) || ex.metadata.deletionTimestamp)
            continue;
          const ec = ex.status?.containerStatuses?.[0];
          if (ec) ec.state = terminated('Completed', started, end);
          server.pods.update({ ...ex, status: { ...ex.status, phase: 'Succeeded' } });
        }
        stats.terminated.push({
          namespace: ns,
          name,
          uid,
          finishedAtMs: Math.floor(end / 1000) * 1000,
          phase,
          reason,
        });
        finishOne();
      });
    });
  };

  const tickMs = Math.max(10, Math.floor(1000 / rate));
  const ticker = setInterval(() => {
    if (stopped) return;
    const due = Math.floor(((performance.now() - startedAt) / 1000) * rate) + 1;
    while (stats.created < due && (opts.pods === undefined || stats.created < opts.pods)) launch();
    if (opts.pods !== undefined && stats.created >= opts.pods) {
      clearInterval(ticker);
      if (live === 0) resolveDone();
    }
  }, tickMs);
  ticker.unref?.();
  if (opts.pods !== 0) launch();
  else resolveDone();

  return {
    stats,
    done,
    stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(ticker);
      for (const t of timers) clearTimeout(t);
      timers.clear();
      resolveDone();
    },
  };
}

/** Finds `../shared/fixtures/driver-pods.json` beside the repository root (the dir with package.json). */
export function defaultFixturePath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'package.json')))
      return join(dir, '..', 'shared', 'fixtures', 'driver-pods.json');
    dir = dirname(dir);
  }
  throw new Error('defaultFixturePath: repository root (package.json) not found above this module');
}

/**
 * Loads a PodList file into `server` verbatim (uid, name, labels, status, deletionTimestamp and
 * finalizers as given; only resourceVersion is reassigned by the global counter). Returns the pods.
 * @throws Error when the file is missing or not a PodList; KubeStatusError 409 for a duplicate.
 */
export function loadFixturePods(server: SandboxApiServer, path: string = defaultFixturePath()): V1Pod[] {
  const list = JSON.parse(readFileSync(path, 'utf8')) as { kind?: string; items?: V1Pod[] };
  if (list.kind !== 'PodList' || !Array.isArray(list.items)) throw new Error(`${path} is not a PodList`);
  return list.items.map((p) => server.pods.create(p, 'verbatim'));
}
