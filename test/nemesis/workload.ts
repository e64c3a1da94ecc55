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
 * - during retention, a finished driver is relabelled out of the selector: it must never be deleted.
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
  };
  /** Creates `perTarget` finished drivers in every namespace, all due now (finished a retention ago). */
  burst(perTarget: number): void;
  /** Stops creating pods and acting; pods in flight stay as they are (non-terminal ones are bystanders). */
  stop(): void;
}

/** Starts the workload on `server`. */
export function startNemesisWorkload(
  server: SandboxApiServer,
  opts: NemesisWorkloadOptions,
): NemesisWorkload {
  const uids = new Set<string>();
  const counts = { drivers: 0, recreated: 0, relabelled: 0, bystanders: 0, burst: 0 };
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
    stop() {
      stopped = true;
      clearTimeout(timer);
      spark.stop();
    },
  };
}
