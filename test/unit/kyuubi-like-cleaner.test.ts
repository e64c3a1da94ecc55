/**
 * The uncoordinated baseline's local timer (harness/baseline/kyuubi-like-cleaner.ts): a retention longer than a
 * Node timer can hold (2^31−1 ms, ~24.8 days) must not fire after 1 ms. Fake timers and clock: the point is
 * a 30-day wait.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createKyuubiLikeCleaner } from '../../harness/baseline/kyuubi-like-cleaner.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { trimPod } from '../../src/kube/driver-pod.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import type { PodInformer } from '../../src/kube/pod-informer.ts';
import { memoryLogger } from '../helpers/log.ts';

const DAY = 86_400_000;

describe('baseline timer', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: Date.parse('2026-12-01T10:00:00Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  for (const retentionDays of [1, 30, 60]) {
    it(`retention ${retentionDays} d: the pod is deleted at its deadline, not before`, async () => {
      const deletes: number[] = [];
      const pods: PodApi = {
        get: async () => undefined,
        delete: async () => {
          deletes.push(Date.now());
          return 'accepted';
        },
      };
      const informer = {
        addEventHandler: () => undefined,
        start: async () => undefined,
        stop: async () => undefined,
      } as unknown as PodInformer;
      const cleaner = createKyuubiLikeCleaner({
        target: { cluster: 'kind-a', context: 'kind-a', namespace: 'spark' },
        selector: parseLabelSelector('spark-role=driver'),
        policy: 'ALL',
        retentionMs: retentionDays * DAY,
        pods,
        informer,
        log: memoryLogger().log,
        now: () => Date.now(),
      });
      const finishedAt = Date.now();
      const pod = sparkDriverPod({ namespace: 'spark', phase: 'Succeeded', nowMs: finishedAt });
      pod.metadata = { ...pod.metadata, uid: '7d3c2a8e-1b4f-4c1e-9a55-0c9e1f2b3d4a' }; // the API server sets it
      cleaner.observe('added', trimPod(pod));
      await vi.advanceTimersByTimeAsync(retentionDays * DAY - 1000);
      expect(deletes).toEqual([]);
      await vi.advanceTimersByTimeAsync(2000);
      expect(deletes).toHaveLength(1);
      // rfc3339 timestamps have whole seconds: the deadline is within a second of finishedAt + retention.
      expect((deletes[0] ?? 0) - (finishedAt + retentionDays * DAY)).toBeLessThanOrEqual(1000);
      await cleaner.stop();
    });
  }
});
