/**
 * What leadership costs etcd at fleet scale, counted by etcd itself (its /metrics and lease list): 100 targets
 * on 3 in-process replicas (each its own client and leadership group, the default 10 s TTL). Asserted: counts
 * that must not grow with the number of targets (leases, watch streams, watchers = one per replica) and the
 * balance; printed: keepalives per second and etcd requests per target at start (figures, not assertions).
 * One lease and one watch per target would be 300 leases, renewed 90 times per second, and 300 watches.
 */
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalEtcd, startEtcd } from '../../harness/sandbox/local-services.ts';
import { monotonicClock } from '../../src/clock.ts';
import { createEtcdLeadershipGroup, type EtcdLeadershipGroup } from '../../src/leadership/etcd/backend.ts';
import { createEtcdClient } from '../../src/leadership/etcd/client.ts';
import type { EtcdLeadership } from '../../src/leadership/etcd/election.ts';
import {
  clusterElectionsPrefix,
  electionPrefix,
  membersPrefix,
  targetKey,
} from '../../src/queue/job-identity.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let etcd: LocalEtcd;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

/** etcd's own metrics (Prometheus text): the value of each series whose line starts with `name`. */
async function etcdMetric(name: string): Promise<number> {
  const text = await (await fetch(`${etcd.endpoints[0]}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

const grpcHandled = (method: string) =>
  etcdMetric(`grpc_server_handled_total{grpc_code="OK",grpc_method="${method}"`);

describe('leadership cost at fleet scale (real etcd)', () => {
  it('100 targets × 3 replicas: 3 leases, 3 watch streams, 3 watchers; at most 34 leaderships each', async () => {
    const T = 100;
    const R = 3;
    const TTL = 10;
    const targets = Array.from({ length: T }, (_, i) => ({
      cluster: 'test',
      context: 'ctx',
      namespace: `cost-${i}`,
    }));
    const startTxns = await grpcHandled('Txn');
    const startRanges = await grpcHandled('Range');
    const replicas: { group: EtcdLeadershipGroup; elections: EtcdLeadership[]; client: Etcd3 }[] = [];
    for (let r = 0; r < R; r++) {
      const client = new Etcd3({ hosts: etcd.endpoints });
      const log = memoryLogger().log;
      const group = createEtcdLeadershipGroup({
        membersPrefix: membersPrefix('test'),
        client,
        replicaId: `c${r}`,
        ttlSeconds: TTL,
        log,
        monotonicNow: monotonicClock,
      });
      const elections = targets.map((t) => group.election(targetKey(t), electionPrefix(t), log));
      for (const e of elections) e.start();
      group.start();
      replicas.push({ group, elections, client });
    }
    const probe = new Etcd3({ hosts: etcd.endpoints });
    try {
      await waitFor(
        'every target led once, settled',
        async () =>
          targets.every((_, i) => replicas.filter((r) => r.elections[i]?.isLeader).length === 1) &&
          (
            await probe
              .getAll()
              .prefix(`${clusterElectionsPrefix('test')}cost-`)
              .keys()
          ).length === T,
        60_000,
      );
      const leading = replicas.map((r) => r.elections.filter((e) => e.isLeader).length);
      expect(Math.max(...leading)).toBeLessThanOrEqual(Math.ceil(T / R));
      const txns = (await grpcHandled('Txn')) - startTxns;
      const ranges = (await grpcHandled('Range')) - startRanges;

      const leases = (await probe.leaseClient.leaseLeases()).leases.length;
      const streams = await etcdMetric('etcd_debugging_mvcc_watch_stream_total');
      const watchers = await etcdMetric('etcd_debugging_mvcc_watcher_total');
      expect(leases).toBe(R);
      expect(streams).toBe(R);
      expect(watchers).toBe(R);

      // Keepalives: etcd's count of lease renewals over two keepalive periods (TTL / 3 each).
      const renewed0 = await etcdMetric('etcd_debugging_lease_renewed_total');
      const t0 = monotonicClock();
      await waitFor(
        'two keepalive periods',
        () => monotonicClock() - t0 >= (2 * TTL * 1000) / 3 + 100,
        30_000,
        100,
      );
      const renewed = (await etcdMetric('etcd_debugging_lease_renewed_total')) - renewed0;
      const perSecond = renewed / ((monotonicClock() - t0) / 1000);
      console.info(
        `[leadership cost] ${T} targets × ${R} replicas: ${leases} leases, ${perSecond.toFixed(2)} keepalives/s ` +
          `(${renewed} renewals), ${streams} watch streams, ${watchers} watchers; leaderships ${leading.join('/')}; ` +
          `etcd requests to settle: ${txns} Txn, ${ranges} Range (${((txns + ranges) / T).toFixed(1)} per target)`,
      );
    } finally {
      for (const r of replicas) await r.group.close();
      for (const r of replicas) r.client.close();
      probe.close();
    }
  }, 120_000);

  // A soak (SOAK=1): the fleet that opened the etcd client's circuit breaker with a lease per target.
  it.runIf(process.env.SOAK === '1')(
    '1,000 targets × 5 replicas on the production etcd client: no failed etcd call, all led once, none over the cap',
    async () => {
      const T = 1000;
      const R = 5;
      const targets = Array.from({ length: T }, (_, i) => ({
        cluster: 'test',
        context: 'ctx',
        namespace: `soak-${i}`,
      }));
      const logs = Array.from({ length: R }, () => memoryLogger('info'));
      const replicas = logs.map((mem, r) => {
        const client = createEtcdClient(etcd.endpoints);
        const group = createEtcdLeadershipGroup({
          membersPrefix: membersPrefix('test'),
          client,
          replicaId: `s${r}`,
          ttlSeconds: 10,
          log: mem.log,
          monotonicNow: monotonicClock,
        });
        const elections = targets.map((t) => group.election(targetKey(t), electionPrefix(t), mem.log));
        for (const e of elections) e.start();
        group.start();
        return { group, elections, client };
      });
      const t0 = monotonicClock();
      try {
        await waitFor(
          'every target led once',
          () => targets.every((_, i) => replicas.filter((r) => r.elections[i]?.isLeader).length === 1),
          120_000,
          200,
        );
        const allLedMs = monotonicClock() - t0;
        const leading = replicas.map((r) => r.elections.filter((e) => e.isLeader).length);
        expect(Math.max(...leading)).toBeLessThanOrEqual(Math.ceil(T / R) + 1);
        const failures = logs.flatMap((m) =>
          m.lines.filter((l) => l.level === 'warn' || l.level === 'error'),
        );
        const probe = new Etcd3({ hosts: etcd.endpoints });
        const leases = (await probe.leaseClient.leaseLeases()).leases.length;
        probe.close();
        console.info(
          `[leadership cost] ${T} targets × ${R} replicas: all led ${Math.round(allLedMs)} ms after start ` +
            `(TTL 10 s), leaderships ${leading.join('/')}, ${failures.length} warnings; ` +
            `${leases} leases`,
        );
        expect(failures).toEqual([]);
        expect(leases).toBe(R);
      } finally {
        for (const r of replicas) await r.group.close();
        for (const r of replicas) r.client.close();
      }
    },
    300_000,
  );
});
