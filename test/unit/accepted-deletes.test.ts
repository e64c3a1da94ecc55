/**
 * One DELETE per pod even when Redis forgot it (found by the nemesis): the record of accepted DELETEs
 * (src/cleaner/accepted-deletes.ts) — its horizon and bound on an injected monotonic clock — and the
 * handler's re-check consulting it before the fence and the DELETE (workers/cleanup-driver-pod.ts).
 */
import { describe, expect, it } from 'vitest';
import { createAcceptedDeletes } from '../../src/cleaner/accepted-deletes.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { RecheckMode } from '../../src/config/schema.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import type { CleanupDeps } from '../../src/rules/handler.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';

const A = '4720771f-8ca8-4811-a6d2-287672fdf202';
const B = '5720771f-8ca8-4811-a6d2-287672fdf202';
const C = '6720771f-8ca8-4811-a6d2-287672fdf202';

describe('createAcceptedDeletes', () => {
  it('remembers a UID for the horizon (monotonic ms), then forgets it', () => {
    let now = 1_000;
    const r = createAcceptedDeletes({ horizonMs: 60_000, maxEntries: 10, monotonicNow: () => now });
    expect(r.acceptedBefore(A)).toBe(false);
    r.record(A);
    now += 60_000;
    expect(r.acceptedBefore(A)).toBe(true);
    now += 1;
    expect(r.acceptedBefore(A)).toBe(false);
    expect(r.size).toBe(0);
  });

  it('keeps at most maxEntries, evicting the oldest first', () => {
    let now = 0;
    const r = createAcceptedDeletes({ horizonMs: 60_000, maxEntries: 2, monotonicNow: () => now });
    r.record(A);
    now += 1;
    r.record(B);
    now += 1;
    r.record(C);
    expect(r.size).toBe(2);
    expect([A, B, C].map((uid) => r.acceptedBefore(uid))).toEqual([false, true, true]);
  });

  it('a re-recorded UID counts from its latest acceptance', () => {
    let now = 0;
    const r = createAcceptedDeletes({ horizonMs: 100, maxEntries: 10, monotonicNow: () => now });
    r.record(A);
    r.record(B);
    now = 50;
    r.record(A);
    now = 120;
    expect(r.acceptedBefore(B)).toBe(false);
    expect(r.acceptedBefore(A)).toBe(true);
  });

  it('refuses a horizon or bound that is not positive', () => {
    expect(() => createAcceptedDeletes({ horizonMs: 0, maxEntries: 1, monotonicNow: () => 0 })).toThrow(
      RangeError,
    );
    expect(() => createAcceptedDeletes({ horizonMs: 1, maxEntries: 0, monotonicNow: () => 0 })).toThrow(
      RangeError,
    );
  });
});

const NOW = Date.parse('2026-12-01T10:00:00Z');
const job: CleanupJobData = { context: 'c', namespace: 'spark', pod: 'd1', uid: A, deadlineMs: NOW - 1000 };
/** The informer's copy: stale, it never shows the deletion (its watch events are late). */
const stale: DriverPod = {
  metadata: {
    name: 'd1',
    namespace: 'spark',
    uid: A,
    resourceVersion: '41',
    labels: { 'spark-role': 'driver' },
  },
  status: { phase: 'Succeeded' },
};

/**
 * Deps as the target cleaner wires them: DELETEs go through the record's `deleteOnce` (an accepted one is
 * recorded), `acceptedBefore` asks the record. The GET answers the stale copy too (an API server whose watch
 * cache lags): only the record can tell. `fence` replaces the default one (which only notes the call).
 */
function wired(recheck: RecheckMode, fence?: () => Promise<void>) {
  const calls: string[] = [];
  const record = createAcceptedDeletes({ horizonMs: 60_000, maxEntries: 10, monotonicNow: () => 0 });
  const pods: PodApi = {
    async get(ns, name) {
      calls.push(`get ${ns}/${name}`);
      return stale;
    },
    delete: (ns, name, pre) =>
      record.deleteOnce(pre.uid, async () => {
        calls.push(`delete ${ns}/${name}`);
        return 'accepted' as const;
      }),
  };
  const deps: CleanupDeps = {
    pods,
    cached: () => stale,
    recheck,
    fence:
      fence ??
      (async () => {
        calls.push('fence');
      }),
    stillLeader: () => true,
    selector: parseLabelSelector('spark-role=driver'),
    policy: 'ALL',
    retentionMs: 0,
    dryRun: false,
    now: () => NOW,
    acceptedBefore: (uid) => record.acceptedBefore(uid),
  };
  return { deps, calls };
}

describe('cleanupDriverPod with the record of accepted DELETEs', () => {
  it.each<RecheckMode>(['resource-version', 'cache', 'live'])(
    '%s: the same job twice (re-enqueued after Redis lost it) → already-deleting, one DELETE',
    async (recheck) => {
      const { deps, calls } = wired(recheck);
      const signal = new AbortController().signal;
      expect((await cleanupDriverPod(job, deps, signal)).outcome).toBe('accepted');
      const after = calls.length;
      expect(await cleanupDriverPod(job, deps, signal)).toEqual({ outcome: 'already-deleting', ours: true });
      // No fence, no GET, no DELETE for the second run.
      expect(calls.slice(after)).toEqual([]);
      expect(calls.filter((c) => c.startsWith('delete'))).toHaveLength(1);
    },
  );
});

describe('deleteOnce: one DELETE per UID at a time', () => {
  const make = () => createAcceptedDeletes({ horizonMs: 60_000, maxEntries: 10, monotonicNow: () => 0 });

  it('a second run while the first DELETE is in flight sends nothing once the first is accepted', async () => {
    const record = make();
    let sent = 0;
    const answer = Promise.withResolvers<'accepted'>();
    const send = () => {
      sent += 1;
      return answer.promise;
    };
    const first = record.deleteOnce('u1', send);
    const second = record.deleteOnce('u1', send);
    answer.resolve('accepted');
    expect(await first).toBe('accepted');
    expect(await second).toBe('not-found');
    expect(sent).toBe(1);
    expect(record.acceptedBefore('u1')).toBe(true);
  });

  it('a run that passed the early check, then waited in the fence while another run DELETEd → sends nothing', async () => {
    // The nemesis's interleaving (Redis restarted empty, the job enqueued again while its first run was
    // still going): run 1 checks `acceptedBefore` (false), awaits the fence; run 2 DELETEs, accepted; run 1
    // goes on from the fence with a cache that has not seen the deletion.
    const fenceOpen = Promise.withResolvers<void>();
    let fences = 0;
    const { deps, calls } = wired('cache', async () => {
      fences += 1;
      if (fences === 1) await fenceOpen.promise;
    });
    const signal = new AbortController().signal;
    const run1 = cleanupDriverPod(job, deps, signal);
    expect((await cleanupDriverPod(job, deps, signal)).outcome).toBe('accepted');
    fenceOpen.resolve();
    expect((await run1).outcome).toBe('already-absent');
    expect(calls).toEqual(['delete spark/d1']);
  });

  it('a first DELETE that was not accepted, or threw, lets the waiting run send its own', async () => {
    const record = make();
    const calls: string[] = [];
    const conflict = Promise.withResolvers<'conflict'>();
    const first = record.deleteOnce('u2', () => {
      calls.push('first');
      return conflict.promise;
    });
    const second = record.deleteOnce('u2', async () => {
      calls.push('second');
      return 'accepted' as const;
    });
    conflict.resolve('conflict');
    expect(await first).toBe('conflict');
    expect(await second).toBe('accepted');
    const failing = record.deleteOnce('u3', async () => {
      throw new Error('reset');
    });
    const after = record.deleteOnce('u3', async () => 'accepted' as const);
    await expect(failing).rejects.toThrow('reset');
    expect(await after).toBe('accepted');
    expect(calls).toEqual(['first', 'second']);
  });
});
