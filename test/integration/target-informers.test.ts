/**
 * The informers of many targets (src/kube/target-informers.ts) against sandbox API servers, counted from
 * their request logs:
 *
 * - `informerScope: namespace`, 30 targets starting at once: every LIST and WATCH goes through the context's
 *   rate limiter, so no second of the sandbox's log holds more than `apiQps + apiBurst` requests;
 * - `informerScope: cluster`, 30 targets on two contexts: one LIST and one WATCH per context, each target's
 *   view sees its namespace's pods and nothing else, pods of namespaces not configured are dropped; a 410 on
 *   the shared watch relists once for all of that context's targets;
 * - a replica with `informerScope: cluster` (real Redis, no etcd: it leads every target) enqueues each pod
 *   in its own target's queue, and pods of other namespaces nowhere.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { type LocalService, startRedis } from '../../harness/sandbox/local-services.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { loadConfig } from '../../src/config/load.ts';
import { type ContextClients, openContexts } from '../../src/kube/context-clients.ts';
import type { PodEvent, PodInformer } from '../../src/kube/pod-informer.ts';
import { createTargetInformers, type InformerScope } from '../../src/kube/target-informers.ts';
import { jobKey } from '../../src/queue/job-identity.ts';
import { type Replica, startReplica } from '../../src/replica.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../sandbox/helpers.ts';

const SELECTOR = 'spark-role=driver,kyuubi-unique-tag';
const QPS = 10;
const BURST = 5;

let east: SandboxApiServer;
let west: SandboxApiServer;
let kubeconfig: string;
beforeAll(async () => {
  [east, west] = await Promise.all([
    startSandboxApiServer({ contextName: 'east' }),
    startSandboxApiServer({ contextName: 'west' }),
  ]);
  kubeconfig = `${east.kubeconfigPath}:${west.kubeconfigPath}`;
});
afterAll(async () => {
  await Promise.all([east?.close(), west?.close()]);
});

/** What each running test must stop. */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A terminated driver pod the selector selects (`Succeeded` a minute ago). */
function createDriver(server: SandboxApiServer, namespace: string): { name: string; uid: string } {
  const p = server.pods.create(
    sparkDriverPod({ namespace, phase: 'Succeeded', nowMs: server.clock.now() - 60_000 }),
  );
  return { name: p.metadata?.name ?? '', uid: p.metadata?.uid ?? '' };
}

const namesIn = (server: SandboxApiServer, ns: string) =>
  server.pods
    .list(ns)
    .filter((p) => p.metadata?.labels?.['spark-role'] === 'driver')
    .map((p) => p.metadata?.name ?? '')
    .sort();
const cachedNames = (i: PodInformer) => i.list().map((p) => p.metadata?.name ?? '');
const sorted = (xs: string[]) => [...xs].sort();

interface Started {
  informers: PodInformer[];
  /** Per target (`context/namespace`), the events its informer delivered, as `event namespace/name`. */
  events: Map<string, string[]>;
  lines: Record<string, unknown>[];
}

/**
 * Opens the contexts of `targets` and starts their informers at once; resolves once all have synced (and
 * calls `whileStarting` with the contexts' clients right after starting them).
 */
async function startInformers(
  targets: string[],
  scope: InformerScope,
  whileStarting?: (clients: ContextClients) => Promise<void>,
): Promise<Started> {
  const contexts = openContexts(
    { targets: targets.map(parseTarget), kubeconfig, apiQps: QPS, apiBurst: BURST, apiTimeoutMs: 10_000 },
    { now: Date.now },
  );
  const { log, lines } = memoryLogger('debug');
  const informers = createTargetInformers(contexts.targets, {
    scope,
    labelSelector: SELECTOR,
    log,
    now: Date.now,
  });
  const events = new Map<string, string[]>();
  for (const [i, informer] of informers.entries()) {
    const seen: string[] = [];
    events.set(targets[i] ?? '', seen);
    informer.addEventHandler((event: PodEvent, pod) =>
      seen.push(`${event} ${pod.metadata?.namespace}/${pod.metadata?.name}`),
    );
  }
  cleanups.push(async () => {
    await Promise.all(informers.map((i) => i.stop()));
    await contexts.close();
  });
  // A discovery request per context first (not an API request in the sandbox's log, no token taken): a cold
  // transport's first requests (new code paths, new connections) can reach the server 100-200 ms after the
  // limiter let them go, together with the next ones, which is the client's latency, not its rate.
  for (const c of new Set(contexts.targets.map((t) => t.clients)))
    expect((await c.http.request('GET', '/api')).statusCode).toBe(200);
  const synced = Promise.all(informers.map((i) => i.start()));
  await whileStarting?.(contexts.targets[0]?.clients as ContextClients);
  await synced;
  return { informers, events, lines };
}

function parseTarget(t: string) {
  const [context, namespace] = t.split(':');
  return { context, namespace: namespace ?? '' };
}

const apiCounts = (server: SandboxApiServer) => {
  const c = server.requests.countsByVerb();
  return { list: c.list ?? 0, watch: c.watch ?? 0 };
};

describe('informerScope: namespace', () => {
  it('30 targets starting at once: never more than apiQps + apiBurst requests in a second', async () => {
    const targets = Array.from({ length: 30 }, (_, i) => `east:ns-${i}`);
    for (const t of targets) createDriver(east, parseTarget(t).namespace);
    east.requests.reset();

    const { informers } = await startInformers(targets, 'namespace');
    await waitFor(() => east.openWatches() === 30, '30 watches open');
    // One LIST and one WATCH per target, every one through the limiter.
    expect(apiCounts(east)).toEqual({ list: 30, watch: 30 });
    const busiest = east.requests.busiestWindow(1000);
    console.info(
      `[informers] namespace scope, 30 targets, ${QPS} QPS burst ${BURST}: busiest second ${busiest} requests; ` +
        `${east.openConnections()} connections open (one per watch)`,
    );
    // The limiter lets at most QPS + BURST go in any second; they are counted on arrival at the server, where a
    // busy machine's delivery jitter can bunch a request or two into the next second. Without the limiter: 60.
    expect(busiest).toBeLessThanOrEqual(QPS + BURST + 2);
    // Every watch holds its own HTTP/1.1 connection.
    expect(east.openConnections()).toBeGreaterThanOrEqual(30);
    for (const [i, informer] of informers.entries())
      expect(cachedNames(informer)).toEqual(namesIn(east, `ns-${i}`));
  });

  it('a DELETE sent while 30 targets start is served at the next token, not after their LISTs and WATCHes', async () => {
    const targets = Array.from({ length: 30 }, (_, i) => `east:d-${i}`);
    for (const t of targets) createDriver(east, parseTarget(t).namespace);
    const due = createDriver(east, 'd-due');
    east.requests.reset();

    await startInformers(targets, 'namespace', async (clients) => {
      // The informers' 30 LISTs are queued in the limiter by now (5 went at once, the burst).
      expect(await clients.pods.delete('d-due', due.name, { uid: due.uid })).toBe('accepted');
    });
    await waitFor(() => apiCounts(east).watch === 30, '30 watches');
    const order = east.requests.arrivals().map((a) => a.verb);
    const informerRequestsBefore = order.indexOf('delete');
    console.info(
      `[informers] a DELETE during the start of 30 targets arrived after ${informerRequestsBefore} of their 60 requests`,
    );
    // The burst, and at most one more that got the token first; served first come, first served it would
    // have waited for the 30 LISTs queued before it.
    expect(informerRequestsBefore).toBeGreaterThanOrEqual(0);
    expect(informerRequestsBefore).toBeLessThanOrEqual(BURST + 1);
    expect(order.filter((v) => v === 'list' || v === 'watch')).toHaveLength(60);
  });
});

describe('informerScope: cluster', () => {
  it('one LIST and one WATCH per context for 30 targets; each target sees its namespace only', async () => {
    const targets = [
      ...Array.from({ length: 20 }, (_, i) => `east:c-${i}`),
      ...Array.from({ length: 10 }, (_, i) => `west:c-${i}`),
    ];
    for (const t of targets) {
      const { context, namespace } = parseTarget(t);
      const server = context === 'east' ? east : west;
      createDriver(server, namespace);
      createDriver(server, namespace);
    }
    // Selected pods in namespaces that are not targets: listed and watched, never cached nor delivered.
    const others = [createDriver(east, 'not-a-target'), createDriver(west, 'not-a-target')];
    east.requests.reset();
    west.requests.reset();

    const { informers, events, lines } = await startInformers(targets, 'cluster');
    await waitFor(() => east.openWatches() === 1 && west.openWatches() === 1, 'one watch per context');
    expect(apiCounts(east)).toEqual({ list: 1, watch: 1 });
    expect(apiCounts(west)).toEqual({ list: 1, watch: 1 });
    expect(east.requests.arrivals().map((a) => a.path)).toEqual(['/api/v1/pods', '/api/v1/pods']);
    console.info(
      `[informers] cluster scope, 30 targets on 2 contexts: connections open east ${east.openConnections()}, west ${west.openConnections()}`,
    );
    expect(east.openConnections()).toBeLessThanOrEqual(2);
    // The pods of other namespaces (this test's and earlier tests') were dropped as the lists arrived.
    const elsewhere = (server: SandboxApiServer, context: string) =>
      server.pods.list().filter((p) => !targets.includes(`${context}:${p.metadata?.namespace}`)).length;
    expect(lines.filter((l) => l.msg === 'list: pods of namespaces not configured dropped')).toEqual([
      expect.objectContaining({ context: 'east', dropped: elsewhere(east, 'east') }),
      expect.objectContaining({ context: 'west', dropped: elsewhere(west, 'west') }),
    ]);

    // Live events reach their namespace's view only.
    const lateEast = createDriver(east, 'c-7');
    const lateWest = createDriver(west, 'c-7');
    others.push(createDriver(east, 'not-a-target'));
    await waitFor(
      () =>
        informers[7]?.get(lateEast.name)?.metadata?.uid === lateEast.uid &&
        informers[27]?.get(lateWest.name)?.metadata?.uid === lateWest.uid,
      'the late pods in their views',
    );
    for (const [i, t] of targets.entries()) {
      const { context, namespace } = parseTarget(t);
      const server = context === 'east' ? east : west;
      expect(sorted(cachedNames(informers[i] as PodInformer)), t).toEqual(namesIn(server, namespace));
      const delivered = events.get(t) ?? [];
      expect(delivered.length, t).toBe(namesIn(server, namespace).length);
      expect(
        delivered.every((e) => e.startsWith(`added ${namespace}/`)),
        t,
      ).toBe(true);
      expect(informers[i]?.synced).toBe(true);
      expect(informers[i]?.downSinceMs).toBeUndefined();
    }
    const all = [...events.values()].flat();
    for (const o of others) expect(all.some((e) => e.endsWith(`/${o.name}`))).toBe(false);
  });

  it('a 410 on the shared watch relists once for every target of that context', async () => {
    const targets = Array.from({ length: 5 }, (_, i) => `east:g-${i}`);
    const before = targets.map((t) => createDriver(east, parseTarget(t).namespace));
    const { informers, events } = await startInformers(targets, 'cluster');
    await waitFor(() => east.openWatches() === 1, 'watching');
    // A watch that delivered an event (one ended within a second without any is a failure, not a resume).
    const seen = createDriver(east, 'g-0');
    await waitFor(() => informers[0]?.get(seen.name), 'the watch delivering');
    east.pods.delete('g-0', seen.name);
    await waitFor(() => !informers[0]?.get(seen.name), 'the watch delivering its deletion');
    east.requests.reset();
    const marks = targets.map((t) => events.get(t)?.length ?? 0);

    // In one tick of the server: the watch ends, pods change unseen, their events are compacted.
    east.dropWatches();
    const added = targets.map((t) => createDriver(east, parseTarget(t).namespace));
    for (const [i, p] of before.entries()) east.pods.delete(`g-${i}`, p.name);
    east.compact();

    await waitFor(
      () => targets.every((t, i) => (events.get(t)?.length ?? 0) - (marks[i] ?? 0) >= 2),
      'every target saw its relist',
    );
    await waitFor(() => east.openWatches() === 1, 'watching again');
    // One relist for all five targets (the watch resumed, got 410, listed once, watched again).
    expect(apiCounts(east)).toEqual({ list: 1, watch: 2 });
    for (const [i, t] of targets.entries()) {
      expect(events.get(t)?.slice(marks[i])).toEqual([
        `added g-${i}/${added[i]?.name}`,
        `deleted g-${i}/${before[i]?.name}`,
      ]);
      expect(cachedNames(informers[i] as PodInformer)).toEqual([added[i]?.name]);
      expect(informers[i]?.restarts).toBe(0);
    }
  });
});

describe('a replica with informerScope: cluster', () => {
  let redis: LocalService;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("enqueues each pod in its own target's queue, and pods of other namespaces nowhere", async () => {
    const a = [createDriver(east, 'team-a'), createDriver(east, 'team-a')];
    const b = [createDriver(east, 'team-b')];
    const other = [createDriver(east, 'team-z'), createDriver(east, 'team-z')];
    const config = loadConfig({
      env: {
        KUBECONFIG: kubeconfig,
        SDC_TARGETS: 'east:team-a,east:team-b',
        SDC_INFORMER_SCOPE: 'cluster',
        SDC_REDIS_URL: redis.url,
        SDC_REPLICA_ID: 'scope-1',
        SDC_RETENTION: '1h',
        SDC_QUEUE_PREFIX: 'scope',
      },
      serviceAccountNamespace: () => undefined,
    });
    expect(config.informerScope).toBe('cluster');
    east.requests.reset();
    const replica: Replica = await startReplica(config, {
      log: memoryLogger('info').log,
      now: Date.now,
      monotonicNow: () => performance.now(),
    });
    cleanups.push(() => replica.stop());
    const check = new Redis(redis.url);
    cleanups.push(async () => void check.disconnect());

    const target = (namespace: string) => ({ cluster: east.clusterName, context: 'east', namespace });
    const queued = async (namespace: string, uid: string) =>
      (await check.exists(jobKey('scope', target(namespace), uid))) === 1;
    await waitFor(async () => {
      for (const p of a) if (!(await queued('team-a', p.uid))) return false;
      for (const p of b) if (!(await queued('team-b', p.uid))) return false;
      return true;
    }, 'every pod queued in its target');
    expect(apiCounts(east)).toEqual({ list: 1, watch: 1 });
    // Not in the other target's queue, and pods of team-z in no key at all.
    for (const p of a) expect(await queued('team-b', p.uid)).toBe(false);
    for (const p of b) expect(await queued('team-a', p.uid)).toBe(false);
    for (const p of other) expect(await check.keys(`*${p.uid}*`)).toEqual([]);
  });
});
