/**
 * The uncoordinated baseline: what every Kyuubi server replica does today for one KubernetesInfo
 * (context, namespace), rebuilt on our informer and pod API so the demo and the benchmarks can
 * measure it against the coordinated cleaner on the same sandbox.
 *
 * Each replica keeps its own cleanup cache: when its informer sees a driver pod in a terminal state,
 * it starts a local timer for `finishedAt + retention` and, when the timer fires, sends its own
 * DELETE, once, without retry. Nothing is shared between replicas, so N replicas send N DELETEs per
 * pod and N−1 of them are answered 404, each logged as a failure ("Failed to delete pod"), which is
 * how real 403/429/5xx failures get buried. An observed DELETE event does not cancel a pending timer
 * (Kyuubi's cache does not either).
 *
 * Two differences from Kyuubi, on purpose: the DELETE carries `preconditions.uid` (our pod API
 * always does; it changes no count, only protects a re-created pod), and stopping does not delete
 * pending pods early (Kyuubi does on shutdown), so that stopping the demo does not skew its counts.
 */

import { NODE_TIMER_MAX_MS } from '../../src/config/fields.ts';
import type { LabelSelector } from '../../src/config/label-selector.ts';
import type { Policy } from '../../src/config/schema.ts';
import { KubeApiError } from '../../src/kube/api-status.ts';
import { type AppStateSettings, KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import type { PodEvent, PodInformer } from '../../src/kube/pod-informer.ts';
import type { Logger } from '../../src/log.ts';
import type { TargetRef } from '../../src/queue/job-identity.ts';
import { deadlineMs, decide, malformedReason } from '../../src/rules/decision.ts';

/** Options of {@link createKyuubiLikeCleaner}. */
export interface KyuubiLikeCleanerOptions {
  target: TargetRef;
  selector: LabelSelector;
  policy: Policy;
  /** Kyuubi's `kyuubi.kubernetes.application.state.*` settings (default Kyuubi's: `POD`). */
  appState?: AppStateSettings;
  /** Retention period after the driver finished, ms. */
  retentionMs: number;
  pods: PodApi;
  /** The target's informer, not started: the cleaner subscribes its `observe` to it. */
  informer: PodInformer;
  /** Logger carrying `context` and `namespace`. */
  log: Logger;
  /** Clock, epoch ms. */
  now: () => number;
}

/** One target's uncoordinated cleaner. */
export interface KyuubiLikeCleaner {
  readonly target: TargetRef;
  /** Starts the informer; resolves once its first list is loaded. */
  start(): Promise<void>;
  /** Cancels pending timers (no early DELETE) and stops the informer. Idempotent. */
  stop(): Promise<void>;
  /** The informer's callback. Schedules a local timer for each newly seen terminal driver pod. */
  observe(event: PodEvent, pod: DriverPod): void;
  /** Timers not fired yet. */
  readonly pending: number;
}

/** Creates the cleaner of one target; `start()` starts its informer. */
export function createKyuubiLikeCleaner(opts: KyuubiLikeCleanerOptions): KyuubiLikeCleaner {
  const { log, now } = opts;
  const timers = new Map<string, NodeJS.Timeout>();
  /** UIDs whose timer already fired: Kyuubi's cache forgets them, we don't, so each replica sends one DELETE per pod. */
  const fired = new Set<string>();
  let stopped = false;
  const informer = opts.informer;

  async function fire(pod: DriverPod, deadline: number): Promise<void> {
    const namespace = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const uid = pod.metadata?.uid ?? '';
    const fields = { context: opts.target.context, namespace, pod: name, uid };
    try {
      const result = await opts.pods.delete(namespace, name, { uid });
      if (result === 'accepted') {
        log.info(
          { ...fields, outcome: 'accepted', latenessMs: Math.max(0, now() - deadline) },
          'driver pod deleted',
        );
      } else {
        // What Kyuubi does with another replica's success: a failure, logged as loudly as a real one.
        const notFound = result === 'not-found';
        log.warn(
          {
            ...fields,
            outcome: 'failed',
            code: notFound ? 404 : 409,
            reason: notFound ? 'NotFound' : 'Conflict',
          },
          'Failed to delete pod',
        );
      }
    } catch (err) {
      const e = err instanceof KubeApiError ? err : undefined;
      log.warn(
        {
          ...fields,
          outcome: 'failed',
          code: e?.code,
          reason: e?.reason ?? 'Unknown',
          message: (err as Error).message,
        },
        'Failed to delete pod',
      );
    }
  }

  function observe(event: PodEvent, pod: DriverPod): void {
    // Kyuubi's cache is not told about deletions: a pending timer still fires.
    if (stopped || event === 'deleted' || malformedReason(pod)) return;
    const decision = decide(pod, {
      selector: opts.selector,
      policy: opts.policy,
      appState: opts.appState ?? KYUUBI_STATE_DEFAULTS,
    });
    if (decision.action !== 'enqueue') return;
    const uid = pod.metadata?.uid ?? '';
    if (timers.has(uid) || fired.has(uid)) return;
    const { deadlineMs: deadline } = deadlineMs(decision.state.finishedAtMs, opts.retentionMs, now());
    const arm = () => {
      // A retention of ~25 days or more does not fit a Node timer, which would fire after 1 ms: wait in steps.
      const wait = Math.max(0, deadline - now());
      const timer = setTimeout(
        () => {
          if (wait > NODE_TIMER_MAX_MS) return arm();
          timers.delete(uid);
          fired.add(uid);
          void fire(pod, deadline);
        },
        Math.min(wait, NODE_TIMER_MAX_MS),
      );
      timers.set(uid, timer);
    };
    arm();
  }

  informer.addEventHandler(observe);
  return {
    target: opts.target,
    observe,
    get pending() {
      return timers.size;
    },
    async start() {
      await informer.start();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
      await informer.stop();
    },
  };
}
