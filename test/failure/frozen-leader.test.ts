/**
 * Failure mode: a leader frozen (SIGSTOP: a GC pause, a stalled node) with due jobs fetched. The jobs follow the
 * leadership: the replica elected after the lease expired takes them at the start of its term, instead of
 * waiting until the frozen leader's BullMQ locks lapse and stall detection hands them back. Real replica
 * processes, real Redis, real etcd, the sandbox API server; DELETEs attributed per replica through proxies.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { jobKey, queueName } from '../../src/queue/job-identity.ts';
import { deletesPer } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  bystandersIntact,
  CLEAN,
  checkInvariants,
  createBystanders,
  createDrivers,
  firstLeader,
  linesSince,
  replicaEnv,
  startApiProxy,
  stopAll,
  targetIn,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();

describe('a frozen leader with jobs in flight', () => {
  it('leader SIGSTOPped holding 40 due jobs → the new leader takes them at its election and deletes each pod once while the old one is still frozen; woken, the old one sends nothing', async () => {
    const ns = 'frozen-jobs';
    const prefix = 'fz1';
    const n = 40;
    const [p1, p2] = await Promise.all([startApiProxy(cluster().server), startApiProxy(cluster().server)]);
    // `live` re-checks GET each pod before its DELETE: the GETs are held at the API server (below) so that
    // the leader's jobs are all in flight, none of their DELETEs sent, when it freezes. 100 jobs in flight.
    const base = replicaEnv(cluster(), ns, prefix, {
      SDC_RECHECK: 'live',
      SDC_CONCURRENCY: '100',
      SDC_API_QPS: '200',
      SDC_API_BURST: '200',
    });
    const replicas = [
      cluster().startReplica('f1', { ...base, ...p1.env }),
      cluster().startReplica('f2', { ...base, ...p2.env }),
    ];
    const proxyOf = new Map([
      [replicas[0], p1],
      [replicas[1], p2],
    ]);
    const redis = new Redis(cluster().redis.url, { maxRetriesPerRequest: null });
    const server = cluster().server;
    try {
      const old = await firstLeader(replicas, ns);
      const next = replicas.find((r) => r !== old);
      if (!next) throw new Error('no second replica');
      const held = server.faults.inject({ verb: 'get', path: `/namespaces/${ns}/pods/`, latencyMs: 60_000 });
      const bystanders = createBystanders(server, ns);
      // Finished 10 s ago, retention 1 s: due the moment they are seen.
      const pods = createDrivers(server, ns, n, 'fz', 10_000);
      const uids = pods.map(uidOf);
      const gets = () =>
        server.requests
          .arrivals()
          .filter((a) => a.verb === 'get' && a.path.includes(`/namespaces/${ns}/pods/`)).length;
      await waitFor(
        `the leader holds the ${n} jobs (their re-check GETs arrived)`,
        () => gets() >= n,
        30_000,
      );
      const stoppedAt = Date.now();
      old.kill('SIGSTOP');
      server.faults.clear(held); // GETs sent from now on are answered at once; the frozen leader's stay held
      const elected = await next.waitForLine(
        (l) => l.msg === 'elected leader' && l.namespace === ns && timeOf(l) >= stoppedAt,
        30_000,
      );
      const electedAt = timeOf(elected);
      // Every pod is deleted while the old leader is still frozen (it stays so until then, at most 40 s).
      await waitGone(server, pods, `every pod the frozen leader held deleted`, 40_000);
      const goneAt = Date.now();

      // The new leader took the jobs at the start of its term: none came back through BullMQ's stall detection
      // (which waits for the frozen leader's locks to lapse and counts each return against maxStalledCount).
      const took = linesSince(next, stoppedAt, (l) => String(l.msg).startsWith('took over'));
      expect(took.reduce((sum, l) => sum + Number(l.jobs), 0)).toBe(n);
      const stalled = await Promise.all(
        uids.map((u) => redis.hget(jobKey(prefix, targetIn(cluster(), ns), u), 'stc')),
      );
      expect(stalled.filter((s) => s !== null)).toEqual([]);
      // One DELETE per pod, all from the new leader, none before its election.
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 1));
      expect(proxyOf.get(old)?.deletes()).toEqual([]);
      const byNext = proxyOf.get(next)?.deletes() ?? [];
      expect(byNext.filter((r) => r.atMs < electedAt)).toEqual([]);
      const lastDeleteAt = Math.max(...byNext.map((r) => r.atMs));
      const sinceElection = (msg: string) =>
        timeOf(linesSince(next, electedAt, (l) => String(l.msg).startsWith(msg) && l.namespace === ns)[0]) -
        electedAt;

      // Woken, the old leader finds its lease gone and its jobs taken: no DELETE leaves it.
      const resumedAt = Date.now();
      old.kill('SIGCONT');
      await old.waitForLine((l) => l.msg === 'leadership lost' && timeOf(l) >= resumedAt, 15_000);
      await old.waitForLine((l) => l.msg === 'stopped consuming' && timeOf(l) >= resumedAt, 15_000);
      const lockLoss = linesSince(old, resumedAt, (l) => String(l.msg).startsWith('lost the locks of'));
      expect(proxyOf.get(old)?.deletes()).toEqual([]);
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 1));
      expect(checkInvariants(server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      expect(bystandersIntact(server, bystanders)).toBe(true);
      // Nothing is left in the queue: every job completed (by the new leader), none failed.
      const queue = `${prefix}:${queueName(targetIn(cluster(), ns))}`;
      expect(await redis.llen(`${queue}:active`)).toBe(0);
      expect(await redis.zcard(`${queue}:failed`)).toBe(0);
      expect(await redis.zcard(`${queue}:completed`)).toBe(n);
      console.info(
        `[failure] frozen leader with ${n} jobs in flight (TTL 3 s): new leader ${electedAt - stoppedAt} ms after ` +
          `the freeze, took over ${n} jobs, last DELETE ${lastDeleteAt - electedAt} ms after its election ` +
          `(${lastDeleteAt - stoppedAt} ms after the freeze; all gone ${goneAt - stoppedAt} ms after it); the old ` +
          `leader woke ${resumedAt - stoppedAt} ms after the freeze, sent 0 DELETEs, ` +
          `reported ${lockLoss.reduce((s, l) => s + Number(l.jobs), 0)} lost locks; after the election: ` +
          `reconciled +${sinceElection('reconciled')} ms, took over +${sinceElection('took over')} ms, first deleted ` +
          `+${sinceElection('driver pod deleted')} ms`,
      );
    } finally {
      redis.disconnect();
      await stopAll(replicas);
      await Promise.all([p1.close(), p2.close()]);
    }
  }, 180_000);
});
