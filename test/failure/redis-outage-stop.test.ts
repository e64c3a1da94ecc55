/**
 * A replica SIGTERMed during a Redis outage, with jobs in flight, stops within its forced-exit deadline
 * (src/commands/run.ts: after 15 s it exits 1) and exits 0: closing its BullMQ Worker waits for the in-flight
 * jobs, and those wait for Redis to put them back. Three outages: Redis killed (its port refuses at once),
 * frozen with SIGSTOP (every command hangs), and restarted empty on another port (the replica's address
 * never answers again: the 30-minute nemesis soak of seed 1954400105). The jobs left active are
 * not lost: their locks lapse and the next leader takes them over (BullMQ stalled-jobs check), or its
 * reconcile enqueues the pods again when Redis came back empty.
 * Real Redis, etcd and replica processes; the sandbox API server.
 */
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  replicaEnv,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster({ context: 'ro' });
const redis = () => cluster().redis;

const outages = {
  killed: { down: () => redis().kill(), up: () => redis().restart() },
  frozen: { down: async () => redis().pause(), up: async () => redis().resume() },
  'restarted on another port': {
    down: () => redis().restartOnFreshPort(),
    up: async () => undefined,
  },
} as const;

describe('SIGTERM during a Redis outage, DELETEs in flight', () => {
  for (const [n, [how, outage]] of Object.entries(outages).entries()) {
    it(`Redis ${how} → it stops within its deadline (exit 0); every pod deleted once, by the next leader`, async () => {
      const ns = `redis-stop-${n}`;
      const env = replicaEnv(cluster(), ns, `rs${n}`, { SDC_CONCURRENCY: '5' });
      const first = cluster().startReplica(`rs${n}-a`, env);
      const replicas = [first];
      let restored = false;
      // Every DELETE of the first batch is answered after 4 s: its jobs are active when Redis goes.
      const slow = cluster().server.faults.inject({
        verb: 'delete',
        path: `/namespaces/${ns}/`,
        latencyMs: 4_000,
      });
      try {
        await firstLeader([first], ns);
        const pods = createDrivers(cluster().server, ns, 8, `rs${n}`);
        await waitFor(
          '5 DELETEs in flight',
          () =>
            cluster()
              .server.requests.arrivals()
              .filter((a) => a.verb === 'delete' && a.path.includes(`/namespaces/${ns}/`)).length >= 5,
          30_000,
        );
        await outage.down();
        first.kill('SIGTERM');
        expect(await first.exited).toBe(0);
        // It said why its jobs in flight were left behind.
        expect(first.lines.filter((l) => String(l.msg).startsWith('worker close timed out'))).toHaveLength(1);
        cluster().server.faults.clear(slow);
        await outage.up();
        restored = true;
        // The next leader (on Redis' address now) deletes whatever the first did not, and nothing twice.
        const second = cluster().startReplica(`rs${n}-b`, replicaEnv(cluster(), ns, `rs${n}`));
        replicas.push(second);
        await waitGone(cluster().server, pods, 'pods deleted by the next replica');
        const uids = pods.map(uidOf);
        // A DELETE the first replica sent and the next one's may both arrive (the first's held in latency):
        // one is applied, the other finds the pod gone (404). Applied once, by one replica or the other.
        expect(
          checkInvariants(cluster().server, ns, uids, { retentionMs: 1000, acceptedOnly: true }),
        ).toEqual(CLEAN);
      } finally {
        cluster().server.faults.clear(slow);
        if (!restored) await outage.up();
        await stopAll(replicas);
      }
    }, 120_000);
  }
});
