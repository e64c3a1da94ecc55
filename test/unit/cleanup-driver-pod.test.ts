import { describe, expect, it } from 'vitest';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KubeApiError } from '../../src/kube/api-status.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import type { KubeHttp } from '../../src/kube/kube-http.ts';
import {
  createPodApi,
  DeleteAnswerAbandonedError,
  type DeleteResult,
  type PodApi,
} from '../../src/kube/pod-api.ts';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import type { CleanupDeps } from '../../src/rules/handler.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';
import { waitFor } from '../helpers/wait.ts';

const NOW = Date.parse('2026-11-30T10:00:00Z');
const UID = '4720771f-8ca8-4811-a6d2-287672fdf202';

function driver(
  over: {
    uid?: string;
    deleting?: boolean;
    phase?: string;
    labels?: Record<string, string>;
    rv?: string;
    /** The driver container's `finishedAt`, epoch ms (absent: no container status). */
    finishedAt?: number;
    /** `lastTransitionTime` of the pod's conditions, epoch ms. */
    transitions?: number[];
  } = {},
): DriverPod {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    metadata: {
      name: 'd1',
      namespace: 'spark',
      uid: over.uid ?? UID,
      resourceVersion: over.rv ?? '41',
      labels: over.labels ?? { 'spark-role': 'driver', 'kyuubi-unique-tag': 't' },
      creationTimestamp: iso(NOW - 600_000),
      ...(over.deleting ? { deletionTimestamp: iso(NOW - 1000) } : {}),
    },
    status: {
      phase: over.phase ?? 'Succeeded',
      ...(over.finishedAt === undefined
        ? {}
        : {
            containerStatuses: [
              {
                name: 'spark-kubernetes-driver',
                state: { terminated: { exitCode: 0, reason: 'Completed', finishedAt: iso(over.finishedAt) } },
              },
            ],
          }),
      ...(over.transitions
        ? {
            conditions: over.transitions.map((t, i) => ({
              type: i === 0 ? 'PodScheduled' : 'Ready',
              status: i === 0 ? 'True' : 'False',
              lastTransitionTime: iso(t),
            })),
          }
        : {}),
    },
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
  get: DriverPod | undefined | Error | (DriverPod | undefined)[],
  del: DeleteResult | Error | DeleteResult[] = 'accepted',
) {
  const answers = Array.isArray(del) ? [...del] : undefined;
  // A list of GET answers is served in order, the last one repeated.
  const gets = Array.isArray(get) ? [...get] : undefined;
  const calls: string[] = [];
  const pods: PodApi = {
    async get(ns, name) {
      calls.push(`get ${ns}/${name}`);
      if (gets) return gets.length > 1 ? gets.shift() : gets[0];
      if (get instanceof Error) throw get;
      return get as DriverPod | undefined;
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
    // The job was enqueued with this retention (its deadline is finishedAt + 5 s): due, unless a test says not.
    retentionMs: 5000,
    ...over,
  };
}

const run = (d: CleanupDeps, signal = new AbortController().signal) => cleanupDriverPod(job, d, signal);

describe('cleanupDriverPod', () => {
  it('terminal pod past its deadline → get, then delete {uid, resourceVersion just read} → accepted with lateness', async () => {
    const f = fakePods(driver());
    expect(await run(deps(f.pods))).toEqual({ outcome: 'accepted', latenessMs: 250 });
    expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID},rv:41}`]);
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

  it('DELETE answered 404 → already-absent; 409 to a UID-only precondition (cache mode) → replaced', async () => {
    expect(await run(deps(fakePods(driver(), 'not-found').pods))).toEqual({ outcome: 'already-absent' });
    const cache = { recheck: 'cache' as const, cached: () => driver() };
    expect(await run(deps(fakePods(driver(), 'conflict').pods, cache))).toEqual({ outcome: 'replaced' });
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

    it('the DELETE never reached the API server: the live copy is still eligible → DELETE {uid, resourceVersion}', async () => {
      const f = fakePods(driver({ rv: '77' }));
      const d = deps(f.pods, { recheck: 'resource-version', cached: () => stale });
      expect(await cleanupDriverPod(marked, d, new AbortController().signal)).toEqual({
        outcome: 'accepted',
        latenessMs: 250,
      });
      expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID},rv:77}`]);
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

    it('409, then the live copy is still eligible → DELETE {uid, live resourceVersion} → accepted', async () => {
      const f = fakePods(driver({ rv: '79' }), ['conflict', 'accepted']);
      expect(await run(rv(f, driver({ rv: '77' })))).toEqual({ outcome: 'accepted', latenessMs: 250 });
      expect(f.calls).toEqual([
        `delete spark/d1 {uid:${UID},rv:77}`,
        'get spark/d1',
        `delete spark/d1 {uid:${UID},rv:79}`,
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
        `delete spark/d1 {uid:${UID},rv:90}`,
        'get spark/d1',
        `delete spark/d1 {uid:${UID},rv:90}`,
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

    it('not in the cache → live GET, then DELETE {uid, resourceVersion}', async () => {
      const f = fakePods(driver());
      expect(await run(rv(f, undefined))).toEqual({ outcome: 'accepted', latenessMs: 250 });
      expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID},rv:41}`]);
    });
  });
});

describe('recheck: cache — a cache miss is not "absent"', () => {
  it('not in the informer cache → live GET, then DELETE {uid, resourceVersion}: the pod is deleted, not leaked', async () => {
    const f = fakePods(driver());
    const d = deps(f.pods, { recheck: 'cache', cached: () => undefined });
    expect(await run(d)).toEqual({ outcome: 'accepted', latenessMs: 250 });
    expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID},rv:41}`]);
  });

  it('not in the cache and not in the API either → already-absent after the live GET', async () => {
    const f = fakePods(undefined);
    expect(await run(deps(f.pods, { recheck: 'cache' }))).toEqual({ outcome: 'already-absent' });
    expect(f.calls).toEqual(['get spark/d1']);
  });
});

describe('a live re-check: the DELETE carries the resourceVersion just read', () => {
  it('relabelled out of the selector between the GET and the DELETE → 409, GET again → skipped, no pod deleted', async () => {
    const relabelled = driver({ rv: '42', labels: { 'spark-role': 'driver' } });
    const f = fakePods([driver({ rv: '41' }), relabelled], ['conflict']);
    expect(await run(deps(f.pods))).toEqual({ outcome: 'skipped', reason: 'not-selected' });
    expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID},rv:41}`, 'get spark/d1']);
  });

  it('a finalizer pod whose deletion began between the GET and the DELETE → 409, GET again → already-deleting, not accepted twice', async () => {
    const f = fakePods([driver({ rv: '41' }), driver({ rv: '42', deleting: true })], ['conflict']);
    expect(await run(deps(f.pods))).toEqual({ outcome: 'already-deleting' });
    expect(f.calls).toEqual(['get spark/d1', `delete spark/d1 {uid:${UID},rv:41}`, 'get spark/d1']);
  });

  it('re-created between the GET and the DELETE → 409, GET again → replaced', async () => {
    const other = driver({ uid: '99999999-0000-4000-8000-000000000000', rv: '50' });
    const f = fakePods([driver({ rv: '41' }), other], ['conflict']);
    expect(await run(deps(f.pods))).toEqual({ outcome: 'replaced' });
  });

  it('changed again and again (every DELETE refused) → a failed outcome, retried with backoff; never a DELETE without the version', async () => {
    const f = fakePods(driver({ rv: '41' }), 'conflict');
    const o = await run(deps(f.pods));
    expect(o).toMatchObject({ outcome: 'failed', step: 'delete', code: 409, reason: 'Conflict' });
    const deletes = f.calls.filter((c) => c.startsWith('delete'));
    expect(deletes.length).toBe(3);
    expect(deletes.every((c) => c.includes(',rv:41'))).toBe(true);
  });
});

describe("the handler's own deadline: finish time of the re-checked pod + this replica's retention", () => {
  // Enqueued by a replica with a 5 s retention (deadline NOW - 250): this replica keeps pods a minute.
  const finishedAt = NOW - 5250;
  const longer = { retentionMs: 60_000 };
  const later = { outcome: 'not-yet', dueInMs: 54_750, deadlineMs: NOW + 54_750 };

  it('live: retention raised since the job was enqueued → not-yet to finishedAt + own retention, no DELETE', async () => {
    const f = fakePods(driver({ finishedAt }));
    expect(await run(deps(f.pods, longer))).toEqual(later);
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('resource-version: the cached copy says the same → not-yet, no request at all', async () => {
    const f = fakePods(driver({ finishedAt }));
    const d = deps(f.pods, { ...longer, recheck: 'resource-version', cached: () => driver({ finishedAt }) });
    expect(await run(d)).toEqual(later);
    expect(f.calls).toEqual([]);
  });

  it('cache: the same from the cached copy', async () => {
    const f = fakePods(driver({ finishedAt }));
    const d = deps(f.pods, { ...longer, recheck: 'cache', cached: () => driver({ finishedAt }) });
    expect(await run(d)).toEqual(later);
    expect(f.calls).toEqual([]);
  });

  it('a job run early whatever its stored deadline says (edited to 0 and promoted) → not-yet from the pod', async () => {
    const f = fakePods(driver({ finishedAt: NOW - 1000 }));
    const edited = { ...job, deadlineMs: 0 };
    expect(await cleanupDriverPod(edited, deps(f.pods), new AbortController().signal)).toEqual({
      outcome: 'not-yet',
      dueInMs: 4000,
      deadlineMs: NOW + 4000,
    });
    expect(f.calls).toEqual(['get spark/d1']);
  });

  it('the same retention → due as stored: DELETE', async () => {
    const f = fakePods(driver({ finishedAt }));
    expect(await run(deps(f.pods))).toEqual({ outcome: 'accepted', latenessMs: 250 });
  });

  it("no finishedAt → the latest of the conditions' lastTransitionTime (a Kubernetes time, the same for every replica)", async () => {
    const f = fakePods(driver({ transitions: [NOW - 600_000, NOW - 2000] }));
    expect(await run(deps(f.pods))).toEqual({ outcome: 'not-yet', dueInMs: 3000, deadlineMs: NOW + 3000 });
  });

  it('no finishedAt, no conditions → when this replica first saw it terminal', async () => {
    const f = fakePods(driver());
    const d = deps(f.pods, { firstSeenTerminalMs: (uid) => (uid === UID ? NOW - 1000 : undefined) });
    expect(await run(d)).toEqual({ outcome: 'not-yet', dueInMs: 4000, deadlineMs: NOW + 4000 });
  });

  it('no time of its own and never seen terminal here → the stored deadline stands', async () => {
    const f = fakePods(driver());
    expect(await run(deps(f.pods, longer))).toEqual({ outcome: 'accepted', latenessMs: 250 });
  });

  it('finishedAt 1970-01-01 on a pod created 10 min ago → not a finish time: first seen terminal stands in', async () => {
    const f = fakePods(driver({ finishedAt: 0 }));
    const d = deps(f.pods, { firstSeenTerminalMs: () => NOW - 1000 });
    expect(await run(d)).toEqual({ outcome: 'not-yet', dueInMs: 4000, deadlineMs: NOW + 4000 });
  });

  it('finishedAt 9999-12-31 → not a finish time either (it would never be due): first seen terminal stands in', async () => {
    const f = fakePods(driver({ finishedAt: Date.parse('9999-12-31T00:00:00Z') }));
    const d = deps(f.pods, { firstSeenTerminalMs: () => NOW - 6000 });
    expect(await run(d)).toEqual({ outcome: 'accepted', latenessMs: 250 });
  });
});

describe('the machine paused while the DELETE waited for its token (a VM stopped: no clock of ours moved)', () => {
  it('the leadership backend is asked again after the wait: the lease lapsed meanwhile → fenced, nothing sent', async () => {
    // The real pod API over a transport that records what would be written, behind a rate limiter held until
    // the test lets it go.
    const written: string[] = [];
    const http: KubeHttp = {
      server: 'https://kube.example',
      async request(method, path, o) {
        o?.beforeSend?.();
        written.push(`${method} ${path}`);
        return { statusCode: 200, headers: {}, body: { kind: 'Pod' } };
      },
      stream: async () => {
        throw new Error('no watch here');
      },
      close: async () => undefined,
    };
    const token = Promise.withResolvers<void>();
    let waiting = false;
    const pods = createPodApi({
      http,
      limiter: {
        take: () => {
          waiting = true;
          return token.promise;
        },
      },
    });
    let keyOurs = true;
    let fences = 0;
    const d = deps(pods, {
      recheck: 'resource-version',
      cached: () => driver(),
      fence: async () => {
        fences += 1;
        if (!keyOurs) throw new FencedError('leader key gone or re-created');
      },
      // The lease looks fresh: its age is measured on the monotonic clock, which did not move in the pause.
      stillLeader: () => true,
    });
    const result = run(d);
    await waitFor('the DELETE waiting in the rate limiter', () => waiting);
    keyOurs = false; // meanwhile etcd expired the lease, another replica was elected
    token.resolve();
    expect(await result).toEqual({ outcome: 'fenced', reason: 'leader key gone or re-created' });
    expect(written).toEqual([]);
    expect(fences).toBe(2);
  });
});
