/**
 * Redis Sentinel failovers under a steady stream of driver pods: one master, two replicas and three Sentinels
 * (Debian's redis-server and redis-sentinel, no persistence), three replica processes of the cleaner in
 * `redisMode: sentinel` over three targets, real etcd, the sandbox API server.
 *
 * The master is SIGKILLed; once cleaning has resumed on the new master, that one is frozen (SIGSTOP) past the
 * Sentinels' down-after, so they fail over again; then the killed one comes back as a replica and the frozen one
 * is thawed (the Sentinels make it a replica). After settling: every pod deleted, at most one accepted DELETE
 * per pod, none before its deadline; cleaning resumed after each failover (no wedged worker). Printed: the
 * time from the kill to the first DELETE of a pod due after it, and the lateness of the pods pending at the kill.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedisSentinel, startRedisSentinel } from '../../harness/sandbox/redis-sentinel.ts';
import {
  CLEAN,
  checkInvariants,
  firstLeader,
  replicaEnv,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';
import { diagnose, failoverReport, medianWorst, startPodStream, waitForDeletesAfter } from './redis-ha.ts';

const cluster = useFailureCluster();
let sentinel: LocalRedisSentinel;
beforeAll(async () => {
  sentinel = await startRedisSentinel({ replicas: 2, sentinels: 3, downAfterMs: 2000 });
}, 60_000);
afterAll(async () => {
  await sentinel?.stop();
});

const RETENTION_MS = 3000;
const NAMESPACES = ['sen-a', 'sen-b', 'sen-c'];

describe('Redis Sentinel failover', () => {
  it('master SIGKILLed, then the new master frozen past down-after, then the old one back as a replica → every pod deleted once, none early; cleaning resumes after each', async () => {
    const server = cluster().server;
    const env = {
      ...replicaEnv(cluster(), NAMESPACES[0] as string, 'sen', { SDC_RETENTION: `${RETENTION_MS}ms` }),
      SDC_TARGETS: NAMESPACES.map((ns) => `${cluster().context}:${ns}`).join(','),
      SDC_REDIS_MODE: 'sentinel',
      SDC_REDIS_SENTINELS: sentinel.sentinels.map((s) => `${s.host}:${s.port}`).join(','),
      SDC_REDIS_MASTER_NAME: sentinel.masterName,
    };
    const replicas = ['s1', 's2', 's3'].map((id) => cluster().startReplica(id, env));
    const stream = startPodStream(server, NAMESPACES, 'sen', 150);
    try {
      for (const ns of NAMESPACES) await firstLeader(replicas, ns);
      await waitForDeletesAfter(server, 0, 10, 'cleaning under way before the kill');

      // 1. SIGKILL the master.
      const first = sentinel.masterPort() as number;
      const killAt = server.clock.now();
      await sentinel.nodes.find((n) => n.port === first)?.kill();
      const second = await sentinel.waitForNewMaster(first);
      const promotedAt = server.clock.now();
      await waitForDeletesAfter(server, promotedAt, 15, 'cleaning resumed on the new master');

      // 2. Freeze the new master past the Sentinels' down-after: they fail over again.
      const frozen = sentinel.nodes.find((n) => n.port === second);
      frozen?.pause();
      const third = await sentinel.waitForNewMaster(second);
      await waitForDeletesAfter(server, server.clock.now(), 15, 'cleaning resumed on the third master');

      // 3. The killed master back (empty) as a replica; the frozen one thawed (the Sentinels demote it).
      await sentinel.nodes.find((n) => n.port === first)?.restartAsReplicaOf(third);
      frozen?.resume();
      await waitForDeletesAfter(server, server.clock.now(), 15, 'cleaning goes on with both back');

      stream.stop();
      await waitGone(server, stream.pods, 'every pod deleted after the failovers', 60_000).catch((err) => {
        console.info(diagnose(server, stream.pods, replicas));
        throw err;
      });
      if (process.env.HA_DEBUG) console.info(diagnose(server, stream.pods, replicas));
      const report = failoverReport(server, stream, RETENTION_MS, killAt);
      expect(report.repeated).toEqual([]);
      expect(report.early).toEqual([]);
      for (const ns of NAMESPACES) {
        const uids = stream.pods.filter((p) => p.metadata?.namespace === ns).map(uidOf);
        expect(checkInvariants(server, ns, uids, { retentionMs: RETENTION_MS, acceptedOnly: true })).toEqual(
          CLEAN,
        );
      }
      for (const r of replicas) expect(r.child.exitCode).toBeNull();
      // No wedged worker: no leader had to be stepped down by the self-check for processing nothing.
      expect(replicas.flatMap((r) => r.lines.filter((l) => /leader is stuck/.test(String(l.msg))))).toEqual(
        [],
      );
      console.info(
        `[failure] sentinel: ${stream.pods.length} pods; master ${first} killed → ${second} promoted ` +
          `${promotedAt - killAt} ms later → frozen → ${third}; first DELETE of a pod due after the kill ` +
          `${report.killToFirstDeleteMs} ms after it; pods pending at the kill (${report.pendingLatenessMs.length}) ` +
          `late ${medianWorst(report.pendingLatenessMs)} (median / worst)`,
      );
    } finally {
      stream.stop();
      await stopAll(replicas);
    }
  }, 180_000);
});
