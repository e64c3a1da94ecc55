/**
 * The cleaner cleans exactly what Kyuubi would, end to end: real replica processes, Redis, etcd and the
 * sandbox API server, `explain` and `status` run as the operator runs them, and a second deleter that is a
 * real process (kubectl, deleting pods by name as a Kyuubi server does).
 *
 * - `applicationStateSource=POD` (Kyuubi's default): a driver whose container ended while a sidecar keeps the
 *   pod Running is left alone, explained (which setting, what to set on both sides), counted by
 *   `sdc_pods_kept_by_pod_phase` and `status`; once the sidecar exits too, the pod is deleted once.
 * - `CONTAINER`: the same pod is deleted once, when the driver container has ended.
 * - `CONTAINER` with a renamed container (`applicationStateContainer=driver`): that pod is deleted once; one whose
 *   container has another name is kept (CONTAINER falls back to the pod phase, as Kyuubi does).
 * - a second deleter: pods deleted by kubectl before their deadline raise `sdc_pods_deleted_by_others_total`
 *   (the counter `SparkDriverCleanerAnotherDeleter` reads) once per pod across replicas.
 * - hostile pod objects (a `finishedAt` that is not a timestamp; an unknown phase with `containerStatuses` that
 *   is not a list): one warn line per pod, however many events.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { CLI_PATH, type ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  nameOf,
  remember,
  replicaEnv,
  replicaMetric,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from '../failure/helpers.ts';
import { boundMs, E2E_BOUNDS } from '../helpers/bounds.ts';
import { serviceEnv } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

const run = promisify(execFile);
const cluster = useFailureCluster({ context: 'ks' });
const deletesOf = (uid: string) => cluster().server.requests.deletesByUid().get(uid) ?? [];
const PROXY = 'registry.example.com/proxyv2:1.24';

type Status = NonNullable<V1Pod['status']>;
type ContainerStatus = NonNullable<Status['containerStatuses']>[number];

/** The replicas' settings for one namespace, plus the services (what `explain` and `status` need too). */
function envFor(ns: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...serviceEnv(cluster().server.kubeconfigPath, cluster().redis, cluster().etcd),
    ...replicaEnv(cluster(), ns, ns),
    ...extra,
  };
}

function startReplicas(ns: string, n: number, extra: Record<string, string> = {}): ReplicaProcess[] {
  return Array.from({ length: n }, (_, i) => cluster().startReplica(`${ns}-${i + 1}`, envFor(ns, extra)));
}

const at = (ms: number) => new Date(ms).toISOString() as unknown as Date;

/**
 * A driver whose container (`container`, default Spark's name) exited `exitCode` just now, while an istio-proxy
 * sidecar keeps the pod Running.
 */
function sidecarDriver(ns: string, app: string, o: { container?: string; exitCode?: number } = {}): V1Pod {
  const nowMs = cluster().server.clock.now();
  const pod = sparkDriverPod({ namespace: ns, appName: app, phase: 'Succeeded', nowMs });
  const name = o.container ?? 'spark-kubernetes-driver';
  const spec = pod.spec as NonNullable<V1Pod['spec']>;
  spec.containers = [
    { ...spec.containers[0], name },
    { name: 'istio-proxy', image: PROXY },
  ];
  const status = pod.status as Status;
  const driver = status.containerStatuses?.[0] as ContainerStatus;
  const code = o.exitCode ?? 0;
  status.phase = 'Running';
  status.containerStatuses = [
    {
      ...driver,
      name,
      state: {
        terminated: {
          exitCode: code,
          reason: code === 0 ? 'Completed' : 'Error',
          startedAt: at(nowMs - 60_000),
          finishedAt: at(nowMs),
        },
      },
    },
    {
      name: 'istio-proxy',
      image: PROXY,
      imageID: '',
      ready: true,
      restartCount: 0,
      started: true,
      state: { running: { startedAt: at(nowMs - 60_000) } },
    },
  ];
  return remember(cluster().server.pods.create(pod));
}

/** The replicas that enqueued the UID (their `enqueue` debug line). */
const enqueuedBy = (replicas: ReplicaProcess[], uid: string) =>
  replicas.filter((r) => r.lines.some((l) => l.msg === 'enqueue' && l.uid === uid)).map((r) => r.id);

/** `src/cli.ts <args>` with `env`, as an operator runs it beside the replicas. */
async function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await run(process.execPath, [CLI_PATH, ...args], {
      env: { ...process.env, ...env, SDC_LOG_LEVEL: 'silent' },
      timeout: E2E_BOUNDS.cli,
    });
    return { code: 0, stdout };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

const metric = (r: ReplicaProcess, name: string, ns: string) =>
  replicaMetric(r, name, ns, E2E_BOUNDS.elected);

describe('the application state follows Kyuubi’s settings', () => {
  it('POD (Kyuubi’s default): a sidecar driver is left alone, explained and counted; deleted once the pod ends', async () => {
    const ns = 'ks-pod';
    const replicas = startReplicas(ns, 2);
    try {
      await firstLeader(replicas, ns, E2E_BOUNDS.elected);
      const sidecar = sidecarDriver(ns, 'mesh-etl');
      // A driver without a sidecar, created after it: once it is gone, the sidecar pod had every chance.
      const [control] = createDrivers(cluster().server, ns, 1, 'control');
      await waitGone(cluster().server, [control as V1Pod], 'the control driver deleted', E2E_BOUNDS.cleaned);
      expect(cluster().server.pods.get(ns, nameOf(sidecar))?.metadata?.uid).toBe(uidOf(sidecar));
      expect(deletesOf(uidOf(sidecar))).toEqual([]);
      expect(enqueuedBy(replicas, uidOf(sidecar))).toEqual([]);

      // Every replica counts it from its own informer.
      for (const r of replicas)
        await waitFor(
          `${r.id} counts the kept pod`,
          async () => (await metric(r, 'sdc_pods_kept_by_pod_phase', ns)) === 1,
          E2E_BOUNDS.follows,
        );
      const ref = `${cluster().context}:${ns}/${nameOf(sidecar)}`;
      const explained = await cli(['explain', ref, '--json'], envFor(ns));
      expect(explained.code, explained.stdout).toBe(0);
      const e = JSON.parse(explained.stdout) as { kind: string; verdict: string };
      expect(e.kind).toBe('kept');
      expect(e.verdict).toContain('its driver container spark-kubernetes-driver has ended (exit code 0');
      expect(e.verdict).toContain('the pod is Running (istio-proxy still running)');
      expect(e.verdict).toContain('applicationStateSource is POD');
      expect(e.verdict).toContain('kyuubi.kubernetes.application.state.source=CONTAINER');
      expect(e.verdict).toContain('applicationStateSource=CONTAINER (SDC_APPLICATION_STATE_SOURCE)');
      // status reads what the leader recorded in Redis (it writes when its count changes, every 5 s at most).
      // Measured ≤ 4.3 s: the leader's write (at most every 5 s), then a run of `status`.
      const status = await waitFor(
        'status shows the kept pod',
        async () => {
          const s = await cli(['status', '--json'], envFor(ns));
          const t = (
            JSON.parse(s.stdout) as {
              targets: { keptByPodPhase: { count: number; pods: string[] } | null }[];
            }
          ).targets[0];
          return t?.keptByPodPhase?.count === 1 ? t.keptByPodPhase : undefined;
        },
        boundMs(4_300),
      );
      expect(status.pods).toEqual([nameOf(sidecar)]);
      const text = await cli(['status'], envFor(ns));
      expect(text.stdout).toMatch(
        /kept running: {2}1 driver pod\(s\) whose container spark-kubernetes-driver has ended/,
      );

      // The sidecar exits: the pod is Succeeded, Kyuubi's POD rule makes it terminal, the cleaner deletes it once.
      const nowMs = cluster().server.clock.now();
      const current = cluster().server.pods.get(ns, nameOf(sidecar)) as V1Pod;
      const [driver, proxy] = (current.status?.containerStatuses ?? []) as ContainerStatus[];
      cluster().server.pods.patchStatus(ns, nameOf(sidecar), {
        phase: 'Succeeded',
        containerStatuses: [
          driver as ContainerStatus,
          {
            ...(proxy as ContainerStatus),
            ready: false,
            state: { terminated: { exitCode: 0, reason: 'Completed', finishedAt: at(nowMs) } },
          },
        ],
      });
      await waitGone(
        cluster().server,
        [sidecar],
        'the sidecar driver deleted once its pod ended',
        E2E_BOUNDS.cleaned,
      );
      expect(deletesOf(uidOf(sidecar))).toEqual([200]);
      for (const r of replicas)
        await waitFor(
          `${r.id} counts no kept pod`,
          async () => (await metric(r, 'sdc_pods_kept_by_pod_phase', ns)) === 0,
          E2E_BOUNDS.follows,
        );
      expect(
        checkInvariants(cluster().server, ns, [uidOf(sidecar), uidOf(control)], { retentionMs: 1000 }),
      ).toEqual(CLEAN);
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);

  it('CONTAINER: the sidecar driver is deleted once, when its driver container has ended', async () => {
    const ns = 'ks-container';
    const replicas = startReplicas(ns, 2, { SDC_APPLICATION_STATE_SOURCE: 'CONTAINER' });
    try {
      await firstLeader(replicas, ns, E2E_BOUNDS.elected);
      const ok = sidecarDriver(ns, 'mesh-ok');
      const failed = sidecarDriver(ns, 'mesh-oom', { exitCode: 137 });
      // A Running pod is deleted gracefully (deletionTimestamp, then gone after its grace period): the accepted
      // DELETE is the cleaner's part.
      await waitFor(
        'both sidecar drivers deleted',
        () => [ok, failed].every((p) => deletesOf(uidOf(p)).length > 0),
        E2E_BOUNDS.cleaned,
      );
      expect(deletesOf(uidOf(ok))).toEqual([200]);
      expect(deletesOf(uidOf(failed))).toEqual([200]);
      for (const p of [ok, failed])
        expect(cluster().server.pods.get(ns, nameOf(p))?.metadata?.deletionTimestamp).toBeDefined();
      expect(
        checkInvariants(cluster().server, ns, [uidOf(ok), uidOf(failed)], {
          retentionMs: 1000,
          appState: { source: 'CONTAINER' },
        }),
      ).toEqual(CLEAN);
      for (const r of replicas) expect(await metric(r, 'sdc_pods_kept_by_pod_phase', ns)).toBe(0);
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);

  it('CONTAINER with a renamed driver container: that container decides; a pod without it is kept', async () => {
    const ns = 'ks-renamed';
    const replicas = startReplicas(ns, 1, {
      SDC_APPLICATION_STATE_SOURCE: 'CONTAINER',
      SDC_APPLICATION_STATE_CONTAINER: 'driver',
    });
    try {
      await firstLeader(replicas, ns, E2E_BOUNDS.elected);
      const other = sidecarDriver(ns, 'default-name');
      const renamed = sidecarDriver(ns, 'renamed', { container: 'driver' });
      await waitFor(
        'the renamed-container driver deleted',
        () => deletesOf(uidOf(renamed)).length > 0,
        E2E_BOUNDS.cleaned,
      );
      expect(deletesOf(uidOf(renamed))).toEqual([200]);
      // Created before it, and seen first by the same informer: had it been eligible, it would be enqueued by now.
      // No container named `driver`: the pod phase (Running) decides, as in Kyuubi.
      expect(cluster().server.pods.get(ns, nameOf(other))?.metadata?.uid).toBe(uidOf(other));
      expect(deletesOf(uidOf(other))).toEqual([]);
      expect(enqueuedBy(replicas, uidOf(other))).toEqual([]);
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);
});

describe('another deleter', () => {
  it('pods deleted by kubectl before their deadline raise sdc_pods_deleted_by_others_total once each', async () => {
    const ns = 'ks-other';
    // A retention the test never reaches: only the other deleter deletes.
    const replicas = startReplicas(ns, 2, { SDC_RETENTION: '1h' });
    try {
      await firstLeader(replicas, ns, E2E_BOUNDS.elected);
      const pods = createDrivers(cluster().server, ns, 3, 'doomed');
      const enqueued = (uid: string) =>
        replicas.some((r) =>
          r.lines.some((l) => l.msg === 'enqueue' && l.uid === uid && l.result === 'added'),
        );
      await waitFor('every pod enqueued', () => pods.every((p) => enqueued(uidOf(p))), E2E_BOUNDS.follows);
      // As a Kyuubi server with its cleanup on deletes them: by name, no precondition; a separate process.
      await run(
        'kubectl',
        [
          '--kubeconfig',
          cluster().server.kubeconfigPath,
          '-n',
          ns,
          'delete',
          'pod',
          '--wait=false',
          ...pods.map(nameOf),
        ],
        { timeout: E2E_BOUNDS.cli },
      );
      await waitGone(cluster().server, pods, 'the pods deleted by kubectl', E2E_BOUNDS.cleaned);
      // Every replica has cancelled each job (its informer saw the deletion): the counts are final.
      const cancelled = (r: ReplicaProcess, uid: string) =>
        r.lines.some((l) => l.msg === 'cleanup cancelled: tombstoned' && l.uid === uid);
      await waitFor(
        'every replica saw every deletion',
        () => replicas.every((r) => pods.every((p) => cancelled(r, uidOf(p)))),
        E2E_BOUNDS.follows,
      );
      const counts = await Promise.all(
        replicas.map((r) => metric(r, 'sdc_pods_deleted_by_others_total', ns)),
      );

      expect(counts.reduce((a, b) => a + b, 0)).toBe(3);
      for (const p of pods) expect(deletesOf(uidOf(p)).length).toBe(1); // kubectl's, none of the cleaner's
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);
});

describe('pod fields the cleaner cannot read', () => {
  it('one warn line per pod, however many events; the unreadable finishedAt falls back to first seen', async () => {
    const ns = 'ks-hostile';
    const [replica] = startReplicas(ns, 1);
    const r = replica as ReplicaProcess;
    try {
      await firstLeader([r], ns, E2E_BOUNDS.elected);
      const nowMs = cluster().server.clock.now();
      const garbled = sparkDriverPod({ namespace: ns, appName: 'garbled', phase: 'Succeeded', nowMs });
      const term = garbled.status?.containerStatuses?.[0]?.state?.terminated;
      if (term) term.finishedAt = 'yesterday' as unknown as Date;
      const odd = sparkDriverPod({ namespace: ns, appName: 'odd', phase: 'Running', nowMs });
      (odd.status as Status).phase = 'Exploded';
      (odd.status as { containerStatuses: unknown }).containerStatuses =
        'spark-kubernetes-driver: terminated';
      const [g, o] = [garbled, odd].map((p) => remember(cluster().server.pods.create(p))) as [V1Pod, V1Pod];
      // Three more events each (MODIFIED: an annotation changes).
      for (let i = 0; i < 3; i++)
        for (const p of [o, g]) {
          const cur = cluster().server.pods.get(ns, nameOf(p));
          if (!cur) continue; // the garbled one may be deleted already
          cluster().server.pods.update({
            ...cur,
            metadata: { ...cur.metadata, annotations: { ...cur.metadata?.annotations, touched: String(i) } },
          });
        }
      // A marker created after those events: once it is enqueued, the informer has handled them all.
      const [marker] = createDrivers(cluster().server, ns, 1, 'marker');
      await r.waitForLine((l) => l.msg === 'enqueue' && l.uid === uidOf(marker), E2E_BOUNDS.follows);
      // The garbled finishedAt: the retention counts from when the cleaner first saw it; deleted once.
      await waitGone(
        cluster().server,
        [g],
        'the pod with the garbled finishedAt deleted',
        E2E_BOUNDS.cleaned,
      );
      expect(deletesOf(uidOf(g))).toEqual([200]);
      const warned = (uid: string) =>
        r.lines.filter(
          (l) => l.msg?.toString().startsWith('pod fields the cleaner cannot read') && l.uid === uid,
        );
      expect(warned(uidOf(g))).toHaveLength(1);
      expect(warned(uidOf(g))[0]).toMatchObject({
        level: 'warn',
        pod: nameOf(g),
        state: 'FINISHED',
        unreadable: [
          'finishedAt of container spark-kubernetes-driver "yesterday" is not a timestamp: the retention counts from when the pod was first seen terminal',
        ],
      });
      expect(warned(uidOf(o))).toHaveLength(1);
      expect(warned(uidOf(o))[0]).toMatchObject({
        level: 'warn',
        state: 'UNKNOWN',
        unreadable: [
          'status.phase "Exploded" is not a pod phase: state UNKNOWN',
          'status.containerStatuses is not a list: no container state read',
        ],
      });
      expect(deletesOf(uidOf(o))).toEqual([]);
    } finally {
      await stopAll([r]);
    }
  }, 180_000);
});
