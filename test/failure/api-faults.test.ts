/**
 * Failure modes: the Kubernetes API misbehaving. The sandbox API server injects 403, 429 with
 * Retry-After, 500/503 bursts, connection resets, answers slower than the client timeout, dropped
 * watches, 410 Gone and a failing initial list. Real replica processes, Redis and etcd.
 *
 * Rejected, reset or timed-out DELETEs are retried by design, so these cases count *accepted* DELETEs
 * (200/202) per pod: at most one. The UID precondition makes the retries harmless.
 */
import { describe, expect, it } from 'vitest';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  bystandersIntact,
  CLEAN,
  checkInvariants,
  createBystanders,
  createDrivers,
  firstLeader,
  replicaEnv,
  SOAK,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();

/** The GET-then-DELETE re-check mode: the cases with GET faults need its GET. */
const LIVE = { SDC_RECHECK: 'live' };
const podsPath = (ns: string) => `^/api/v1/namespaces/${ns}/pods`;
const codesOf = (uid: string) => cluster().server.requests.deletesByUid().get(uid) ?? [];
const failures = (r: ReplicaProcess, ns: string) =>
  r.lines.filter((l) => l.outcome === 'failed' && l.namespace === ns);

/** Starts one replica for the namespace and waits until it leads (informer synced, reconciled). */
async function leaderFor(ns: string, prefix: string, extra: Record<string, string> = {}) {
  const r = cluster().startReplica(`${prefix}-r`, replicaEnv(cluster(), ns, prefix, extra));
  await firstLeader([r], ns);
  await r.waitForLine((l) => l.msg === 'reconciled' && l.namespace === ns, 60_000);
  return r;
}

describe('API faults', () => {
  it('403 on every DELETE for a while (RBAC broken), then fixed → warnings with the Status, then every pod cleaned', async () => {
    const ns = 'api-403';
    const windowMs = SOAK ? 40_000 : 4_000;
    // A short reconcile: if the outage outlasts the job's attempts, the reconcile retries failed jobs.
    const r = await leaderFor(ns, 'af1', { SDC_RECONCILE_INTERVAL: '3s' });
    cluster().server.faults.inject({ verb: 'delete', path: podsPath(ns), status: 403, durationMs: windowMs });
    const pods = createDrivers(cluster().server, ns, 10, 'rbac');
    const uids = pods.map(uidOf);
    await waitGone(cluster().server, pods, 'pods deleted once RBAC is fixed', windowMs + 60_000);
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000, acceptedOnly: true })).toEqual(
      CLEAN,
    );
    for (const uid of uids) {
      const codes = codesOf(uid);
      expect(codes.at(-1)).toBe(200);
      expect(codes.slice(0, -1).every((c) => c === 403)).toBe(true);
    }
    const f = failures(r, ns);
    expect(f.length).toBeGreaterThanOrEqual(10);
    for (const l of f)
      expect(l).toMatchObject({ level: 'warn', code: 403, reason: 'Forbidden', step: 'delete' });
    const attempts = uids.map((u) => codesOf(u).length);
    console.info(
      `[failure] 403 for ${windowMs} ms: ${f.length} warnings, DELETE requests per pod ${Math.min(...attempts)}–${Math.max(...attempts)}, one accepted each`,
    );
    await stopAll([r]);
  }, 120_000);

  it('429 with Retry-After: 2 → the next attempt comes no sooner than 2 s later, although the base retry delay is 200 ms', async () => {
    const ns = 'api-429';
    const r = await leaderFor(ns, 'af2');
    cluster().server.faults.inject({
      verb: 'delete',
      path: podsPath(ns),
      status: 429,
      retryAfterSeconds: 2,
      count: 3,
    });
    const [pod] = createDrivers(cluster().server, ns, 1, 'throttled');
    const uid = uidOf(pod);
    await waitGone(cluster().server, pod ? [pod] : [], 'pod deleted after three 429s', 60_000);
    const arrivals = cluster()
      .server.requests.recent()
      .filter((x) => x.verb === 'delete' && x.uid === uid)
      .map((x) => x.atMs);
    expect(codesOf(uid)).toEqual([429, 429, 429, 200]);
    const spacing = arrivals.slice(1).map((t, i) => t - (arrivals[i] ?? 0));
    for (const s of spacing) expect(s).toBeGreaterThanOrEqual(2000);
    expect(failures(r, ns).map((l) => l.retryAfterMs)).toEqual([2000, 2000, 2000]);
    expect(checkInvariants(cluster().server, ns, [uid], { retentionMs: 1000, acceptedOnly: true })).toEqual(
      CLEAN,
    );
    console.info(`[failure] 429 Retry-After 2 s: DELETE spacing ${spacing.join(', ')} ms`);
    await stopAll([r]);
  }, 120_000);

  it('429 with a Retry-After of a day → the retry waits retryMaxDelay (2 s), not a day: the pod is cleaned', async () => {
    const ns = 'api-429-day';
    const r = await leaderFor(ns, 'af7');
    cluster().server.faults.inject({
      verb: 'delete',
      path: podsPath(ns),
      status: 429,
      retryAfterSeconds: 86_400,
      count: 1,
    });
    const [pod] = createDrivers(cluster().server, ns, 1, 'parked');
    const uid = uidOf(pod);
    // Unbounded, the job would be parked for a day and this would time out.
    await waitGone(cluster().server, pod ? [pod] : [], 'pod deleted after one 429 asking for a day', 30_000);
    expect(codesOf(uid)).toEqual([429, 200]);
    expect(failures(r, ns).map((l) => l.retryAfterMs)).toEqual([86_400_000]);
    await stopAll([r]);
  }, 120_000);

  it('500 and 503 bursts on GET and DELETE → retried with backoff; every pod cleaned, one accepted DELETE each', async () => {
    const ns = 'api-5xx';
    const n = SOAK ? 300 : 40;
    const r = await leaderFor(ns, 'af3', LIVE); // GET faults need the GET of `live`
    const path = podsPath(ns);
    cluster().server.faults.inject({ verb: 'get', path, status: 500, count: n / 4 });
    cluster().server.faults.inject({ verb: 'delete', path, status: 500, count: n / 2 });
    cluster().server.faults.inject({ verb: 'delete', path, status: 503, retryAfterSeconds: 1, count: n / 2 });
    const bystanders = createBystanders(cluster().server, ns);
    const pods = createDrivers(cluster().server, ns, n, 'burst5xx');
    const uids = pods.map(uidOf);
    await waitGone(cluster().server, pods, 'pods deleted after the 5xx bursts', 90_000);
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000, acceptedOnly: true })).toEqual(
      CLEAN,
    );
    expect(bystandersIntact(cluster().server, bystanders)).toBe(true);
    const all = uids.flatMap(codesOf);
    expect(all.filter((c) => c === 500)).toHaveLength(n / 2);
    expect(all.filter((c) => c === 503)).toHaveLength(n / 2);
    const f = failures(r, ns);
    expect(new Set(f.map((l) => `${l.step} ${l.code}`))).toEqual(
      new Set(['get 500', 'delete 500', 'delete 503']),
    );
    console.info(`[failure] 5xx bursts: ${f.length} failed attempts logged, ${n} pods cleaned`);
    await stopAll([r]);
  }, 120_000);

  it('connection resets on GET and DELETE → network failures retried; every pod cleaned, one accepted DELETE each', async () => {
    const ns = 'api-reset';
    const r = await leaderFor(ns, 'af4', LIVE);
    const path = podsPath(ns);
    cluster().server.faults.inject({ verb: 'get', path, reset: true, count: 5 });
    cluster().server.faults.inject({ verb: 'delete', path, reset: true, count: 10 });
    const pods = createDrivers(cluster().server, ns, 10, 'reset');
    const uids = pods.map(uidOf);
    await waitGone(cluster().server, pods, 'pods deleted after the resets', 60_000);
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000, acceptedOnly: true })).toEqual(
      CLEAN,
    );
    expect(uids.flatMap(codesOf).filter((c) => c === 0)).toHaveLength(10);
    const f = failures(r, ns);
    expect(f.length).toBe(15);
    for (const l of f)
      expect(l).toMatchObject({
        level: 'warn',
        reason: expect.stringMatching(/ECONNRESET|UND_ERR_SOCKET|EPIPE/),
      });
    await stopAll([r]);
  }, 150_000);

  it('answers slower than the client timeout (apiTimeout 1 s, latency 2.5 s) → Timeout failures, retried; at most one accepted DELETE per pod', async () => {
    const ns = 'api-slow';
    const r = await leaderFor(ns, 'af5', { ...LIVE, SDC_API_TIMEOUT: '1s' });
    const path = podsPath(ns);
    cluster().server.faults.inject({ verb: 'get', path, latencyMs: 2500, count: 3 });
    cluster().server.faults.inject({ verb: 'delete', path, latencyMs: 2500, count: 5 });
    const pods = createDrivers(cluster().server, ns, 10, 'slow');
    const uids = pods.map(uidOf);
    await waitGone(cluster().server, pods, 'pods deleted despite slow answers', 60_000);
    // A DELETE the client gave up on may still be applied by the server later: its retry then finds the
    // pod gone (404) or deletes it first and the late one gets 404. Never two accepted.
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000, acceptedOnly: true })).toEqual(
      CLEAN,
    );
    const f = failures(r, ns);
    expect(f.filter((l) => l.reason === 'Timeout').length).toBe(8);
    const multi = uids.map(codesOf).filter((c) => c.length > 1);
    console.info(
      `[failure] slow API: ${f.length} timeouts; DELETE codes of pods with retries: ${JSON.stringify(multi)}`,
    );
    await stopAll([r]);
  }, 150_000);

  it('watches dropped mid-stream (again and again) → the informer re-watches; pods finishing afterwards are cleaned', async () => {
    const ns = 'api-dropwatch';
    const r = await leaderFor(ns, 'af6');
    const watchesBefore = cluster().server.requests.countsByVerb().watch ?? 0;
    cluster().server.dropWatches();
    cluster().server.faults.inject({ verb: 'watch', path: podsPath(ns), dropWatch: true, count: 3 });
    const pods = createDrivers(cluster().server, ns, 10, 'dropped');
    const uids = pods.map(uidOf);
    // No periodic reconcile in this window (10 min): only the informer can see these pods.
    await waitGone(cluster().server, pods, 'pods seen after the dropped watches and deleted', 60_000);
    // The dropped stream and at least one dropped re-watch were followed by another watch (a watch dropped
    // within a second is an error for the informer, as for client-go's reflector: it relists after a backoff).
    await waitFor(
      'a new watch after each dropped one',
      () => (cluster().server.requests.countsByVerb().watch ?? 0) - watchesBefore >= 2,
      30_000,
    );
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
    expect(uids.map((u) => codesOf(u).length)).toEqual(uids.map(() => 1));
    await stopAll([r]);
  }, 150_000);

  it('410 Gone (events compacted while the watch was down) → the informer relists; pods are cleaned', async () => {
    const ns = 'api-410';
    const r = await leaderFor(ns, 'af7');
    const listsBefore = cluster().server.requests.countsByVerb().list ?? 0;
    // In one tick of the server's process: the watch ends, pods finish unseen, their events are
    // compacted away. The informer's re-watch from its resourceVersion gets 410 and must relist.
    cluster().server.dropWatches();
    const pods = createDrivers(cluster().server, ns, 10, 'gone');
    const bystanders = createBystanders(cluster().server, ns);
    cluster().server.compact();
    const uids = pods.map(uidOf);
    await waitGone(cluster().server, pods, 'pods seen by the relist and deleted', 60_000);
    expect((cluster().server.requests.countsByVerb().list ?? 0) - listsBefore).toBeGreaterThanOrEqual(1);
    expect(bystandersIntact(cluster().server, bystanders)).toBe(true);
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
    expect(uids.map((u) => codesOf(u).length)).toEqual(uids.map(() => 1));
    await stopAll([r]);
  }, 150_000);

  it('the initial list failing (500, 403, 500) → the informer restarts with growing backoff; the leader waits for the sync, then cleans', async () => {
    const ns = 'api-initlist';
    const path = podsPath(ns);
    cluster().server.faults.inject({ verb: 'list', path, status: 500, count: 1 });
    cluster().server.faults.inject({ verb: 'list', path, status: 403, count: 1 });
    cluster().server.faults.inject({ verb: 'list', path, status: 500, count: 1 });
    const pods = createDrivers(cluster().server, ns, 10, 'early', 5000);
    const uids = pods.map(uidOf);
    const r = cluster().startReplica('af8-r', replicaEnv(cluster(), ns, 'af8'));
    await waitGone(cluster().server, pods, 'pods deleted after the list recovered', 60_000);
    const restarts = r.lines.filter(
      (l) => l.msg === 'informer stopped on an error; restarting' && l.namespace === ns,
    );
    expect(restarts.map((l) => l.code)).toEqual([500, 403, 500]);
    const delays = restarts.map((l) => Number(l.retryInMs));
    // Exponential backoff with jitter: base 500 ms · 2^(n−1) · U(0.5, 1).
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(250 * 2 ** i);
      expect(d).toBeLessThanOrEqual(500 * 2 ** i);
    });
    // The leader reconciled only once the informer had synced: it saw all ten pods.
    const reconciled = r.lines.find((l) => l.msg === 'reconciled' && l.namespace === ns);
    expect(reconciled?.pods).toBe(10);
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
    expect(uids.map((u) => codesOf(u).length)).toEqual(uids.map(() => 1));
    expect(r.child.exitCode).toBeNull();
    console.info(`[failure] initial list failing: restart delays ${delays.join(', ')} ms`);
    await stopAll([r]);
  }, 150_000);
});
