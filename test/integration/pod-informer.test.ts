/**
 * Our informer (src/kube/pod-informer.ts) over our transport (src/kube/kube-http.ts) against the sandbox
 * API server, over HTTPS with a bearer token: paged initial list into a trimmed cache, watch events,
 * relist on 410 with a Replace-style diff, backoff on 403, resuming dropped watches, stop(). Then the
 * stream parsing corner cases against a scripted transport (lines split across chunks, HTTP 410, bad JSON).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import type { ClusterAccess } from '../../src/kube/cluster-access.ts';
import { DRIVER_CONTAINER, type DriverPod } from '../../src/kube/driver-pod.ts';
import { createKubeHttp, type KubeHttp, type KubeStream } from '../../src/kube/kube-http.ts';
import {
  createPodInformer,
  type PodEvent,
  type PodEventHandler,
  type PodInformer,
} from '../../src/kube/pod-informer.ts';
import { createRateLimiter } from '../../src/kube/rate-limiter.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../sandbox/helpers.ts';

/** Waits for `cond` (polling every 10 ms), failing with `what` after `timeoutMs` (default 5 s). */
const until = <T>(what: string, cond: () => T | Promise<T>, timeoutMs?: number) =>
  waitFor(cond, what, timeoutMs);

const TOKEN = 'inf0rmer';
/** A limiter that never waits: these tests are about the list and watch, not their rate. */
const unlimited = createRateLimiter({ qps: 100_000, burst: 100_000, monotonicNow: () => performance.now() });
const SELECTOR = 'spark-role=driver';
let server: SandboxApiServer;
let http: KubeHttp;
/** Every path the transport was asked for (with the query string). */
const paths: string[] = [];
/** Every non-watch request with its answer's status code. */
const answered: { path: string; status: number }[] = [];
/** Runs right before a non-watch request is sent: a test's hook between list pages. */
let beforeRequest: ((path: string) => void) | undefined;

beforeAll(async () => {
  server = await startSandboxApiServer({ tls: true, token: TOKEN, contextName: 'test' });
  const access: ClusterAccess = {
    context: 'test',
    server: server.url,
    tls: { ca: Buffer.from(server.caCertPem ?? '') },
    headers: async () => ({ authorization: `Bearer ${TOKEN}` }),
  };
  const inner = createKubeHttp(access);
  http = {
    server: inner.server,
    request: async (method, path, opts) => {
      paths.push(path);
      beforeRequest?.(path);
      const res = await inner.request(method, path, opts);
      answered.push({ path, status: res.statusCode });
      return res;
    },
    stream: (path, signal) => {
      paths.push(path);
      return inner.stream(path, signal);
    },
    close: () => inner.close(),
  };
});
/** Informers of the current test, stopped after it whatever happened. */
const running: PodInformer[] = [];
afterEach(async () => {
  beforeRequest = undefined;
  await Promise.all(running.splice(0).map((i) => i.stop()));
});
afterAll(async () => {
  await http?.close();
  await server?.close();
});

/** A realistic driver pod with the bulk a real one carries (managedFields, env, volumes). */
function createDriver(ns: string, phase: 'Running' | 'Succeeded' | 'Failed' = 'Succeeded'): DriverPod {
  const p = sparkDriverPod({ namespace: ns, phase, nowMs: Date.now() });
  const meta = p.metadata as NonNullable<typeof p.metadata>;
  meta.managedFields = [
    { manager: 'spark-submit', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: {} },
  ];
  meta.annotations = { 'kyuubi.apache.org/session': 'x'.repeat(200) };
  return server.pods.create(p) as unknown as DriverPod;
}

/** A pod the selector leaves out (an executor). */
function createExecutor(ns: string): void {
  const p = sparkDriverPod({ namespace: ns, phase: 'Running', nowMs: Date.now() });
  const meta = p.metadata as NonNullable<typeof p.metadata>;
  meta.name = `${meta.name}-exec-1`;
  meta.labels = { ...meta.labels, 'spark-role': 'executor' };
  server.pods.create(p);
}

const nameOf = (p: DriverPod | undefined) => p?.metadata?.name ?? '';

interface Started {
  informer: PodInformer;
  events: { event: PodEvent; name: string; uid: string; rv: string }[];
  lines: Record<string, unknown>[];
  /** Events as `event name` strings, from index `from`. */
  seen(from?: number): string[];
}

function startInformer(
  ns: string,
  extra: { backoffMs?: number; pageSize?: number; onEvent?: () => void } = {},
): Started {
  const { log, lines } = memoryLogger('debug');
  const events: Started['events'] = [];
  const informer = createPodInformer({
    http,
    limiter: unlimited,
    namespace: ns,
    labelSelector: SELECTOR,
    log,
    now: Date.now,
    backoffMs: extra.backoffMs ?? 50,
    pageSize: extra.pageSize,
  });
  informer.addEventHandler((event, pod) => {
    events.push({
      event,
      name: nameOf(pod),
      uid: pod.metadata?.uid ?? '',
      rv: pod.metadata?.resourceVersion ?? '',
    });
    extra.onEvent?.();
  });
  running.push(informer);
  return {
    informer,
    events,
    lines,
    seen: (from = 0) => events.slice(from).map((e) => `${e.event} ${e.name}`),
  };
}

/** The selected pods of a namespace on the server, as `name@resourceVersion`, sorted. */
function serverState(ns: string): string[] {
  return server.pods
    .list(ns)
    .filter((p) => p.metadata?.labels?.['spark-role'] === 'driver')
    .map((p) => `${p.metadata?.name}@${p.metadata?.resourceVersion}`)
    .sort();
}
/**
 * Waits until the watch has delivered an event: a watch dropped before any event within its first second
 * is a "very short watch", which the informer treats as a failure (restart with backoff), as client-go.
 */
async function watchDelivering(ns: string, s: Started): Promise<DriverPod> {
  const p = createDriver(ns);
  await until('the watch delivering', () => s.informer.get(nameOf(p)));
  return p;
}

function cacheState(informer: PodInformer): string[] {
  return informer
    .list()
    .map((p) => `${p.metadata?.name}@${p.metadata?.resourceVersion}`)
    .sort();
}

describe('initial list', () => {
  it('lists 1,200 pods in pages of 500 with the selector, caches them trimmed, then watches', async () => {
    const ns = 'paged';
    const created = Array.from({ length: 1200 }, () => createDriver(ns));
    for (let i = 0; i < 5; i++) createExecutor(ns);
    const from = paths.length;
    const s = startInformer(ns);
    expect(s.informer.synced).toBe(false);
    expect(s.informer.downSinceMs).toBeTypeOf('number');
    await s.informer.start();
    expect(s.informer.synced).toBe(true);
    expect(s.informer.downSinceMs).toBeUndefined();
    expect(s.informer.list()).toHaveLength(1200);
    expect(s.events).toHaveLength(1200);
    expect(new Set(s.events.map((e) => e.event))).toEqual(new Set(['added']));
    expect(cacheState(s.informer)).toEqual(serverState(ns));

    const lists = paths.slice(from).filter((p) => !p.includes('watch=1'));
    expect(lists).toHaveLength(3);
    const q = (p: string) => new URLSearchParams(p.slice(p.indexOf('?') + 1));
    for (const p of lists) {
      expect(p.startsWith(`/api/v1/namespaces/${ns}/pods?`)).toBe(true);
      expect(q(p).get('limit')).toBe('500');
      expect(q(p).get('labelSelector')).toBe(SELECTOR);
    }
    expect(q(lists[0] ?? '').get('continue')).toBeNull();
    expect(q(lists[1] ?? '').get('continue')).toBeTruthy();
    expect(q(lists[2] ?? '').get('continue')).toBeTruthy();

    // The cached pod is the trimmed one: no spec, no managedFields, no annotations; the driver's state is there.
    const first = created[0] as DriverPod;
    const cached = s.informer.get(nameOf(first)) as DriverPod & Record<string, unknown>;
    expect(cached.metadata?.uid).toBe(first.metadata?.uid);
    expect(cached.spec).toBeUndefined();
    expect(cached.metadata).not.toHaveProperty('managedFields');
    expect(cached.metadata).not.toHaveProperty('annotations');
    expect(cached.metadata?.labels?.['spark-role']).toBe('driver');
    expect(cached.status?.containerStatuses).toHaveLength(1);
    expect(cached.status?.containerStatuses?.[0]?.name).toBe(DRIVER_CONTAINER);
    expect(cached.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 0,
      reason: 'Completed',
    });
    expect(cached.status?.containerStatuses?.[0]?.state?.terminated?.finishedAt).toMatch(/^\d{4}-\d\d-\d\dT/);

    // Then the watch, from the list's resourceVersion.
    await until('the watch', () => paths.slice(from).some((p) => p.includes('watch=1')));
    const w = q(paths.slice(from).find((p) => p.includes('watch=1')) ?? '');
    expect(w.get('resourceVersion')).toBe(String(server.resourceVersion()));
    expect(w.get('allowWatchBookmarks')).toBe('true');
    expect(w.get('labelSelector')).toBe(SELECTOR);
    expect(Number(w.get('timeoutSeconds'))).toBeGreaterThanOrEqual(300);
    expect(Number(w.get('timeoutSeconds'))).toBeLessThanOrEqual(600);
    await s.informer.stop();
  }, 60_000);
});

describe('a continue token expiring (410) during the list', () => {
  /** The list requests of namespace `ns` from index `from` of {@link answered}: `status limit continue?`. */
  const listsOf = (ns: string, from: number) =>
    answered.slice(from).flatMap(({ path, status }) => {
      if (!path.startsWith(`/api/v1/namespaces/${ns}/pods?`)) return [];
      const q = new URLSearchParams(path.slice(path.indexOf('?') + 1));
      return [`${status} limit=${q.get('limit') ?? '-'}${q.get('continue') ? ' continue' : ''}`];
    });
  const isPageOf = (ns: string, path: string) =>
    path.startsWith(`/api/v1/namespaces/${ns}/pods?`) && path.includes('continue=');

  it('starts the list again from the first page; nothing is synced or reported before a whole list is read', async () => {
    const ns = 'expiring';
    const pods = Array.from({ length: 25 }, () => createDriver(ns)).sort((a, b) =>
      nameOf(a).localeCompare(nameOf(b)),
    );
    createExecutor(ns);
    const s = startInformer(ns, { pageSize: 10 });
    const atCompaction: { synced: boolean; events: number }[] = [];
    let created: DriverPod | undefined;
    beforeRequest = (path) => {
      if (!isPageOf(ns, path) || atCompaction.length > 0) return;
      atCompaction.push({ synced: s.informer.synced, events: s.events.length });
      // Between pages 1 and 2: a pod already listed and one not yet listed deleted, one changed, one
      // created; then etcd compacts (a list that took longer than the compaction interval).
      server.pods.delete(ns, nameOf(pods[0]));
      server.pods.delete(ns, nameOf(pods[20]));
      server.pods.patchStatus(ns, nameOf(pods[15]), { phase: 'Failed', reason: 'Evicted' });
      created = createDriver(ns);
      server.compact();
    };
    const from = answered.length;
    await s.informer.start();

    expect(listsOf(ns, from)).toEqual([
      '200 limit=10',
      '410 limit=10 continue',
      '200 limit=10',
      '200 limit=10 continue',
      '200 limit=10 continue',
    ]);
    expect(atCompaction).toEqual([{ synced: false, events: 0 }]);
    // One `added` per pod of the second, whole list: the deleted ones never appear, none is reported twice.
    expect(s.seen().sort()).toEqual(
      serverState(ns)
        .map((p) => `added ${p.split('@')[0]}`)
        .sort(),
    );
    expect(s.seen()).toContain(`added ${nameOf(created)}`);
    expect(s.seen()).not.toContain(`added ${nameOf(pods[0])}`);
    expect(cacheState(s.informer)).toEqual(serverState(ns));
    expect(s.informer.get(nameOf(pods[15]))?.status?.phase).toBe('Failed');
    expect(s.informer.restarts).toBe(0);
    expect(
      s.lines.some((l) => l.msg === 'list continue token expired (410); listing again from the first page'),
    ).toBe(true);
    expect(s.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);

    // The watch starts from the whole list's resourceVersion: later changes arrive.
    const late = createDriver(ns);
    await until('the late pod', () => s.informer.get(nameOf(late)));
  });

  it('expiring again on the new list → one request; a relist diffs the cache only against a whole list', async () => {
    const ns = 'expiring-twice';
    const pods = Array.from({ length: 25 }, () => createDriver(ns));
    const s = startInformer(ns, { pageSize: 10 });
    await s.informer.start();
    pods.push(await watchDelivering(ns, s));
    const mark = s.events.length;
    const added: DriverPod[] = [];
    beforeRequest = (path) => {
      if (!isPageOf(ns, path) || added.length >= 2) return;
      // A write, then a compaction past it: this page's token (the first page's resourceVersion) is gone.
      added.push(createDriver(ns));
      server.compact();
    };
    const from = answered.length;
    // The watch ends and a pod goes while its events are compacted: the re-watch gets 410, the informer relists.
    server.dropWatches();
    const vanished = pods[3] as DriverPod;
    server.pods.delete(ns, nameOf(vanished));
    server.compact();

    await until('the relist diffed', () => s.events.length - mark >= 3);
    await until('watching again', () => server.openWatches() > 0);
    expect(listsOf(ns, from)).toEqual([
      '200 limit=10',
      '410 limit=10 continue',
      '200 limit=10',
      '410 limit=10 continue',
      '200 limit=-',
    ]);
    // Only the real differences: the pods on the pages never read were not reported deleted.
    expect(s.seen(mark).sort()).toEqual(
      [`deleted ${nameOf(vanished)}`, ...added.map((p) => `added ${nameOf(p)}`)].sort(),
    );
    expect(cacheState(s.informer)).toEqual(serverState(ns));
    expect(s.informer.restarts).toBe(0);
    expect(
      s.lines.some((l) => l.msg === 'list continue token expired again (410); listing in one request'),
    ).toBe(true);
  });
});

describe('watch', () => {
  it('reports added, updated and deleted pods, in order, and keeps the cache equal to the server', async () => {
    const ns = 'watched';
    const s = startInformer(ns);
    await s.informer.start();
    await until('the watch open', () => server.openWatches() > 0);
    const pod = createDriver(ns, 'Running');
    createExecutor(ns);
    await until('added', () => s.events.length >= 1);
    server.pods.patchStatus(ns, nameOf(pod), {
      phase: 'Succeeded',
      containerStatuses: [
        {
          name: DRIVER_CONTAINER,
          image: 'spark',
          imageID: '',
          ready: false,
          restartCount: 0,
          state: {
            terminated: { exitCode: 0, reason: 'Completed', finishedAt: '2024-01-01T00:00:00Z' as never },
          },
        },
      ],
    });
    await until('updated', () => s.events.length >= 2);
    expect(s.informer.get(nameOf(pod))?.status?.containerStatuses?.[0]?.state?.terminated?.reason).toBe(
      'Completed',
    );
    server.pods.delete(ns, nameOf(pod));
    await until('deleted', () => s.events.at(-1)?.event === 'deleted');
    // The DELETE first sets deletionTimestamp (MODIFIED), then removes the pod (DELETED).
    expect(s.seen()).toEqual([
      `added ${nameOf(pod)}`,
      `updated ${nameOf(pod)}`,
      `updated ${nameOf(pod)}`,
      `deleted ${nameOf(pod)}`,
    ]);
    expect(s.informer.get(nameOf(pod))).toBeUndefined();
    expect(s.informer.list()).toHaveLength(0);
    expect(s.informer.restarts).toBe(0);
    await s.informer.stop();
  });

  it('a throwing handler is logged and the informer goes on', async () => {
    const ns = 'throwing';
    const s = startInformer(ns, {
      onEvent: () => {
        throw new Error('handler bug');
      },
    });
    await s.informer.start();
    await until('the watch open', () => server.openWatches() > 0);
    const a = createDriver(ns);
    const b = createDriver(ns);
    await until('both seen', () => s.events.length === 2);
    expect(s.informer.list().map(nameOf).sort()).toEqual([nameOf(a), nameOf(b)].sort());
    expect(s.lines.filter((l) => l.msg === 'informer event handler failed')).toHaveLength(2);
    expect(s.informer.restarts).toBe(0);
    await s.informer.stop();
  });
});

describe('410 Gone', () => {
  it('relists at once and diffs the cache: new pods added, changed updated, vanished deleted, nothing else', async () => {
    const ns = 'gone';
    const keep = Array.from({ length: 30 }, () => createDriver(ns));
    const change = Array.from({ length: 5 }, () => createDriver(ns, 'Running'));
    const vanish = Array.from({ length: 7 }, () => createDriver(ns));
    const s = startInformer(ns);
    await s.informer.start();
    keep.push(await watchDelivering(ns, s));
    const lists = () =>
      paths.filter((p) => p.startsWith(`/api/v1/namespaces/${ns}/pods?`) && !p.includes('watch=1'));
    const listsBefore = lists().length;
    const mark = s.events.length;

    // In one tick of the server's process: the watch ends, pods change unseen, their events are compacted.
    server.dropWatches();
    const added = Array.from({ length: 4 }, () => createDriver(ns));
    for (const p of change) server.pods.patchStatus(ns, nameOf(p), { phase: 'Failed', reason: 'Evicted' });
    for (const p of vanish) server.pods.delete(ns, nameOf(p));
    server.compact();

    await until(
      'the relist diffed',
      () => s.events.length - mark >= added.length + change.length + vanish.length,
    );
    await until('watching again', () => server.openWatches() > 0);
    const after = s.seen(mark);
    expect(after.filter((e) => e.startsWith('added')).sort()).toEqual(
      added.map((p) => `added ${nameOf(p)}`).sort(),
    );
    expect(after.filter((e) => e.startsWith('updated')).sort()).toEqual(
      change.map((p) => `updated ${nameOf(p)}`).sort(),
    );
    expect(after.filter((e) => e.startsWith('deleted')).sort()).toEqual(
      vanish.map((p) => `deleted ${nameOf(p)}`).sort(),
    );
    // The unchanged pods (same resourceVersion) raised no event at all.
    expect(after.some((e) => keep.some((k) => e.endsWith(nameOf(k))))).toBe(false);
    expect(cacheState(s.informer)).toEqual(serverState(ns));
    expect(lists().length - listsBefore).toBe(1);
    // A relist, not a restart: no backoff, no warning.
    expect(s.informer.restarts).toBe(0);
    expect(s.lines.some((l) => l.msg === 'watch expired (410 Gone); relisting')).toBe(true);
    expect(s.lines.some((l) => l.msg === 'informer stopped on an error; restarting')).toBe(false);

    // And the watch after the relist delivers again.
    const late = createDriver(ns);
    await until('the late pod', () => s.informer.get(nameOf(late)));
    await s.informer.stop();
  });

  it('a pod re-created under the same name while unseen is reported deleted (old UID) then added (new UID)', async () => {
    const ns = 'recreated';
    const old = createDriver(ns);
    const s = startInformer(ns);
    await s.informer.start();
    await watchDelivering(ns, s);
    const mark = s.events.length;
    server.dropWatches();
    server.pods.delete(ns, nameOf(old));
    const again = server.pods.create({
      ...sparkDriverPod({ namespace: ns, phase: 'Succeeded', nowMs: Date.now() }),
      metadata: { name: nameOf(old), namespace: ns, labels: { 'spark-role': 'driver' } },
    });
    server.compact();
    await until('deleted + added', () => s.events.length - mark >= 2);
    expect(s.events.slice(mark).map((e) => `${e.event} ${e.uid}`)).toEqual([
      `deleted ${old.metadata?.uid}`,
      `added ${again.metadata?.uid}`,
    ]);
    expect(s.informer.get(nameOf(old))?.metadata?.uid).toBe(again.metadata?.uid);
    expect(s.informer.restarts).toBe(0);
    await s.informer.stop();
  });
});

describe('failures', () => {
  it('403 on the list → restarts with backoff, logs the Status, then syncs', async () => {
    const ns = 'forbidden';
    const pods = Array.from({ length: 3 }, () => createDriver(ns));
    const fault = server.faults.inject({
      verb: 'list',
      path: `/namespaces/${ns}/pods`,
      status: 403,
      count: 3,
    });
    const s = startInformer(ns, { backoffMs: 40 });
    const t0 = performance.now();
    await s.informer.start();
    const waited = performance.now() - t0;
    server.faults.clear(fault);
    expect(s.informer.synced).toBe(true);
    expect(s.informer.restarts).toBe(3);
    expect(s.informer.downSinceMs).toBeUndefined();
    expect(s.informer.list().map(nameOf).sort()).toEqual(pods.map(nameOf).sort());
    const warnings = s.lines.filter((l) => l.msg === 'informer stopped on an error; restarting');
    expect(warnings).toHaveLength(3);
    for (const w of warnings) {
      expect(w.level).toBe('warn');
      expect(w.code).toBe(403);
      expect(w.reason).toBe('Forbidden');
      expect(String(w.message)).toMatch(/forbidden/i);
    }
    // 40 ms · 2ⁿ · U(0.5, 1): 20–40, 40–80, 80–160.
    const delays = warnings.map((w) => Number(w.retryInMs));
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(20 * 2 ** i);
      expect(d).toBeLessThanOrEqual(40 * 2 ** i);
    });
    expect(waited).toBeGreaterThanOrEqual(delays.reduce((a, b) => a + b, 0) - 5);
    await s.informer.stop();
  });

  it('is down while it fails: downSinceMs set, synced stays as it was, cache kept', async () => {
    const ns = 'down';
    const pod = createDriver(ns);
    const s = startInformer(ns, { backoffMs: 30 });
    await s.informer.start();
    await until('the watch open', () => server.openWatches() > 0);
    const fault = server.faults.inject({ verb: '*', path: `/namespaces/${ns}/pods`, status: 500 });
    server.dropWatches();
    await until('down', () => s.informer.downSinceMs !== undefined && s.informer.restarts >= 2);
    expect(s.informer.synced).toBe(true);
    expect(s.informer.get(nameOf(pod))?.metadata?.uid).toBe(pod.metadata?.uid);
    server.faults.clear(fault);
    await until('up again', () => s.informer.downSinceMs === undefined, 10_000);
    expect(
      s.lines.filter((l) => l.msg === 'informer stopped on an error; restarting').map((l) => l.code),
    ).toContain(500);
    await s.informer.stop();
  });

  it('a watch ended by the server → re-watches from its resourceVersion, no relist, no restart', async () => {
    const ns = 'dropped';
    const s = startInformer(ns);
    await s.informer.start();
    const first = await watchDelivering(ns, s);
    const calls = (watch: boolean) =>
      paths.filter((p) => p.startsWith(`/api/v1/namespaces/${ns}/pods?`) && p.includes('watch=1') === watch)
        .length;
    const lists = calls(false);
    const watches = calls(true);
    server.dropWatches();
    // Changes between the end of the stream and the re-watch are replayed from the resourceVersion.
    const during = createDriver(ns);
    await until('re-watched', () => calls(true) > watches);
    const after = createDriver(ns);
    await until('both seen', () => s.informer.get(nameOf(during)) && s.informer.get(nameOf(after)));
    expect(s.seen()).toEqual([`added ${nameOf(first)}`, `added ${nameOf(during)}`, `added ${nameOf(after)}`]);
    expect(calls(false)).toBe(lists);
    expect(s.informer.restarts).toBe(0);
    await s.informer.stop();
  });

  it('a watch connection reset mid-stream → restarts (counted), relists, loses nothing', async () => {
    const ns = 'reset';
    const s = startInformer(ns);
    await s.informer.start();
    const first = await watchDelivering(ns, s);
    server.faults.inject({ verb: 'watch', path: `/namespaces/${ns}/pods`, reset: true, count: 1 });
    server.dropWatches(); // the re-watch is the one reset
    const pods = Array.from({ length: 3 }, () => createDriver(ns));
    await until('restarted', () => s.informer.restarts === 1);
    await until('all seen', () => pods.every((p) => s.informer.get(nameOf(p))));
    expect(cacheState(s.informer)).toEqual(serverState(ns));
    expect(s.seen().filter((e) => e.startsWith('added'))).toHaveLength(4);
    expect(s.informer.get(nameOf(first))).toBeDefined();
    expect(s.informer.restarts).toBe(1);
    const warning = s.lines.find((l) => l.msg === 'informer stopped on an error; restarting');
    expect(warning?.level).toBe('warn');
    await s.informer.stop();
  });

  it('stop() aborts the open watch and ends the loop; no restart afterwards', async () => {
    const ns = 'stopped';
    const s = startInformer(ns);
    await s.informer.start();
    await until('the watch open', () => server.openWatches() > 0);
    const before = server.openWatches();
    await s.informer.stop();
    await until('the watch closed', () => server.openWatches() < before);
    const n = paths.length;
    createDriver(ns);
    // An absence has no condition to wait for. A loop still running would re-watch at once after the watch
    // ended, or relist after its first backoff (≤ backoffMs = 50 ms, jittered down): 200 ms is 4× the latest.
    await new Promise((r) => setTimeout(r, 200));
    expect(paths.length).toBe(n);
    expect(s.events).toHaveLength(0);
    expect(s.informer.restarts).toBe(0);
  });

  it('stop() during the backoff ends it; start() of a never-synced informer resolves on stop', async () => {
    const ns = 'never';
    const fault = server.faults.inject({ verb: 'list', path: `/namespaces/${ns}/pods`, status: 503 });
    const s = startInformer(ns, { backoffMs: 10_000 });
    const started = s.informer.start();
    await until('first failure', () =>
      s.lines.some((l) => l.msg === 'informer stopped on an error; restarting'),
    );
    await s.informer.stop();
    await started;
    expect(s.informer.synced).toBe(false);
    server.faults.clear(fault);
  });
});

/** A transport that answers lists with `list` and watches with the next of `watches` (chunks), then hangs. */
function scripted(
  list: () => unknown,
  watches: ({ status: number; chunks: (string | Buffer)[] } | Error)[],
): KubeHttp & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    server: 'http://scripted',
    async request(_m, path) {
      calls.push(path);
      return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: list() };
    },
    async stream(path, signal) {
      calls.push(path);
      const next = watches.shift();
      if (next instanceof Error) throw next;
      async function* body(): AsyncGenerator<Buffer> {
        if (!next || next instanceof Error) {
          // Hang until aborted, as an idle watch does.
          await new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
          return;
        }
        for (const c of next.chunks) yield typeof c === 'string' ? Buffer.from(c) : c;
      }
      const it = body();
      const stream: KubeStream['body'] = Object.assign(it, { destroy: () => void it.return(undefined) });
      return { statusCode: next?.status ?? 200, headers: {}, body: stream };
    },
    async close() {},
  };
}

const rawPod = (name: string, rv: string, uid = `uid-${name}`, extra: Record<string, unknown> = {}) => ({
  metadata: { name, namespace: 'n', uid, resourceVersion: rv, labels: { 'spark-role': 'driver' } },
  spec: { containers: [{ name: DRIVER_CONTAINER, env: [{ name: 'A', value: 'é'.repeat(50) }] }] },
  status: { phase: 'Running' },
  ...extra,
});
const line = (type: string, object: unknown) => `${JSON.stringify({ type, object })}\n`;

/** An informer over a scripted transport, namespace `n`, restarting after 5 ms unless told otherwise. */
function scriptedInformer(
  t: KubeHttp,
  opts: { labelSelector?: string; backoffMs?: number; onEvent?: PodEventHandler } = {},
) {
  const { log, lines } = memoryLogger();
  const inf = createPodInformer({
    http: t,
    limiter: unlimited,
    namespace: 'n',
    labelSelector: opts.labelSelector ?? '',
    log,
    now: Date.now,
    backoffMs: opts.backoffMs ?? 5,
  });
  if (opts.onEvent) inf.addEventHandler(opts.onEvent);
  return { inf, lines };
}

describe('stream parsing (scripted transport)', () => {
  it('handles lines split across chunks (even inside a UTF-8 character), bookmarks, and a trailing line', async () => {
    const l1 = Buffer.from(line('ADDED', rawPod('a', '11')));
    const l2 = line('MODIFIED', rawPod('a', '12'));
    const l3 = line('BOOKMARK', { metadata: { resourceVersion: '20' } });
    const l4 = line('DELETED', rawPod('a', '21')).trimEnd(); // no final newline: the stream just ends
    const cut = l1.indexOf(Buffer.from('é')) + 1; // in the middle of a two-byte character
    const t = scripted(
      () => ({ metadata: { resourceVersion: '10' }, items: [] }),
      [
        {
          status: 200,
          chunks: [l1.subarray(0, cut), l1.subarray(cut), l2.slice(0, 7), l2.slice(7) + l3, l4],
        },
      ],
    );
    const events: string[] = [];
    const { inf } = scriptedInformer(t, {
      backoffMs: 500, // the informer's default
      onEvent: (e, p) => events.push(`${e} ${p.metadata?.name}@${p.metadata?.resourceVersion}`),
    });
    await inf.start();
    await until('three events and the re-watch', () => events.length === 3 && t.calls.length === 3);
    expect(events).toEqual(['added a@11', 'updated a@12', 'deleted a@21']);
    // The re-watch resumes from the last resourceVersion seen (the DELETED event's, after the bookmark's).
    expect(t.calls[2]).toContain('resourceVersion=21&');
    expect(t.calls[0]).toBe('/api/v1/namespaces/n/pods?limit=500');
    await inf.stop();
  });

  it('HTTP 410 on the watch request → relist at once; bad JSON → restart with backoff', async () => {
    let listed = 0;
    const t = scripted(() => {
      listed += 1;
      return { metadata: { resourceVersion: String(listed * 100) }, items: [rawPod('p', String(listed))] };
    }, [
      { status: 410, chunks: ['{"kind":"Status","code":410,"reason":"Gone"}'] },
      { status: 200, chunks: ['{"type":"ADDED","object":{"metadata":{"name":"x"'] },
      { status: 200, chunks: ['not json\n'] },
    ]);
    const events: string[] = [];
    const { inf, lines } = scriptedInformer(t, {
      labelSelector: 'a=b',
      onEvent: (e, p) => events.push(`${e} ${p.metadata?.name}@${p.metadata?.resourceVersion}`),
    });
    await inf.start();
    await until('four lists', () => listed === 4);
    await inf.stop();
    // list 1, watch → 410, list 2 (relist, no restart), watch → truncated JSON, restart, list 3, watch → bad line, list 4.
    expect(inf.restarts).toBe(2);
    expect(events).toEqual(['added p@1', 'updated p@2', 'updated p@3', 'updated p@4']);
    const warns = lines.filter((l) => l.msg === 'informer stopped on an error; restarting');
    expect(warns.map((w) => w.reason)).toEqual(['BadWatchLine', 'BadWatchLine']);
    expect(lines.some((l) => l.msg === 'watch expired (410 Gone); relisting')).toBe(true);
    expect(t.calls[0]).toBe('/api/v1/namespaces/n/pods?limit=500&labelSelector=a%3Db');
  });

  it('a watch closed at once without any event (a misbehaving proxy) → restart with backoff, not a spin', async () => {
    let listed = 0;
    const t = scripted(() => {
      listed += 1;
      return { metadata: { resourceVersion: '7' }, items: [] };
    }, [
      { status: 200, chunks: [] },
      { status: 200, chunks: [] },
    ]);
    const { inf, lines } = scriptedInformer(t);
    await inf.start();
    await until('three lists', () => listed === 3);
    await inf.stop();
    expect(inf.restarts).toBe(2);
    expect(
      lines.filter((l) => l.msg === 'informer stopped on an error; restarting').map((l) => l.reason),
    ).toEqual(['ShortWatch', 'ShortWatch']);
  });

  it('a network error on the watch and an ERROR event other than 410 restart it', async () => {
    let listed = 0;
    const err = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const t = scripted(() => {
      listed += 1;
      return { metadata: { resourceVersion: '5' }, items: [] };
    }, [
      err,
      {
        status: 200,
        chunks: [line('ERROR', { kind: 'Status', code: 500, reason: 'InternalError', message: 'boom' })],
      },
    ]);
    const { inf, lines } = scriptedInformer(t);
    await inf.start();
    await until('three lists', () => listed === 3);
    await inf.stop();
    const warns = lines.filter((l) => l.msg === 'informer stopped on an error; restarting');
    expect(warns.map((w) => [w.code, w.reason ?? null, w.message])).toEqual([
      ['ECONNREFUSED', null, 'connect ECONNREFUSED'],
      [500, 'InternalError', 'boom'],
    ]);
    expect(inf.restarts).toBe(2);
  });
});
