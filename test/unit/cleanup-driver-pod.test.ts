import { describe, expect, it } from 'vitest';
import type { CleanupDeps } from '../../src/cleanup/handler.ts';
import type { CleanupJobData } from '../../src/cleanup/job-data.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KubeApiError } from '../../src/kube/api-status.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import { DeleteAnswerAbandonedError, type DeleteResult, type PodApi } from '../../src/kube/pod-api.ts';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';

const NOW = Date.parse('2026-11-30T10:00:00Z');
const UID = '4720771f-8ca8-4811-a6d2-287672fdf202';

function driver(
  over: {
    uid?: string;
    deleting?: boolean;
    phase?: string;
    labels?: Record<string, string>;
    rv?: string;
  } = {},
): DriverPod {
  return {
    metadata: {
      name: 'd1',
      namespace: 'spark',
      uid: over.uid ?? UID,
      resourceVersion: over.rv ?? '41',
      labels: over.labels ?? { 'spark-role': 'driver', 'kyuubi-unique-tag': 't' },
      ...(over.deleting ? { deletionTimestamp: new Date(NOW - 1000).toISOString() } : {}),
    },
    status: { phase: over.phase ?? 'Succeeded' },
  };
}

const job: CleanupJobData = {
  context: 'c',
  namespace: 'spark',
  pod: 'd1',
  uid: UID,
  deadlineMs: NOW - 250,
  finishedAtMs: NOW - 5250,
  enqueuedBy: 'r1',
};

/** A recording fake of the pod API: returns scripted answers and records every call. */
function fakePods(
  get: DriverPod | undefined | Error,
  del: DeleteResult | Error | DeleteResult[] = 'accepted',
) {
  const answers = Array.isArray(del) ? [...del] : undefined;
  const calls: string[] = [];
  const pods: PodApi = {
    async get(ns, name) {
      calls.push(`get ${ns}/${name}`);
      if (get instanceof Error) throw get;
      return get;
    },
    async delete(ns, name, pre) {
      calls.push(
        `delete ${ns}/${name} {uid:${pre.uid}${pre.resourceVersion ? `,rv:${pre.resourceVersion}` : ''}}`,
      );
      if (del instanceof Error) throw del;
      return answers ? (answers.shift() ?? 'accepted') : (del as DeleteResult);
    },
  };
  return { pods, calls };
}

function deps(pods: PodApi, over: Partial<CleanupDeps> = {}): CleanupDeps {
  return {
    pods,
    cached: () => undefined,
    recheck: 'live',
    fence: async () => undefined,
    stillLeader: () => true,
    selector: parseLabelSelector('spark-role=driver,kyuubi-unique-tag'),
    policy: 'ALL',
    dryRun: false,
    now: () => NOW,
    ...over,
  };
}

const run = (d: CleanupDeps, signal = new AbortController().signal) => cleanupDriverPod(job, d, signal);

describe('cleanupDriverPod', () => {
  it('terminal pod past its deadline → get, then delete {uid} → accepted with lateness', async () => {
    const f = fakePods(driver());
    expect(await run(deps(f.pods))).toEqual({ outcome: 'accepted', latenessMs: 250 });
    expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID}}`]);
  });

  it('before the deadline → not-yet, no API call', async () => {
    const f = fakePods(driver());
    expect(await run(deps(f.pods, { now: () => NOW - 1000 }))).toEqual({ outcome: 'not-yet', dueInMs: 750 });
    expect(f.calls).toEqual([]);
  });

  it('pod gone → already-absent, no DELETE', async () => {
    const f = fakePods(undefined);
    expect(await run(deps(f.pods))).toEqual({ outcome: 'already-absent' });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('same name, other UID (re-created) → replaced, no DELETE', async () => {
    const f = fakePods(driver({ uid: '99999999-0000-4000-8000-000000000000' }));
    expect(await run(deps(f.pods))).toEqual({ outcome: 'replaced' });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('deletionTimestamp set → already-deleting, no DELETE', async () => {
    const f = fakePods(driver({ deleting: true }));
    expect(await run(deps(f.pods))).toEqual({ outcome: 'already-deleting' });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('labels no longer match → skipped, no DELETE', async () => {
    const f = fakePods(driver({ labels: { 'spark-role': 'driver' } }));
    expect(await run(deps(f.pods))).toEqual({ outcome: 'skipped', reason: 'not-selected' });
  });

  it('pod no longer terminal → skipped', async () => {
    const f = fakePods(driver({ phase: 'Running' }));
    expect(await run(deps(f.pods))).toEqual({ outcome: 'skipped', reason: 'not-terminal' });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('policy COMPLETED and a failed driver → skipped', async () => {
    const f = fakePods(driver({ phase: 'Failed' }));
    expect(await run(deps(f.pods, { policy: 'COMPLETED' }))).toEqual({
      outcome: 'skipped',
      reason: 'policy',
    });
  });

  it('dry run → would-delete, no DELETE', async () => {
    const f = fakePods(driver());
    expect(await run(deps(f.pods, { dryRun: true }))).toEqual({ outcome: 'would-delete', latenessMs: 250 });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('DELETE answered 404 → already-absent; 409 (UID precondition) → replaced', async () => {
    expect(await run(deps(fakePods(driver(), 'not-found').pods))).toEqual({ outcome: 'already-absent' });
    expect(await run(deps(fakePods(driver(), 'conflict').pods))).toEqual({ outcome: 'replaced' });
  });

  it('DELETE 429 → failed with Status reason, code, message and Retry-After', async () => {
    const f = fakePods(driver(), new KubeApiError('slow down', 429, 'TooManyRequests', 3000));
    expect(await run(deps(f.pods))).toEqual({
      outcome: 'failed',
      step: 'delete',
      code: 429,
      reason: 'TooManyRequests',
      message: 'slow down',
      retryAfterMs: 3000,
    });
  });

  it('GET 403 → failed at the get step, no DELETE', async () => {
    const f = fakePods(new KubeApiError('pods "d1" is forbidden', 403, 'Forbidden'));
    expect(await run(deps(f.pods))).toMatchObject({
      outcome: 'failed',
      step: 'get',
      code: 403,
      reason: 'Forbidden',
    });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('fenced (not the leader any more) → fenced, no API call', async () => {
    const f = fakePods(driver());
    const d = deps(f.pods, {
      fence: async () => {
        throw new FencedError('lease may have expired');
      },
    });
    expect(await run(d)).toEqual({ outcome: 'fenced', reason: 'lease may have expired' });
    expect(f.calls).toEqual([]);
  });

  it('lease goes stale during the GET → fenced before the DELETE', async () => {
    const f = fakePods(driver());
    expect(await run(deps(f.pods, { stillLeader: () => false }))).toMatchObject({ outcome: 'fenced' });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('aborted (leadership lost) before the DELETE → aborted, no DELETE', async () => {
    const ac = new AbortController();
    const f = fakePods(driver());
    const d = deps(f.pods);
    d.pods.get = async (ns, name) => {
      f.calls.push(`get ${ns}/${name}`);
      ac.abort(new Error('leadership lost'));
      return driver();
    };
    expect(await run(d, ac.signal)).toEqual({ outcome: 'aborted' });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('a DELETE sent whose answer was given up → aborted with deleteSent (the job is put back, not failed)', async () => {
    const ac = new AbortController();
    const f = fakePods(driver());
    const d = deps(f.pods);
    d.pods.delete = async (ns, name) => {
      f.calls.push(`delete ${ns}/${name}`);
      ac.abort(new Error('leadership lost'));
      throw new DeleteAnswerAbandonedError(2_000);
    };
    expect(await run(d, ac.signal)).toEqual({ outcome: 'aborted', deleteSent: true });
    expect(f.calls).toEqual(['get spark/d1', 'delete spark/d1']);
  });

  describe('the run after a DELETE whose answer was given up (job marked liveRecheck)', () => {
    const marked: CleanupJobData = { ...job, liveRecheck: true };
    // The informer has not seen the deletion yet: its copy still shows the pod terminal and undeleted.
    const stale = driver({ rv: '77' });

    it('resource-version mode → live GET, not the cached copy: the pod is being deleted → no second DELETE', async () => {
      const f = fakePods(driver({ deleting: true, rv: '78' }));
      const d = deps(f.pods, { recheck: 'resource-version', cached: () => stale });
      expect(await cleanupDriverPod(marked, d, new AbortController().signal)).toEqual({
        outcome: 'already-deleting',
      });
      expect(f.calls).toEqual(['get spark/d1']);
    });

    it('cache mode → live GET: the pod is gone → already-absent, no DELETE', async () => {
      const f = fakePods(undefined);
      const d = deps(f.pods, { recheck: 'cache', cached: () => stale });
      expect(await cleanupDriverPod(marked, d, new AbortController().signal)).toEqual({
        outcome: 'already-absent',
      });
      expect(f.calls).toEqual(['get spark/d1']);
    });

    it('the DELETE never reached the API server: the live copy is still eligible → DELETE {uid}', async () => {
      const f = fakePods(driver({ rv: '77' }));
      const d = deps(f.pods, { recheck: 'resource-version', cached: () => stale });
      expect(await cleanupDriverPod(marked, d, new AbortController().signal)).toEqual({
        outcome: 'accepted',
        latenessMs: 250,
      });
      expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID}}`]);
    });
  });

  it('cache mode reads the informer cache, not the API', async () => {
    const f = fakePods(undefined);
    const d = deps(f.pods, { recheck: 'cache', cached: (name) => (name === 'd1' ? driver() : undefined) });
    expect(await run(d)).toEqual({ outcome: 'accepted', latenessMs: 250 });
    expect(f.calls).toEqual([`delete spark/d1 {uid:${UID}}`]);
  });

  describe('resource-version mode', () => {
    const rv = (f: ReturnType<typeof fakePods>, cached: DriverPod | undefined) =>
      deps(f.pods, { recheck: 'resource-version', cached: (name) => (name === 'd1' ? cached : undefined) });

    it('checks the cached copy and sends one DELETE with {uid, resourceVersion}', async () => {
      const f = fakePods(driver());
      expect(await run(rv(f, driver({ rv: '77' })))).toEqual({ outcome: 'accepted', latenessMs: 250 });
      expect(f.calls).toEqual([`delete spark/d1 {uid:${UID},rv:77}`]);
    });

    it('409 (changed since cached) → live GET and re-check: deletionTimestamp now set → already-deleting', async () => {
      const f = fakePods(driver({ deleting: true, rv: '78' }), ['conflict']);
      expect(await run(rv(f, driver({ rv: '77' })))).toEqual({ outcome: 'already-deleting' });
      expect(f.calls).toEqual([`delete spark/d1 {uid:${UID},rv:77}`, 'get spark/d1']);
    });

    it('409, then the live copy is still eligible → DELETE {uid} → accepted', async () => {
      const f = fakePods(driver({ rv: '79' }), ['conflict', 'accepted']);
      expect(await run(rv(f, driver({ rv: '77' })))).toEqual({ outcome: 'accepted', latenessMs: 250 });
      expect(f.calls).toEqual([
        `delete spark/d1 {uid:${UID},rv:77}`,
        'get spark/d1',
        `delete spark/d1 {uid:${UID}}`,
      ]);
    });

    it('cached copy already deleting → no-op without any request (a deletionTimestamp is never unset)', async () => {
      const f = fakePods(driver());
      expect(await run(rv(f, driver({ deleting: true })))).toEqual({ outcome: 'already-deleting' });
      expect(f.calls).toEqual([]);
    });

    it('cached copy looks re-created or not terminal → the cache may be behind: live GET decides', async () => {
      const other = '99999999-0000-4000-8000-000000000000';
      const f = fakePods(driver({ rv: '90' }));
      expect(await run(rv(f, driver({ uid: other })))).toEqual({ outcome: 'accepted', latenessMs: 250 });
      expect(await run(rv(f, driver({ phase: 'Running' })))).toEqual({
        outcome: 'accepted',
        latenessMs: 250,
      });
      expect(f.calls).toEqual([
        'get spark/d1',
        `delete spark/d1 {uid:${UID}}`,
        'get spark/d1',
        `delete spark/d1 {uid:${UID}}`,
      ]);
      const g = fakePods(driver({ uid: other }));
      expect(await run(rv(g, driver({ uid: other })))).toEqual({ outcome: 'replaced' });
      expect(g.calls).toEqual(['get spark/d1']);
    });

    it('409, then leadership lost before the second DELETE → fenced, no second DELETE', async () => {
      const f = fakePods(driver({ rv: '79' }), ['conflict', 'accepted']);
      let fences = 0;
      const d = {
        ...rv(f, driver({ rv: '77' })),
        fence: async () => {
          fences += 1;
          if (fences > 1) throw new FencedError('leader key gone');
        },
      };
      expect(await run(d)).toEqual({ outcome: 'fenced', reason: 'leader key gone' });
      expect(f.calls).toEqual([`delete spark/d1 {uid:${UID},rv:77}`]);
    });

    it('not in the cache → live GET, then DELETE {uid}', async () => {
      const f = fakePods(driver());
      expect(await run(rv(f, undefined))).toEqual({ outcome: 'accepted', latenessMs: 250 });
      expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID}}`]);
    });
  });
});
