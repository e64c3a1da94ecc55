/**
 * The product end to end: replica processes (`spark-driver-cleaner run`) against real Redis, real etcd and
 * sandbox API servers. Every assertion about DELETEs reads the sandbox's request log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sparkDriverPod, startSparkWorkload } from '../../harness/sandbox/workload.ts';
import { firstLeader } from '../failure/helpers.ts';
import { boundMs, E2E_BOUNDS } from '../helpers/bounds.ts';
import {
  createTerminatedDrivers,
  deletesPer,
  linesWhere,
  startTestCluster,
  type TestCluster,
} from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startTestCluster(['alpha', 'beta']);
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

const alpha = () => cluster.servers.alpha as NonNullable<TestCluster['servers'][string]>;
const beta = () => cluster.servers.beta as NonNullable<TestCluster['servers'][string]>;
const isDriver = (p: { metadata?: { labels?: Record<string, string> } }) =>
  p.metadata?.labels?.['spark-role'] === 'driver';
const env = (targets: string, prefix: string, extra: Record<string, string> = {}) => ({
  SDC_TARGETS: targets,
  SDC_QUEUE_PREFIX: prefix,
  SDC_RETENTION: '1s',
  SDC_ELECTION_TTL_SECONDS: '3',
  SDC_RETRY_BASE_DELAY: '200ms',
  SDC_RETRY_MAX_DELAY: '2s',
  ...extra,
});
const warnings = (prefix?: string) =>
  linesWhere(
    cluster.replicas,
    (l) => (l.level === 'warn' || l.level === 'error') && (!prefix || String(l.msg).startsWith(prefix)),
  );

/** Per replica: each outcome's count and every leadership or warning line, for a failure's message. */
function tally(replicas: Parameters<typeof linesWhere>[0]): string {
  return replicas
    .map((r) => {
      const outcomes = new Map<string, number>();
      for (const l of r.lines)
        if (l.outcome) outcomes.set(String(l.outcome), (outcomes.get(String(l.outcome)) ?? 0) + 1);
      const events = r.lines
        .filter((l) => /leader|lost|resign/.test(String(l.msg)) || l.level === 'warn' || l.level === 'error')
        .map((l) => `  ${l.time} ${l.level} ${l.msg}${l.reason ? ` (${l.reason})` : ''}`);
      return [`${r.id}: ${JSON.stringify(Object.fromEntries(outcomes))}`, ...events.slice(0, 30)].join('\n');
    })
    .join('\n');
}

describe('coordinated cleanup', () => {
  it('three replicas, one target, 200 terminating drivers → exactly 200 DELETEs, all sent by the leader, none leaked', async () => {
    const ns = 'one';
    // A 10 s lease: this test is about one leader's work, not failover (a busy CI machine can stall a replica 3 s).
    const e = env(`alpha:${ns}`, 't1', {
      SDC_API_QPS: '500',
      SDC_API_BURST: '500',
      SDC_CONCURRENCY: '20',
      SDC_ELECTION_TTL_SECONDS: '10',
    });
    const replicas = ['r1', 'r2', 'r3'].map((id) => cluster.startReplica(id, e));
    const workload = startSparkWorkload(alpha(), {
      namespaces: [ns],
      pods: 200,
      ratePerSecond: 100,
      runMs: 300,
      pendingMs: 100,
    });
    await workload.done;
    const uids = workload.stats.terminated.map((t) => t.uid);
    expect(uids).toHaveLength(200);
    await waitFor(
      'every terminated driver deleted',
      () => alpha().pods.list(ns).filter(isDriver).length === 0,
      E2E_BOUNDS.cleaned,
    );
    expect(deletesPer(alpha(), uids)).toEqual(uids.map(() => 1));
    expect(alpha().requests.deletesByUid().size).toBe(200);
    // Executors went with their drivers (garbage collection), never by a DELETE of ours.
    expect(alpha().pods.list(ns)).toEqual([]);
    // The log line follows the API's answer: wait for it rather than racing the replica's stdout.
    const accepted = await waitFor(
      '200 accepted log lines',
      () => {
        const ls = linesWhere(replicas, (l) => l.outcome === 'accepted' && l.namespace === ns);
        return ls.length >= 200 ? ls : undefined;
      },
      E2E_BOUNDS.follows,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${tally(replicas)}`);
    });
    expect(accepted).toHaveLength(200);
    // Every DELETE was sent by a leader: the replica elected first, or the one it handed the target over to
    // (src/leadership/assignment.ts), one term after another.
    const elected = linesWhere(replicas, (l) => l.msg === 'elected leader' && l.namespace === ns);
    const ended = linesWhere(
      replicas,
      (l) => (l.msg === 'leadership ended' || l.msg === 'leadership lost') && l.namespace === ns,
    );
    expect(elected.length).toBe(1 + ended.length);
    const leaders = new Set(elected.map((l) => l.replica));
    for (const l of accepted) expect(leaders).toContain(l.replica);
    for (const l of accepted) {
      expect(l).toMatchObject({
        level: 'info',
        context: 'alpha',
        namespace: ns,
        pod: expect.any(String),
        uid: expect.any(String),
        latenessMs: expect.any(Number),
      });
    }
    // No DELETE before the deadline: finishedAt + retention (1 s) ≤ the time the leader logged it.
    const finished = new Map(workload.stats.terminated.map((t) => [t.uid, t.finishedAtMs]));
    for (const l of accepted)
      expect(Date.parse(String(l.time))).toBeGreaterThanOrEqual((finished.get(String(l.uid)) ?? 0) + 1000);
    expect(warnings('cleanup failed')).toEqual([]);
    for (const r of replicas) r.kill('SIGTERM');
    expect(await Promise.all(replicas.map((r) => r.exited))).toEqual([0, 0, 0]);
  });

  it('two namespaces and two contexts → a leader per target, each target cleaned once per pod', async () => {
    const targets = 'alpha:two-a,alpha:two-b,beta:two-c';
    const replicas = [
      cluster.startReplica('m1', env(targets, 't2')),
      cluster.startReplica('m2', env(targets, 't2')),
    ];
    const a = startSparkWorkload(alpha(), {
      namespaces: ['two-a', 'two-b'],
      pods: 20,
      ratePerSecond: 40,
      runMs: 200,
      pendingMs: 50,
    });
    const b = startSparkWorkload(beta(), {
      namespaces: ['two-c'],
      pods: 10,
      ratePerSecond: 40,
      runMs: 200,
      pendingMs: 50,
    });
    await Promise.all([a.done, b.done]);
    await waitFor(
      'alpha cleaned',
      () =>
        alpha().pods.list('two-a').filter(isDriver).length +
          alpha().pods.list('two-b').filter(isDriver).length ===
        0,
      E2E_BOUNDS.cleaned,
    );
    await waitFor(
      'beta cleaned',
      () => beta().pods.list('two-c').filter(isDriver).length === 0,
      E2E_BOUNDS.cleaned,
    );
    const ua = a.stats.terminated.map((t) => t.uid);
    const ub = b.stats.terminated.map((t) => t.uid);
    expect(deletesPer(alpha(), ua)).toEqual(ua.map(() => 1));
    expect(deletesPer(beta(), ub)).toEqual(ub.map(() => 1));
    // Each target elected its own leader (possibly the same replica), and exactly one per target at a time.
    const elected = linesWhere(replicas, (l) => l.msg === 'elected leader');
    expect(new Set(elected.map((l) => `${l.context}:${l.namespace}`))).toEqual(
      new Set(['alpha:two-a', 'alpha:two-b', 'beta:two-c']),
    );
    // One election per target (more only if a lease changed hands under load, never two leaders at once).
    expect(elected.length).toBeGreaterThanOrEqual(3);
    for (const r of replicas) r.kill('SIGTERM');
    await Promise.all(replicas.map((r) => r.exited));
  });

  it('informerScope: cluster → one LIST and one WATCH per replica and context; other namespaces never touched', async () => {
    const targets = 'alpha:cs-a,alpha:cs-b,beta:cs-c';
    const replicas = [
      cluster.startReplica('s1', env(targets, 'cs', { SDC_INFORMER_SCOPE: 'cluster' })),
      cluster.startReplica('s2', env(targets, 'cs', { SDC_INFORMER_SCOPE: 'cluster' })),
    ];
    const a = startSparkWorkload(alpha(), {
      namespaces: ['cs-a', 'cs-b'],
      pods: 20,
      ratePerSecond: 40,
      runMs: 200,
      pendingMs: 50,
    });
    const b = startSparkWorkload(beta(), {
      namespaces: ['cs-c'],
      pods: 10,
      ratePerSecond: 40,
      runMs: 200,
      pendingMs: 50,
    });
    // Drivers the selector matches in a namespace that is no target: seen by the cluster watch, left alone.
    const z = startSparkWorkload(alpha(), {
      namespaces: ['cs-z'],
      pods: 5,
      ratePerSecond: 40,
      runMs: 200,
      pendingMs: 50,
    });
    await Promise.all([a.done, b.done, z.done]);
    const driversIn = (server: typeof alpha, namespaces: string[]) =>
      namespaces.reduce((n, ns) => n + server().pods.list(ns).filter(isDriver).length, 0);
    await waitFor('alpha cleaned', () => driversIn(alpha, ['cs-a', 'cs-b']) === 0, E2E_BOUNDS.cleaned);
    await waitFor('beta cleaned', () => driversIn(beta, ['cs-c']) === 0, E2E_BOUNDS.cleaned);
    const ua = a.stats.terminated.map((t) => t.uid);
    const ub = b.stats.terminated.map((t) => t.uid);
    expect(deletesPer(alpha(), ua)).toEqual(ua.map(() => 1));
    expect(deletesPer(beta(), ub)).toEqual(ub.map(() => 1));
    const uz = z.stats.terminated.map((t) => t.uid);
    expect(uz.length).toBe(5);
    expect(deletesPer(alpha(), uz)).toEqual(uz.map(() => 0));
    expect(driversIn(alpha, ['cs-z'])).toBe(5);
    // Per server: one cluster-scope LIST and WATCH per replica, no namespaced list or watch of these targets.
    for (const server of [alpha(), beta()]) {
      const informerRequests = () =>
        server.requests
          .arrivals()
          .filter(
            (r) =>
              (r.verb === 'list' || r.verb === 'watch') && /^\/api\/v1\/(pods|namespaces\/cs-)/.test(r.path),
          );
      // A follower's informers may still be starting (its lists wait on the rate limiter) when the leader is done.
      await waitFor(
        'both replicas watching',
        () => informerRequests().filter((r) => r.verb === 'watch').length >= 2,
        E2E_BOUNDS.follows,
      );
      expect(
        informerRequests()
          .map((r) => `${r.verb} ${r.path}`)
          .sort(),
      ).toEqual(['list /api/v1/pods', 'list /api/v1/pods', 'watch /api/v1/pods', 'watch /api/v1/pods']);
    }
    // Every pod reached its own target's cleaner: none asked for under another target's namespace (a 404).
    const misrouted = alpha()
      .requests.recent()
      .filter((r) => r.path.startsWith('/api/v1/namespaces/cs-') && r.code === 404);
    expect(misrouted).toEqual([]);
    for (const r of replicas) r.kill('SIGTERM');
    await Promise.all(replicas.map((r) => r.exited));
  });

  it('Redis data lost, then the leader SIGKILLed → the new leader reconciles and deletes each pod exactly once', async () => {
    const ns = 'failover';
    const e = env(`alpha:${ns}`, 't3', { SDC_RETENTION: '5s' });
    const replicas = [cluster.startReplica('k1', e), cluster.startReplica('k2', e)];
    await Promise.race(
      replicas.map((r) =>
        r.waitForLine((l) => l.msg === 'elected leader' && l.namespace === ns, E2E_BOUNDS.elected),
      ),
    );
    const pods = createTerminatedDrivers(alpha(), ns, 10, 'fo');
    const uids = pods.map((p) => p.metadata?.uid ?? '');
    const queue = cluster.queueOf('alpha', ns, 't3');
    try {
      await waitFor(
        '10 delayed jobs',
        async () => (await queue.bullQueue.getDelayedCount()) === 10,
        E2E_BOUNDS.follows,
      );
      // Both informers have seen (and enqueued) the ten pods, so neither has anything new to say.
      await waitFor(
        'both replicas saw the pods',
        () =>
          replicas.every(
            (r) => r.lines.filter((l) => l.msg === 'enqueue' && l.namespace === ns).length >= 10,
          ),
        E2E_BOUNDS.follows,
      );
      // Leadership settled: the first elected may hand the target over to its assigned replica, whose election
      // reconcile must be over before the loss (else it, not a reconcile after the loss, re-adds the jobs).
      const leader = await firstLeader(replicas, ns, E2E_BOUNDS.elected);
      await waitFor(
        'the leader reconciled in its term',
        () => {
          const lines = leader.lines.filter((l) => l.namespace === ns);
          return lines
            .slice(lines.findLastIndex((l) => l.msg === 'elected leader'))
            .some((l) => l.msg === 'reconciled');
        },
        E2E_BOUNDS.follows,
      );
      // Every job is lost while the informers, which enqueued them, have nothing new to say: only a
      // reconcile can bring them back. Then the leader dies, so its successor's election reconcile must.
      await queue.redis.flushall();
      leader.kill('SIGKILL');
      await leader.exited;
    } finally {
      await queue.dispose();
    }
    await waitFor(
      'pods deleted by the new leader',
      () => alpha().pods.list(ns).filter(isDriver).length === 0,
      // Measured ≤ 5 s: the killed leader's lease ends within a TTL (3 s), then the new term reconciles.
      boundMs(5_000),
    );
    expect(deletesPer(alpha(), uids)).toEqual(uids.map(() => 1));
    // Reconciles before the loss found the informers' jobs (added 0); after it, they re-added all ten.
    const added = linesWhere(replicas, (l) => l.msg === 'reconciled' && l.namespace === ns).reduce(
      (n, l) => n + Number(l.added),
      0,
    );
    expect(
      added,
      JSON.stringify(
        linesWhere(replicas, (l) => l.namespace === ns && l.msg !== 'driver pod deleted').map((l) => [
          l.time,
          l.replica,
          l.msg,
          l.result ?? l.added ?? l.reason ?? l.why ?? '',
        ]),
      ),
    ).toBe(10);
    for (const r of replicas) r.kill('SIGTERM');
    await Promise.all(replicas.map((r) => r.exited));
  });

  it('a pod deleted by someone during retention, or held by a finalizer, is cancelled and never DELETEd by us', async () => {
    const ns = 'cancel';
    const e = env(`alpha:${ns}`, 't4', { SDC_RETENTION: '2s' });
    const replicas = [cluster.startReplica('c1', e), cluster.startReplica('c2', e)];
    await Promise.race(
      replicas.map((r) =>
        r.waitForLine((l) => l.msg === 'elected leader' && l.namespace === ns, E2E_BOUNDS.elected),
      ),
    );
    const [byPerson, control] = createTerminatedDrivers(alpha(), ns, 2, 'cx');
    // A terminal driver already being deleted: a finalizer holds it with deletionTimestamp set.
    const held = sparkDriverPod({
      namespace: ns,
      appName: 'held',
      phase: 'Succeeded',
      nowMs: alpha().clock.now(),
    });
    held.metadata = { ...held.metadata, finalizers: ['example.com/audit-export'] };
    const heldPod = alpha().pods.create(held);
    alpha().pods.delete(ns, heldPod.metadata?.name ?? ''); // in-process: not counted as an API request
    const queue = cluster.queueOf('alpha', ns, 't4');
    try {
      const uidOf = (p: typeof byPerson) => p?.metadata?.uid ?? '';
      await waitFor(
        'jobs of the two plain pods',
        async () => (await queue.bullQueue.getDelayedCount()) === 2,
        E2E_BOUNDS.follows,
      );
      alpha().pods.delete(ns, byPerson?.metadata?.name ?? '');
      await waitFor(
        'job of the deleted pod cancelled',
        async () => !(await queue.bullQueue.getJob(uidOf(byPerson))),
        E2E_BOUNDS.follows,
      );
      expect(await queue.isTombstoned(uidOf(byPerson))).toBe(true);
      expect(await queue.isTombstoned(heldPod.metadata?.uid ?? '')).toBe(true);
      // The control pod has the same deadline; once it is deleted, the others' deadlines have passed too.
      await waitFor(
        'control pod deleted',
        () => !alpha().pods.get(ns, control?.metadata?.name ?? ''),
        E2E_BOUNDS.cleaned,
      );
      expect(deletesPer(alpha(), [uidOf(byPerson), heldPod.metadata?.uid ?? '', uidOf(control)])).toEqual([
        0, 0, 1,
      ]);
      // A reconcile does not bring them back either.
      expect(
        await queue.enqueue({
          context: 'alpha',
          namespace: ns,
          pod: 'x',
          uid: uidOf(byPerson),
          deadlineMs: 0,
          finishedAtMs: 0,
          enqueuedBy: 't',
        }),
      ).toBe('tombstoned');
      expect(await queue.bullQueue.getJob(heldPod.metadata?.uid ?? '')).toBeUndefined();
    } finally {
      await queue.dispose();
      for (const r of replicas) r.kill('SIGTERM');
      await Promise.all(replicas.map((r) => r.exited));
    }
  });

  it('stale jobs: an absent pod is a quiet no-op; a re-created pod of the same name is never deleted by the old job', async () => {
    const ns = 'stale';
    const e = env(`alpha:${ns}`, 't5');
    const replicas = [cluster.startReplica('s1', e), cluster.startReplica('s2', e)];
    await Promise.race(
      replicas.map((r) =>
        r.waitForLine((l) => l.msg === 'elected leader' && l.namespace === ns, E2E_BOUNDS.elected),
      ),
    );
    // A running driver named like an old, finished one: the old UID's job must not touch it.
    const current = alpha().pods.create(
      sparkDriverPod({ namespace: ns, appName: 'reborn', phase: 'Running', nowMs: alpha().clock.now() }),
    );
    const name = current.metadata?.name ?? '';
    const queue = cluster.queueOf('alpha', ns, 't5');
    try {
      const job = (uid: string, pod: string) => ({
        context: 'alpha',
        namespace: ns,
        pod,
        uid,
        deadlineMs: Date.now(),
        finishedAtMs: Date.now(),
        enqueuedBy: 'test',
      });
      await queue.enqueue(job('6a0c4d1e-0000-4000-8000-00000000aaaa', name));
      await queue.enqueue(job('6a0c4d1e-0000-4000-8000-00000000bbbb', 'never-existed-driver'));
      const outcomes = await waitFor(
        'both jobs processed',
        () => {
          const ls = linesWhere(
            replicas,
            (l) => l.namespace === ns && (l.outcome === 'replaced' || l.outcome === 'already-absent'),
          );
          return ls.length >= 2 ? ls : undefined;
        },
        E2E_BOUNDS.follows,
      );
      expect(outcomes.map((l) => [l.outcome, l.level]).sort()).toEqual([
        ['already-absent', 'debug'],
        ['replaced', 'debug'],
      ]);
      expect(alpha().pods.get(ns, name)?.metadata?.uid).toBe(current.metadata?.uid);
      expect(
        alpha()
          .requests.deletesByUid()
          .get(current.metadata?.uid ?? ''),
      ).toBeUndefined();
      expect(warnings().filter((l) => l.namespace === ns)).toEqual([]);
    } finally {
      await queue.dispose();
      for (const r of replicas) r.kill('SIGTERM');
      await Promise.all(replicas.map((r) => r.exited));
    }
  });

  it('403, 429, 500 and a connection reset are logged with their details and retried until the pod is deleted', async () => {
    const ns = 'faults';
    const e = env(`alpha:${ns}`, 't6');
    const replica = cluster.startReplica('f1', e);
    await replica.waitForLine((l) => l.msg === 'elected leader' && l.namespace === ns, E2E_BOUNDS.elected);
    const path = `/api/v1/namespaces/${ns}/pods/`;
    // Faults apply in order of injection to the next matching requests.
    alpha().faults.inject({ verb: 'delete', path, status: 403, count: 1 });
    alpha().faults.inject({ verb: 'delete', path, status: 429, retryAfterSeconds: 1, count: 1 });
    alpha().faults.inject({ verb: 'delete', path, status: 500, count: 1 });
    alpha().faults.inject({ verb: 'delete', path, reset: true, count: 1 });
    const [pod] = createTerminatedDrivers(alpha(), ns, 1, 'flaky');
    const uid = pod?.metadata?.uid ?? '';
    // Measured ≤ 4.5 s: four failed DELETEs, each retried after its backoff (429: after its Retry-After, 1 s).
    await waitFor(
      'pod finally deleted',
      () => !alpha().pods.get(ns, pod?.metadata?.name ?? ''),
      boundMs(4_500),
    );
    const codes = alpha().requests.deletesByUid().get(uid) ?? [];
    expect([...codes].sort()).toEqual([0, 200, 403, 429, 500].sort());
    await waitFor(
      'the accepted log line',
      () => replica.lines.some((l) => l.outcome === 'accepted'),
      E2E_BOUNDS.follows,
    );
    const failed = replica.lines.filter((l) => l.outcome === 'failed');
    expect(failed.map((l) => l.level)).toEqual(['warn', 'warn', 'warn', 'warn']);
    expect(failed.filter((l) => l.code).map((l) => l.code)).toEqual(expect.arrayContaining([403, 429, 500]));
    // undici names a reset socket UND_ERR_SOCKET ("other side closed"); either way it is a network failure.
    expect(failed.find((l) => !l.code)).toMatchObject({
      reason: expect.stringMatching(/ECONNRESET|UND_ERR_SOCKET|EPIPE/),
    });
    for (const l of failed.filter((x) => x.code))
      expect(l).toMatchObject({
        reason: expect.any(String),
        message: expect.any(String),
        uid,
        pod: pod?.metadata?.name,
      });
    expect(failed.find((l) => l.code === 429)).toMatchObject({
      reason: 'TooManyRequests',
      retryAfterMs: 1000,
    });
    expect(replica.lines.filter((l) => l.outcome === 'accepted')).toHaveLength(1);
    replica.kill('SIGTERM');
    await replica.exited;
  });
});
