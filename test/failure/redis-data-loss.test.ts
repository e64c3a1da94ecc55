/**
 * Redis loses its data while pods are pending (a FLUSHALL; a server restarted empty): the leader notices at
 * once (its data marker, src/cleaner/data-loss-watch.ts) and reconciles from its informer, with the periodic
 * reconcile left at its 10-minute default. Real Redis, real etcd, two replica processes, the sandbox API server.
 *
 * Asserted: the leader logs the loss and counts it (`sdc_redis_data_loss_total`), reconciles after it, and
 * every pod pending at the loss is deleted once, none early. Printed: the pods' lateness after their deadline or
 * the loss, whichever is later (the target: within 10 s).
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { deletesPer } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  httpUrl,
  linesSince,
  replicaEnv,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();
const RETENTION_MS = 8000;

/** The value of `sdc_redis_data_loss_total` for a namespace on one replica, summed over reasons. */
async function dataLossCount(r: ReplicaProcess, ns: string): Promise<number> {
  const text = await (await fetch(`${await httpUrl(r)}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('sdc_redis_data_loss_total{') && l.includes(`namespace="${ns}"`))
    .reduce((s, l) => s + Number(l.split(' ').at(-1)), 0);
}

/**
 * Two replicas, `n` pods pending with an 8 s retention; `lose()` wipes Redis; then every pod must be deleted
 * once, after its deadline, long before the 10-minute periodic reconcile.
 */
async function pendingPodsSurvive(ns: string, prefix: string, lose: () => Promise<void>): Promise<void> {
  const env = replicaEnv(cluster(), ns, prefix, { SDC_RETENTION: `${RETENTION_MS}ms` });
  const replicas = [cluster().startReplica(`${prefix}-a`, env), cluster().startReplica(`${prefix}-b`, env)];
  try {
    const leader = await firstLeader(replicas, ns);
    const pods = createDrivers(cluster().server, ns, 20, prefix);
    const uids = pods.map(uidOf);
    await waitFor('both replicas enqueued every pod', () =>
      replicas.every((r) => uids.every((u) => r.lines.some((l) => l.msg === 'enqueue' && l.uid === u))),
    );
    const lostAt = Date.now();
    await lose();
    await waitGone(cluster().server, pods, 'every pending pod deleted after the loss', RETENTION_MS + 30_000);
    const noticed = linesSince(
      leader,
      lostAt,
      (l) => l.namespace === ns && /^redis data lost/.test(String(l.msg)),
    );
    expect(noticed.length).toBeGreaterThanOrEqual(1);
    expect(noticed[0]?.level).toBe('warn');
    const healed = linesSince(
      leader,
      timeOf(noticed[0]),
      (l) => l.msg === 'reconciled' && l.namespace === ns && Number(l.added) > 0,
    );
    expect(healed.length).toBeGreaterThanOrEqual(1);
    expect(await dataLossCount(leader, ns)).toBeGreaterThanOrEqual(1);
    expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
    expect(checkInvariants(cluster().server, ns, uids, { retentionMs: RETENTION_MS })).toEqual(CLEAN);
    // Lateness after max(deadline, loss), from the accepted DELETEs' own lines: none early (latenessMs ≥ 0).
    const deleted = replicas.flatMap((r) =>
      r.lines.filter((l) => l.msg === 'driver pod deleted' && l.namespace === ns),
    );
    expect(deleted.map((l) => l.uid).sort()).toEqual([...uids].sort());
    const late = deleted.map((l) => {
      const deadline = Date.parse(String(l.deadline));
      expect(Number(l.latenessMs)).toBeGreaterThanOrEqual(0);
      return timeOf(l) - Math.max(deadline, lostAt);
    });
    late.sort((a, b) => a - b);
    console.info(
      `[failure] ${prefix}: loss noticed ${timeOf(noticed[0]) - lostAt} ms after it; pending pods deleted ` +
        `${late[Math.floor(late.length / 2)]} ms (median), ${late.at(-1)} ms (worst) after max(deadline, loss)`,
    );
    for (const r of replicas) expect(r.child.exitCode).toBeNull();
  } finally {
    await stopAll(replicas);
  }
}

describe('Redis data loss noticed at once', () => {
  it('FLUSHALL while 20 pods are pending → the leader reconciles at once (log line, metric); each pod deleted once, none early', async () => {
    await pendingPodsSurvive('data-flushed', 'dl1', async () => {
      const redis = new Redis(cluster().redis.url);
      try {
        await redis.flushall();
      } finally {
        redis.disconnect();
      }
    });
  }, 120_000);

  it('Redis restarted empty while 20 pods are pending → the same', async () => {
    await pendingPodsSurvive('data-restarted', 'dl2', () => cluster().redis.restart());
  }, 120_000);
});
