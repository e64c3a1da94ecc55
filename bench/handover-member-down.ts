/**
 * Benchmark: a handover (the leader SIGTERMed, so it revokes its lease) with all three etcd members up, and
 * with one of them killed under the running replicas just before — as `test/failure/etcd-faults.test.ts`
 * does. Each trial starts a fresh fleet of 3 replicas (TTL 3 s) on a target of its own, waits until it has
 * settled on a leader, kills member 2 (in the member-down trials), waits `--after-kill-ms`, SIGTERMs the
 * leader and times the first `elected leader` of another replica from the signal. Trials alternate between
 * the two cases, so both see the same machine load.
 *
 *   npx node bench/handover-member-down.ts --runs 20
 *
 * Prints one line per trial and a summary (p50 / p90 / max, and trials over 3 s), and writes the raw figures
 * as JSON to `--out` (default bench/results/handover-member-down.json).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { startSandboxApiServer } from '../harness/sandbox/apiserver/server.ts';
import { startEtcd, startRedis } from '../harness/sandbox/local-services.ts';
import { type ReplicaProcess, spawnReplica } from '../harness/sandbox/replica-process.ts';
import { percentile, stopFleet } from './harness.ts';

type Case = 'all members up' | 'one member down';
interface Trial {
  case: Case;
  trial: number;
  /** From the SIGTERM to another replica's `elected leader`, ms; null when none within `--timeout-ms`. */
  handoverMs: number | null;
}

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    'after-kill-ms': { type: 'string', default: '1500' },
    'timeout-ms': { type: 'string', default: '30000' },
    out: { type: 'string', default: 'bench/results/handover-member-down.json' },
  },
});
const runs = Number(values.runs);
const afterKillMs = Number(values['after-kill-ms']);
const timeoutMs = Number(values['timeout-ms']);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, check: () => boolean, ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(10);
  }
}

const [redis, etcd, server] = await Promise.all([
  startRedis(),
  startEtcd({ members: 3 }),
  startSandboxApiServer({ contextName: 'bench' }),
]);
const trials: Trial[] = [];
try {
  for (let t = 1; t <= runs; t++) {
    for (const c of ['all members up', 'one member down'] as const) {
      const tag = `${c === 'all members up' ? 'up' : 'down'}${t}`;
      const elections: { id: string; atMs: number }[] = [];
      const fleet: ReplicaProcess[] = [1, 2, 3].map((i) =>
        spawnReplica({
          id: `${tag}-${i}`,
          keepLines: 200,
          env: {
            KUBECONFIG: server.kubeconfigPath,
            SDC_TARGETS: `bench:handover-${tag}`,
            SDC_REDIS_URL: redis.url,
            SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
            SDC_QUEUE_PREFIX: `ho-${tag}`,
            SDC_HTTP_PORT: '0',
            SDC_LOG_LEVEL: 'info',
            SDC_ELECTION_TTL_SECONDS: '3',
          },
          onLine: (l) => {
            if (l.msg === 'elected leader')
              elections.push({ id: `${tag}-${i}`, atMs: Date.parse(String(l.time)) });
          },
        }),
      );
      try {
        await Promise.all(fleet.map((r) => r.waitForLine((l) => l.msg === 'replica started', 60_000)));
        // Settled: a leader, and no new election for 1 s (the first elected may hand over to its assigned owner).
        await until('a leader', () => elections.length > 0, 60_000);
        for (let n = -1; n !== elections.length; ) {
          n = elections.length;
          await sleep(1000);
        }
        if (c === 'one member down') {
          await etcd.members[2]?.kill();
          await sleep(afterKillMs);
        }
        const leaderId = elections.at(-1)?.id;
        const leader = fleet.find((r) => r.id === leaderId) as ReplicaProcess;
        const before = elections.length;
        const t0 = Date.now();
        leader.kill('SIGTERM');
        const next = () => elections.slice(before).find((e) => e.id !== leaderId);
        await until('a new leader', () => next() !== undefined, timeoutMs).catch(() => undefined);
        const e = next();
        const trial: Trial = { case: c, trial: t, handoverMs: e ? e.atMs - t0 : null };
        trials.push(trial);
        console.log(`${c.padEnd(16)} #${t}: handover ${trial.handoverMs ?? `none in ${timeoutMs}`} ms`);
      } finally {
        await stopFleet(fleet);
        if (c === 'one member down') await etcd.members[2]?.restart();
      }
    }
  }
} finally {
  await server.close();
  await Promise.all([redis.stop(), etcd.stop()]);
}

const summary = (['all members up', 'one member down'] as const).map((c) => {
  const ms = trials.filter((x) => x.case === c).map((x) => x.handoverMs ?? Number.POSITIVE_INFINITY);
  return {
    case: c,
    trials: ms.length,
    p50Ms: percentile(ms, 50),
    p90Ms: percentile(ms, 90),
    maxMs: Math.max(...ms),
    over3s: ms.filter((x) => x > 3000).length,
  };
});
for (const s of summary)
  console.log(
    `${s.case}: ${s.trials} handovers, p50 ${s.p50Ms} ms, p90 ${s.p90Ms} ms, max ${s.maxMs} ms, over 3 s: ${s.over3s}`,
  );
mkdirSync(dirname(values.out), { recursive: true });
writeFileSync(values.out, `${JSON.stringify({ afterKillMs, summary, trials }, null, 2)}\n`);
process.exit(0);
