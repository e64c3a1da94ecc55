/**
 * What a fleet costs Redis, counted by Redis itself (CLIENT LIST, INFO commandstats, TIME): T targets on
 * R = 3 in-process replicas with etcd leadership, idle.
 *
 * - clients ≤ T + 3R: the only per-target connection is the blocking connection of the leader's BullMQ worker;
 * - idle commands ≤ 0.5/s per target, across the fleet, with no job at all and with one far-off delayed job per
 *   target (the worker then waits for that job's deadline);
 * - `/metrics` reads each target's queue counts once, on its leader, and not again within the cache's age;
 *   followers export no `sdc_queue_jobs` series;
 * - a job that becomes due while its worker waits in a long idle block still starts at its deadline (BullMQ's
 *   marker wakes the worker), not at the end of the block.
 *
 * Windows are condition-based: each spans at least one full idle cycle of every worker (one BZPOPMIN per worker)
 * and one stalled-jobs check per queue (its SMEMBERS), and lasts at least the longest idle interval by Redis's
 * clock. `SCALE_TARGETS=50` runs the bigger fleet (default 10).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { queueName } from '../../src/queue/job-identity.ts';
import { CONSUMER_CLOSE_TIMEOUT_MS, IDLE_CHECKS } from '../../src/queue/queue-consumer.ts';
import { QUEUE_COUNTS_MAX_AGE_MS } from '../../src/telemetry/metrics.ts';
import { boundMs } from '../helpers/bounds.ts';
import { waitFor } from '../helpers/wait.ts';
import { http, type OpsEnv, type OpsReplica, startOpsEnv } from './ops-env.ts';

const R = 3;
const T = Number(process.env.SCALE_TARGETS ?? 10);
const PREFIX = 'fc';
const namespaces = Array.from({ length: T }, (_, i) => `fleet-${i}`);
/** Our own probe's commands, left out of the counts. */
const PROBE_COMMANDS = new Set(['info', 'client|list', 'time']);

let env: OpsEnv;
let probe: Redis;
const replicas: OpsReplica[] = [];

/** Calls per command since Redis started (INFO commandstats), our probe's own left out. */
async function commandCalls(): Promise<Map<string, number>> {
  const m = new Map<string, number>();
  for (const line of (await probe.info('commandstats')).split('\n')) {
    const hit = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (hit?.[1] && !PROBE_COMMANDS.has(hit[1])) m.set(hit[1], Number(hit[2]));
  }
  return m;
}

const total = (m: Map<string, number>) => [...m.values()].reduce((s, v) => s + v, 0);
const delta = (a: Map<string, number>, b: Map<string, number>, cmd: string) =>
  (b.get(cmd) ?? 0) - (a.get(cmd) ?? 0);

/** Redis's own clock, ms. */
async function redisNowMs(): Promise<number> {
  const [s, us] = await probe.time();
  return Number(s) * 1000 + Number(us) / 1000;
}

/** The clients connected to Redis, our probe left out, and how many are BullMQ workers' blocking connections. */
async function clients(): Promise<{ all: number; workers: number; names: string[] }> {
  const lines = String(await probe.client('LIST'))
    .trim()
    .split('\n');
  const others = lines.filter((l) => !l.includes(`id=${probeId} `));
  return {
    all: others.length,
    workers: others.filter((l) => /name=\S*:w:/.test(l)).length,
    names: others.map((l) => /name=(\S*)/.exec(l)?.[1] ?? '?'),
  };
}
let probeId = 0;

/**
 * Commands per second per target over an idle window: from now until Redis's clock has advanced `minMs` and
 * every worker completed an idle cycle (T BZPOPMINs) and every queue had a stalled-jobs check (T SMEMBERS).
 */
async function idleRate(what: string, minMs: number): Promise<{ perTargetPerS: number; seconds: number }> {
  const [a, t0] = [await commandCalls(), await redisNowMs()];
  let b = a;
  let t1 = t0;
  await waitFor(
    `${what}: an idle window of ≥ ${minMs} ms spanning every worker's idle cycle`,
    async () => {
      [b, t1] = [await commandCalls(), await redisNowMs()];
      return t1 - t0 >= minMs && delta(a, b, 'bzpopmin') >= T && delta(a, b, 'smembers') >= T;
    },
    minMs * 3 + 60_000,
    500,
  );
  const seconds = (t1 - t0) / 1000;
  const perTargetPerS = (total(b) - total(a)) / seconds / T;
  const top = [...b.keys()]
    .map((k) => [k, delta(a, b, k)] as const)
    .filter(([, v]) => v > 0)
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  console.info(
    `[redis-fleet] T=${T} R=${R} ${what}: ${(perTargetPerS * T).toFixed(2)} commands/s, ` +
      `${perTargetPerS.toFixed(3)}/s per target over ${seconds.toFixed(1)} s (${top})`,
  );
  return { perTargetPerS, seconds };
}

/** The replica leading a target (exactly one), or undefined. */
function leaderOf(ns: string): OpsReplica | undefined {
  const leaders = replicas.filter((r) => r.replica.cleaners.find((c) => c.target.namespace === ns)?.isLeader);
  return leaders.length === 1 ? leaders[0] : undefined;
}

beforeAll(async () => {
  env = await startOpsEnv(['fleet'], { etcd: true });
  probe = new Redis(env.redis.url);
  probeId = Number(await probe.client('ID'));
  for (let i = 1; i <= R; i++) {
    replicas.push(
      await env.startReplica(`fc-${i}`, {
        SDC_TARGETS: namespaces.map((ns) => `fleet:${ns}`).join(','),
        SDC_QUEUE_PREFIX: PREFIX,
        // A pod that finished now is due in an hour: its job waits, delayed, through the idle window.
        SDC_RETENTION: '1h',
        SDC_ELECTION_TTL_SECONDS: '10',
        SDC_LOG_LEVEL: 'info',
      }),
    );
  }
  // Settled, not only covered: while the balancer still hands targets to replicas that joined later, a
  // worker closes before its successor connects. So wait until every member is ready and each target is led by
  // its assigned replica (nothing more to move), and then count.
  const balanced = async (): Promise<boolean> => {
    const url = replicas[0]?.http.url;
    if (!url) return false;
    const body = (await http(url, '/api/v1/leaders')).json() as {
      targets: Record<string, { leader: string | null; assigned?: string | null }>;
      balance?: { members: string[]; notReady: Record<string, string[]> };
    };
    const rows = Object.values(body.targets);
    return (
      body.balance?.members.length === R &&
      Object.keys(body.balance.notReady).length === 0 &&
      rows.length === T &&
      rows.every((t) => t.leader !== null && t.leader === t.assigned)
    );
  };
  await waitFor(
    'every target led by its assigned replica, whose worker is connected',
    async () =>
      (await balanced()) && namespaces.every((ns) => leaderOf(ns)) && (await clients()).workers === T,
    120_000,
    250,
  );
}, 180_000);

afterAll(async () => {
  probe?.disconnect();
  await env?.stop();
}, 60_000);

describe(`Redis cost of ${T} targets × ${R} replicas`, () => {
  it(`clients ≤ T + 3R = ${T + 3 * R}: one blocking connection per led target, a few per replica`, async () => {
    // Counted once no connection is still closing: a worker that handed its target over while the fleet settled
    // closes its connections within CONSUMER_CLOSE_TIMEOUT_MS. A connection kept longer fails here.
    let c = await clients();
    await waitFor(
      `at most T + 3R = ${T + 3 * R} clients`,
      async () => {
        c = await clients();
        return c.workers === T && c.all <= T + 3 * R;
      },
      boundMs(0, CONSUMER_CLOSE_TIMEOUT_MS),
      250,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; connected: ${c.names.join(' ')}`);
    });
    console.info(
      `[redis-fleet] T=${T} R=${R} clients: ${c.all} (${c.workers} workers' blocking connections)`,
    );
    expect(c.workers).toBe(T);
    expect(c.all).toBeLessThanOrEqual(T + 3 * R);
  });

  it('idle, no job: ≤ 0.5 commands/s per target across the fleet', async () => {
    // Past every term's start-up checks (IDLE_CHECKS.startupMs), by Redis's clock.
    const settled = (await redisNowMs()) + IDLE_CHECKS.startupMs + 1000;
    await waitFor(
      'the workers past their start-up checks',
      async () => (await redisNowMs()) >= settled,
      60_000,
      250,
    );
    const { perTargetPerS } = await idleRate('idle, no job', IDLE_CHECKS.longestMs);
    expect(perTargetPerS).toBeLessThanOrEqual(0.5);
  }, 600_000);

  it('idle, one delayed job per target due in an hour: ≤ 0.5 commands/s per target', async () => {
    const server = env.servers.fleet;
    if (!server) throw new Error('no sandbox server');
    for (const ns of namespaces) {
      server.pods.create(
        sparkDriverPod({ namespace: ns, appName: 'hourly', phase: 'Succeeded', nowMs: server.clock.now() }),
      );
    }
    await waitFor(
      'one delayed job in every queue',
      async () => {
        const counts = await Promise.all(
          namespaces.map((ns) =>
            probe.zcard(`${PREFIX}:${queueName({ cluster: server.clusterName, namespace: ns })}:delayed`),
          ),
        );
        return counts.every((n) => n === 1);
      },
      60_000,
      250,
    );
    const { perTargetPerS } = await idleRate('idle, one delayed job per target', IDLE_CHECKS.longestMs);
    expect(perTargetPerS).toBeLessThanOrEqual(0.5);
  }, 600_000);

  it('/metrics: each queue counted once, by its leader; a second scrape within the cache age reads nothing', async () => {
    const urls = replicas.map((r) => r.http.url);
    const scrapeAll = () => Promise.all(urls.map(async (u) => (await http(u, '/metrics')).text));
    const a = await commandCalls();
    const texts = await scrapeAll();
    const b = await commandCalls();
    const second = await scrapeAll();
    const c = await commandCalls();
    // getJobCounts (BullMQ's getCounts script) reads each state's key: ZCARD for the sorted sets (delayed,
    // completed, failed), which nothing else runs while idle.
    const first = delta(a, b, 'zcard');
    const again = delta(b, c, 'zcard');
    console.info(
      `[redis-fleet] T=${T} R=${R} /metrics on every replica: ZCARD ${first} (first), ${again} (again); ` +
        `all commands ${total(b) - total(a)} (first), ${total(c) - total(b)} (again, idle cycles included)`,
    );
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(3 * T); // read by one replica per target: its leader
    expect(again).toBe(0);
    // Every target's counts come from exactly one replica: its leader; followers export none.
    for (const ns of namespaces) {
      const series = new RegExp(
        `^sdc_queue_jobs\\{cluster="${env.servers.fleet?.clusterName}",context="fleet",namespace="${ns}",state="delayed"\\} 1$`,
        'm',
      );
      const exporting = texts.map((t, i) => (series.test(t) ? replicas[i]?.id : undefined)).filter(Boolean);
      expect(exporting).toEqual([leaderOf(ns)?.id]);
    }
    expect(second.join('').length).toBeGreaterThan(0);
    expect(QUEUE_COUNTS_MAX_AGE_MS).toBeGreaterThan(0);
  });

  it('a job that falls due while its worker waits in a long idle block starts at its deadline', async () => {
    const server = env.servers.fleet;
    if (!server) throw new Error('no sandbox server');
    const ns = namespaces[0] ?? '';
    const leader = leaderOf(ns);
    // Finished an hour ago minus 3 s: due 3 s from now, while the worker blocks for up to IDLE_CHECKS.blockMs.
    const pod = server.pods.create(
      sparkDriverPod({
        namespace: ns,
        appName: 'due-soon',
        phase: 'Succeeded',
        nowMs: server.clock.now() - 3_600_000 + 3000,
      }),
    );
    const line = await waitFor(
      'the due pod deleted',
      () => leader?.logs.lines.find((l) => l.msg === 'driver pod deleted' && l.uid === pod.metadata?.uid),
      IDLE_CHECKS.blockMs + 30_000,
      100,
    );
    console.info(
      `[redis-fleet] a job due during an idle block of up to ${IDLE_CHECKS.blockMs} ms: DELETE ${line.latenessMs} ms after its deadline`,
    );
    // Without the marker wake-up it would start only when the block ends: up to IDLE_CHECKS.blockMs late.
    expect(Number(line.latenessMs)).toBeLessThan(Math.min(5000, IDLE_CHECKS.blockMs / 2));
  }, 120_000);
});
