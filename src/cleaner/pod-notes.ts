/**
 * The log lines the informer side writes about a pod once, however many events it sends (a resync, each status
 * update): the fields Kyuubi's state rule could not read (warn), and a driver kept by the `POD` state source
 * although its container has ended (debug). Each UID is forgotten when its pod goes.
 */

import type { DriverPod } from '../kube/driver-pod.ts';
import type { PodEvent } from '../kube/pod-informer.ts';
import type { Logger } from '../log.ts';
import type { Decision, DecisionRules } from '../rules/decision.ts';
import { keptByPodPhase } from '../rules/kept-by-pod-phase.ts';

/** The once-per-pod log lines of one target. */
export interface PodNotes {
  /** Logs what the decision of an observed pod shows, once per UID. */
  observed(pod: DriverPod, decision: Decision, event: PodEvent): void;
  /** Forgets a UID whose pod is gone. */
  forget(uid: string): void;
}

/** Creates the once-per-pod log lines of one target. */
export function createPodNotes(log: Logger, rules: DecisionRules): PodNotes {
  const unreadableUids = new Set<string>();
  const keptUids = new Set<string>();
  const fields = (pod: DriverPod) => ({ pod: pod.metadata?.name, uid: pod.metadata?.uid });
  return {
    observed(pod, decision, event) {
      if (!('state' in decision)) return;
      const uid = pod.metadata?.uid ?? '';
      const { state } = decision;
      // What Kyuubi's rule could not read, and what it assumed instead: an unparsable finishedAt (the retention
      // then counts from when the pod was first seen terminal), a phase that is not one (UNKNOWN), a
      // containerStatuses that is not a list. One warn line per pod, not per event.
      if (state.unreadable.length > 0 && !unreadableUids.has(uid)) {
        unreadableUids.add(uid);
        log.warn(
          { event, ...fields(pod), state: state.state, unreadable: state.unreadable },
          'pod fields the cleaner cannot read: judged as Kyuubi would, see unreadable',
        );
      }
      if (
        decision.action !== 'none' ||
        decision.reason !== 'not-terminal' ||
        !state.stateContainer?.terminated
      )
        return;
      if (keptUids.has(uid)) return;
      const kept = keptByPodPhase(pod, rules);
      if (!kept) return;
      keptUids.add(uid);
      log.debug(
        {
          ...fields(pod),
          container: kept.container,
          exitCode: kept.exitCode,
          phase: kept.phase,
          running: kept.running,
        },
        'driver container ended but the pod runs on: kept, as Kyuubi keeps it under applicationStateSource POD',
      );
    },
    forget(uid) {
      unreadableUids.delete(uid);
      keptUids.delete(uid);
    },
  };
}
