/**
 * The nemesis's workload: a steady stream of Spark driver pods over the targets (the sandbox's synthetic
 * workload: Pending → Running → Succeeded/Failed, with executors), plus the pods the cleaner must leave
 * alone, so that "never a wrong DELETE" is tested, not assumed:
 *
 * - bystanders in every namespace: a running driver, a finished driver outside the selector, a finished
 *   executor (test/failure/helpers.ts);
 * - on demand, bursts of drivers that are all due at once (so that a fault finds DELETEs in flight);
 * - during retention, a person deletes a finished driver and creates a new pod with the same name
 *   (running, or finished with a deadline of its own): the old pod's job must never delete the new pod;
 * - during retention, a finished driver is relabelled out of the selector: it must never be deleted;
 * - on demand (a watch stall), finished drivers held by a finalizer that a person deletes before their deadline:
 *   terminating from then on, they must never get a DELETE of the product (`personDeletedAt`).
 *
 * Every pod created is recorded (`uids`), so a DELETE of any other UID is a wrong DELETE.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { SandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { type SparkWorkload, sparkDriverPod, startSparkWorkload } from '../../harness/sandbox/workload.ts';
import { createBystanders } from '../failure/helpers.ts';
import type { Prng } from './prng.ts';

/** Options of {@link startNemesisWorkload}. */
export interface NemesisWorkloadOptions {
  namespaces: readonly string[];
  /** Driver creations per second over all namespaces. */
  ratePerSecond: number;
  /** The cleaner's retention, ms: re-creations and relabels happen inside it. */
  retentionMs: number;
  /** Mean time between two person actions (re-create or relabel), ms. */
  actionEveryMs: number;
  /** Random source of the outcome mix and of the person actions. */
  prng: Prng;
}

/** A running nemesis workload. */
export interface NemesisWorkload {
  /** UIDs of every pod created (drivers, executors, bystanders, re-created pods). */
  readonly uids: ReadonlySet<string>;
  readonly counts: {
    drivers: number;
    recreated: number;
    relabelled: number;
    bystanders: number;
    burst: number;
    /** Drivers a person deleted while a finalizer held them. */
    held: number;
  };
  /** Creates `perTarget` finished drivers in every namespace, all due now (finished a retention ago). */
  burst(perTarget: number): void;
  /**
   * Creates `count` drivers in `namespace` that finish now (due a retention later), each with a finalizer
   * ({@link HOLD_FINALIZER}) that keeps it, terminating, once deleted.
   */
  heldDrivers(namespace: string, count: number): V1Pod[];
  /** A person deletes these pods (the finalizer keeps them, with a `deletionTimestamp`); recorded. */
  personDelete(pods: readonly V1Pod[]): void;
  /** The finalizer's owner is done: the pods are removed. */
  release(pods: readonly V1Pod[]): void;
  /** UID → when (epoch ms, sandbox clock) a person deleted it with {@link NemesisWorkload.personDelete}. */
  readonly personDeletedAt: ReadonlyMap<string, number>;
  /** Stops creating pods and acting; pods in flight stay as they are (non-terminal ones are bystanders). */
  stop(): void;
}

/** A finalizer as a log shipper puts on pods: it keeps a deleted pod until the logs are shipped. */
export const HOLD_FINALIZER = 'logs.example.com/ship-before-delete';

/** Starts the workload on `server`. */
export function startNemesisWorkload(
  server: SandboxApiServer,
  opts: NemesisWorkloadOptions,
): NemesisWorkload {
  const uids = new Set<string>();
  const counts = { drivers: 0, recreated: 0, relabelled: 0, bystanders: 0, burst: 0, held: 0 };
  const personDeletedAt = new Map<string, number>();
  const record = (p: V1Pod) => {
    uids.add(p.metadata?.uid ?? '');
    return p;
  };
  // The synthetic workload writes through this handle: every pod it creates is recorded.
  const recording: SandboxApiServer = {
    ...server,
    pods: { ...server.pods, create: (pod, mode) => record(server.pods.create(pod, mode)) },
  };
  for (const ns of opts.namespaces) counts.bystanders += createBystanders(recording, ns).length;
  const spark: SparkWorkload = startSparkWorkload(recording, {
    namespaces: [...opts.namespaces],
    ratePerSecond: opts.ratePerSecond,
    pendingMs: 300,
    runMs: 1500,
    random: () => opts.prng.next(),
  });

  /** A finished, selected driver still inside its retention (by at least a second), if any. */
  const inRetention = (): V1Pod | undefined => {
    const now = server.clock.now();
    const candidates = spark.stats.terminated
      .slice(-20)
      .filter((d) => now - d.finishedAtMs < opts.retentionMs - 1000)
      .map((d) => ({ d, p: server.pods.get(d.namespace, d.name) }))
      .filter(
        ({ d, p }) => p?.metadata?.uid === d.uid && p.metadata.labels?.['kyuubi-unique-tag'] !== undefined,
      )
      .map(({ p }) => p as V1Pod);
    return candidates.length > 0 ? opts.prng.pick(candidates) : undefined;
  };

  const act = () => {
    const pod = inRetention();
    if (!pod) return;
    const ns = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    if (opts.prng.chance(0.5)) {
      // A person deletes it and starts another application under the same pod name.
      server.pods.delete(ns, name);
      const phase = opts.prng.chance(0.5) ? 'Running' : 'Succeeded';
      const next = sparkDriverPod({ namespace: ns, phase, nowMs: server.clock.now() });
      next.metadata = { ...next.metadata, name };
      record(server.pods.create(next));
      counts.recreated++;
    } else {
      const labels = { ...pod.metadata?.labels };
      delete labels['kyuubi-unique-tag'];
      server.pods.update({ ...pod, metadata: { ...pod.metadata, labels } });
      counts.relabelled++;
    }
  };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(
      () => {
        try {
          act();
        } finally {
          schedule();
        }
      },
      Math.round(opts.prng.between(0.5, 1.5) * opts.actionEveryMs),
    );
  };
  schedule();

  return {
    uids,
    get counts() {
      return { ...counts, drivers: spark.stats.created };
    },
    burst(perTarget) {
      if (stopped) return;
      const finishedMs = server.clock.now() - opts.retentionMs - 1000;
      for (const ns of opts.namespaces)
        for (let i = 0; i < perTarget; i++) {
          const phase = opts.prng.chance(0.7) ? 'Succeeded' : 'Failed';
          record(server.pods.create(sparkDriverPod({ namespace: ns, phase, nowMs: finishedMs })));
          counts.burst++;
        }
    },
    heldDrivers(namespace, count) {
      const now = server.clock.now();
      return Array.from({ length: count }, () => {
        const pod = sparkDriverPod({
          namespace,
          phase: opts.prng.chance(0.7) ? 'Succeeded' : 'Failed',
          nowMs: now,
        });
        pod.metadata = { ...pod.metadata, finalizers: [HOLD_FINALIZER] };
        counts.held++;
        return record(server.pods.create(pod));
      });
    },
    personDelete(pods) {
      for (const p of pods) {
        const ns = p.metadata?.namespace ?? '';
        const name = p.metadata?.name ?? '';
        if (server.pods.get(ns, name)?.metadata?.uid !== p.metadata?.uid) continue;
        server.pods.delete(ns, name, { preconditions: { uid: p.metadata?.uid } });
        personDeletedAt.set(p.metadata?.uid ?? '', server.clock.now());
      }
    },
    release(pods) {
      for (const p of pods) {
        const cur = server.pods.get(p.metadata?.namespace ?? '', p.metadata?.name ?? '');
        if (!cur || cur.metadata?.uid !== p.metadata?.uid) continue;
        server.pods.update({ ...cur, metadata: { ...cur.metadata, finalizers: [] } });
      }
    },
    personDeletedAt,
    stop() {
      stopped = true;
      clearTimeout(timer);
      spark.stop();
    },
  };
}
