/**
 * A replica SIGTERMed during an etcd outage stops within its forced-exit deadline (src/commands/run.ts: after
 * 15 s it exits 1) and exits 0: its etcd calls on the way out are bounded, its lease simply expires. Two
 * outages: etcd killed (its port refuses at once) and etcd frozen with SIGSTOP (every call hangs).
 * Real etcd, Redis and replica processes; the sandbox API server. Found by the nemesis (seed 407076731).
 */
import { describe, expect, it } from 'vitest';
import { deletesPer } from '../helpers/cluster.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  replicaEnv,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();
const etcd = () => {
  const m = cluster().etcd.members[0];
  if (!m) throw new Error('no etcd member');
  return m;
};

const outages = {
  killed: { down: () => etcd().kill(), up: () => etcd().restart() },
  frozen: {
    down: async () => etcd().pause(),
    up: async () => etcd().resume(),
  },
} as const;

describe('SIGTERM during an etcd outage', () => {
  // At once: its terms are live, the lease must be revoked. Once lost (the nemesis' case, about 2 s in with a
  // 3 s TTL): its terms have ended, the session is trying to grant a new lease.
  const cases = Object.entries(outages).flatMap(([how, outage]) =>
    (['at once', 'once its leadership is lost'] as const).map((when) => ({ how, outage, when })),
  );
  for (const [n, { how, outage, when }] of cases.entries()) {
    it(`etcd ${how}, SIGTERM ${when} → it stops within its deadline (exit 0); no pod deleted twice or early`, async () => {
      const namespaces = [1, 2, 3].map((i) => `stop-${n}-${i}`);
      const env = replicaEnv(cluster(), namespaces[0] ?? '', `es${n}`, {
        SDC_TARGETS: namespaces.map((ns) => `${cluster().context}:${ns}`).join(','),
      });
      const first = cluster().startReplica(`s${n}-a`, env);
      const replicas = [first];
      let restored = false;
      try {
        for (const ns of namespaces) await firstLeader([first], ns);
        const before = namespaces.flatMap((ns) => createDrivers(cluster().server, ns, 5, `s${n}-a`));
        await waitGone(cluster().server, before, 'pods deleted before the outage');
        const downAt = Date.now();
        await outage.down();
        // Due during the outage: nobody may delete them until a leader is elected again.
        const during = namespaces.flatMap((ns) => createDrivers(cluster().server, ns, 5, `s${n}-b`));
        // The replica has seen them (enqueued) before it is told to stop.
        await first.waitForLine(
          (l) => l.msg === 'enqueue' && l.pod === during[during.length - 1]?.metadata?.name,
          30_000,
        );
        if (when !== 'at once')
          await first.waitForLine((l) => l.msg === 'leadership lost' && timeOf(l) >= downAt, 15_000);
        first.kill('SIGTERM');
        expect(await first.exited).toBe(0);
        // Frozen with a live lease, the revoke cannot be answered: the lease is left to expire, and it says so.
        if (how === 'frozen' && when === 'at once')
          expect(
            first.lines.some(
              (l) => l.msg === 'cannot revoke the session lease; it expires on the server within its TTL',
            ),
          ).toBe(true);
        await outage.up();
        restored = true;
        // Another replica takes over once etcd is back and cleans what was left, each pod once.
        const second = cluster().startReplica(`s${n}-b`, env);
        replicas.push(second);
        await waitGone(cluster().server, during, 'pods deleted by the next replica');
        const uids = [...before, ...during].map(uidOf);
        for (const ns of namespaces)
          expect(
            checkInvariants(
              cluster().server,
              ns,
              uids.filter((_, i) => [...before, ...during][i]?.metadata?.namespace === ns),
              { retentionMs: 1000 },
            ),
          ).toEqual(CLEAN);
        expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      } finally {
        if (!restored) await outage.up();
        await stopAll(replicas);
      }
    }, 120_000);
  }
});
