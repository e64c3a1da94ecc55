/**
 * The sandbox's stand-in for the scheduler and the kubelet, for pods created through the API (a `POST` of a
 * pod without `spec.nodeName`, as `check --canary` and kubectl create them): it binds each to a node, runs it
 * (Running, every container `running`) and ends it as a container that exits at once does (Succeeded, every
 * container `terminated` with exit code 0, reason Completed, `finishedAt`), with the server's clock. Images are
 * not pulled: every pod runs the same way. The workload's own drivers (harness/sandbox/workload.ts) are created
 * scheduled and are left to it; a pod deleted or replaced before a step is left alone.
 *
 * Writes go through the server's in-process pod access (not logged as API requests, no faults), as the
 * kubelet's status updates are not the clients' requests.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { rfc3339 } from './apiserver/pod-object.ts';
import type { SandboxApiServer } from './apiserver/server.ts';

/** Options of {@link startKubelet}. */
export interface KubeletOptions {
  /** Time from creation to Running, ms (default 200). */
  pendingMs?: number;
  /** Time a pod runs before its containers exit, ms (default 300). */
  runMs?: number;
  /** The node pods are bound to (default `sandbox-node-1`). */
  nodeName?: string;
}

/** A running kubelet stand-in. */
export interface SandboxKubelet {
  /** Pods it has ended (Succeeded), in order: `namespace/name`. */
  readonly finished: readonly string[];
  /** Stops running pods; pending steps are cancelled. Idempotent. */
  stop(): void;
}

type ContainerStatus = NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>[number];

/** Starts running every unscheduled pod added to `server` from now on (see the module comment). */
export function startKubelet(server: SandboxApiServer, opts: KubeletOptions = {}): SandboxKubelet {
  const pendingMs = opts.pendingMs ?? 200;
  const runMs = opts.runMs ?? 300;
  const nodeName = opts.nodeName ?? 'sandbox-node-1';
  const timers = new Set<NodeJS.Timeout>();
  const finished: string[] = [];
  let stopped = false;

  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      if (!stopped) fn();
    }, ms);
    timers.add(t);
  };
  /** The pod as stored now, when it is still the one we started and nobody is deleting it. */
  const current = (ns: string, name: string, uid: string) => {
    const p = server.pods.get(ns, name);
    return p?.metadata?.uid === uid && !p.metadata.deletionTimestamp ? p : undefined;
  };
  const statuses = (pod: V1Pod, state: (name: string) => ContainerStatus['state']): ContainerStatus[] =>
    (pod.spec?.containers ?? []).map((c) => ({
      name: c.name,
      image: c.image ?? '',
      imageID: '',
      ready: state(c.name)?.running !== undefined,
      restartCount: 0,
      started: state(c.name)?.running !== undefined,
      state: state(c.name),
    }));

  const run = (ns: string, name: string, uid: string) => {
    later(pendingMs, () => {
      const pod = current(ns, name, uid);
      if (!pod) return;
      const startedAt = server.clock.now();
      const running = server.pods.update({
        ...pod,
        spec: { ...(pod.spec ?? { containers: [] }), nodeName },
        status: {
          ...pod.status,
          phase: 'Running',
          hostIP: '10.0.0.1',
          podIP: '10.244.0.10',
          startTime: rfc3339(startedAt) as unknown as Date,
          containerStatuses: statuses(pod, () => ({
            running: { startedAt: rfc3339(startedAt) as unknown as Date },
          })),
        },
      });
      later(runMs, () => {
        const pod2 = current(ns, name, uid);
        if (!pod2) return;
        const end = server.clock.now();
        server.pods.update({
          ...pod2,
          status: {
            ...pod2.status,
            phase: 'Succeeded',
            containerStatuses: statuses(running, () => ({
              terminated: {
                exitCode: 0,
                reason: 'Completed',
                startedAt: rfc3339(startedAt) as unknown as Date,
                finishedAt: rfc3339(end) as unknown as Date,
              },
            })),
          },
        });
        finished.push(`${ns}/${name}`);
      });
    });
  };

  const unsubscribe = server.pods.subscribe((type, pod) => {
    if (type !== 'ADDED' || pod.spec?.nodeName || pod.status?.phase !== 'Pending') return;
    const m = pod.metadata;
    if (m?.namespace && m.name && m.uid && !m.deletionTimestamp) run(m.namespace, m.name, m.uid);
  });

  return {
    finished,
    stop() {
      if (stopped) return;
      stopped = true;
      unsubscribe();
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
}
