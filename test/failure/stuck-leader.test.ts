/**
 * A leader whose own path to Redis fails while the other replicas' paths work: three replicas, each reaching
 * Redis through its own TCP relay (test/nemesis/tcp-proxy.ts); only the leader's relay is cut — wedged
 * (connections accepted, nothing answers) or refused (nothing listens). The leader cannot take a job.
 * - Wedged: its connection looks up, so the self-check finds it stuck and steps it down; it then reports the
 *   target not ready (as a replica whose informer cannot list does) and stays out of the target's line while
 *   its own queue does not answer.
 * - Refused: its connection is down; past `redisDownNotReady` it reports the target not ready (reason `redis`)
 *   and hands it over, whether or not the self-check has found it stuck by then.
 * Either way the next replica by the assignment rule takes the target and deletes every pod once. It says why
 * on every surface: its log, `/readyz` (`notReady`; the probe itself does not fail), `sdc_target_ready` 0,
 * `sdc_target_not_ready{reason}`, and `status` (`not ready on`). Once its path heals it is ready again.
 */
import { expect, it } from 'vitest';
import { QUEUE_LOOK_TIMEOUT_MS, selfCheckSettings } from '../../src/cleaner/self-check.ts';
import { FAILOVER_TIMERS } from '../../src/failover-timers.ts';
import { assignTargets } from '../../src/leadership/assignment.ts';
import { targetKey } from '../../src/queue/job-identity.ts';
import { deletesPer, linesWhere, serviceEnv } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTcpProxy, type TcpProxy } from '../nemesis/tcp-proxy.ts';
import {
  createDrivers,
  firstLeader,
  gaugeByNamespace,
  httpUrl,
  replicaEnv,
  runStatus,
  stopAll,
  targetIn,
  timeOf,
  uidOf,
  useFailureCluster,
} from './helpers.ts';

const cluster = useFailureCluster();

const RETENTION_MS = 1000;
/** `replicaEnv`'s election TTL. */
const TTL_MS = 3000;
const GRACE_MS = 4000;
const CHECK = selfCheckSettings(TTL_MS / 1000, GRACE_MS);
/** Room for a loaded 2-core machine: process scheduling, etcd's watch, Redis round trips, ms. */
const LOAD_MS = 30_000;
/**
 * From the pods' creation to their deletion by another replica, ms: due after the retention, overdue after the
 * grace; the leader's next self-check (one period) finds it stuck once its queue look times out; the next
 * replica is elected within a TTL and deletes them.
 */
const TAKEOVER_MS =
  RETENTION_MS + CHECK.graceMs + CHECK.intervalMs + QUEUE_LOOK_TIMEOUT_MS + TTL_MS + LOAD_MS;

/** One TCP relay to Redis per replica id, so that one replica's own path can be cut. */
async function startRelays(redisPort: number, ids: readonly string[]): Promise<Map<string, TcpProxy>> {
  const relays = new Map<string, TcpProxy>();
  for (const id of ids) relays.set(id, await startTcpProxy(redisPort));
  return relays;
}

/** Heals and closes every relay (a relay already closed is ignored). */
async function closeRelays(relays: ReadonlyMap<string, TcpProxy>): Promise<void> {
  await Promise.all(
    [...relays.values()].map((r) =>
      r
        .heal()
        .catch(() => undefined)
        .then(() => r.close()),
    ),
  );
}

it.each(['wedged', 'refused'] as const)(
  "the leader's own path to Redis %s, the others' working → it reports the target not ready, leaves and stays out; the next replica by the assignment deletes every pod once",
  async (how) => {
    const c = cluster();
    const ns = `stuck-${how}`;
    const target = `${c.context}:${ns}`;
    const ids = ['a', 'b', 'c'].map((x) => `sl-${how}-${x}`);
    const env = replicaEnv(c, ns, `sl${how[0]}`, {
      SDC_RETENTION: `${RETENTION_MS}ms`,
      SDC_OVERDUE_GRACE: `${GRACE_MS}ms`,
    });
    const relays = await startRelays(c.redis.port, ids);
    const replicas = ids.map((id) =>
      c.startReplica(id, { ...env, SDC_REDIS_URL: `redis://127.0.0.1:${relays.get(id)?.port}` }),
    );
    try {
      const leader = await firstLeader(replicas, ns);
      const others = replicas.filter((r) => r !== leader);
      // The next replica by the assignment rule: the owner among the members once the leader is not ready.
      // Balanced by the target's key (its cluster and namespace), as the replicas do.
      const key = targetKey(targetIn(c, ns));
      const next = assignTargets(
        [key],
        others.map((r) => r.id),
      ).owners.get(key);
      const relay = relays.get(leader.id);
      if (!relay || !next) throw new Error('no relay or no next owner');

      if (how === 'wedged') relay.wedge();
      else await relay.refuse();
      const cutAt = Date.now();
      const pods = createDrivers(c.server, ns, 5, how);
      const uids = pods.map(uidOf);
      await waitFor('every pod deleted', () => c.server.pods.list(ns).length === 0, TAKEOVER_MS, 100).catch(
        (err: Error) => {
          const story = linesWhere(replicas, (l) =>
            /lead|elect|stuck|step|ready|hand/.test(String(l.msg)),
          ).map((l) => `${l.replica} ${l.time} ${l.msg} ${l.reason ?? l.why ?? ''}`);
          throw new Error(`${err.message}\n${story.join('\n')}`);
        },
      );
      expect(deletesPer(c.server, uids)).toEqual(uids.map(() => 1));
      const accepted = await waitFor('an accepted line per pod', () => {
        const ls = linesWhere(replicas, (l) => l.namespace === ns && l.outcome === 'accepted');
        return ls.length >= uids.length ? ls : undefined;
      });
      // By the others (the third replica may lead a moment as a fallback on a loaded machine; it then hands
      // the target to its owner).
      expect(accepted.map((l) => l.replica)).not.toContain(leader.id);

      // Wedged: the leader said why it left, once. Either way it was not elected again while its path was cut.
      let leftAt = cutAt;
      if (how === 'wedged') {
        const stuck = leader.lines.filter(
          (l) => l.namespace === ns && String(l.msg).startsWith('self-check: leader is stuck'),
        );
        expect(stuck).toHaveLength(1);
        expect(stuck[0]).toMatchObject({ level: 'error' });
        expect(String(stuck[0]?.why)).toMatch(/cannot be read/);
        leftAt = timeOf(stuck[0]);
      }
      expect(
        leader.lines.filter((l) => l.namespace === ns && l.msg === 'elected leader' && timeOf(l) > cutAt),
      ).toEqual([]);
      // Another replica was elected within a TTL (and the machine's load) of the step-down (refused: of the
      // connection's outage making it not ready); the target settles on the next replica by the assignment.
      const elected = linesWhere(
        others,
        (l) => l.namespace === ns && l.msg === 'elected leader' && timeOf(l) >= cutAt,
      ).sort((a, b) => timeOf(a) - timeOf(b));
      const leaveMs = how === 'wedged' ? 0 : FAILOVER_TIMERS.redisDownNotReadyMs;
      expect(timeOf(elected[0]) - leftAt).toBeLessThan(leaveMs + TTL_MS + LOAD_MS);
      const otherUrl = await httpUrl(others[0] ?? leader);
      await waitFor(
        `${target} led by ${next}`,
        async () => {
          const body = (await (
            await fetch(`${otherUrl}/api/v1/leaders`, { signal: AbortSignal.timeout(5000) })
          ).json()) as { targets: Record<string, { leader: string | null; assigned?: string | null }> };
          const row = body.targets[target];
          return row?.leader === next && row.assigned === next;
        },
        TTL_MS + LOAD_MS,
      );

      // Every surface says the target is not ready on it, and why; /readyz without failing (the cause of a
      // step-down may be shared, as Redis is).
      const url = await httpUrl(leader);
      const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) });
      expect(ready.status).toBe(200);
      const reason = how === 'wedged' ? 'stepped-down' : 'redis';
      expect(await ready.json()).toMatchObject({
        notReady: [target],
        ...(how === 'wedged' ? { steppedDown: [target] } : {}),
      });
      expect((await gaugeByNamespace(url, 'sdc_target_ready')).get(ns)).toBe(0);
      await waitFor(
        `sdc_target_not_ready{reason="${reason}"} 1 on the old leader`,
        async () => (await gaugeByNamespace(url, 'sdc_target_not_ready', `reason="${reason}"`)).get(ns) === 1,
        FAILOVER_TIMERS.redisDownNotReadyMs + LOAD_MS,
      );
      const s = await runStatus({ ...serviceEnv(c.server.kubeconfigPath, c.redis, c.etcd), ...env });
      const row = s.json.targets.find((t) => t.target === target);
      expect(row?.notReadyOn).toEqual([leader.id]);
      expect(row?.leader).toBe(next);

      // Healed: its queue answers, it is ready again (after a step-down, once its hold has passed), and
      // cleaning goes on.
      await relay.heal();
      await waitFor(
        'the old leader ready again',
        async () => (await gaugeByNamespace(url, 'sdc_target_ready')).get(ns) === 1,
        CHECK.graceMs + 2 * CHECK.intervalMs + QUEUE_LOOK_TIMEOUT_MS + LOAD_MS,
      );
      if (how === 'wedged')
        await leader.waitForLine((l) => l.namespace === ns && l.msg === 'ready again for this target');
      const later = createDrivers(c.server, ns, 3, `${how}-later`);
      await waitFor(
        'the later pods deleted',
        () => c.server.pods.list(ns).length === 0,
        RETENTION_MS + TTL_MS + LOAD_MS,
      );
      expect(deletesPer(c.server, later.map(uidOf))).toEqual(later.map(() => 1));
    } finally {
      await stopAll(replicas);
      await closeRelays(relays);
    }
  },
  180_000,
);

it('a replica that starts with its own path to Redis refused is not ready for the target (reason redis), so it is never assigned nor elected; the other deletes every pod once; healed, it takes its share', async () => {
  const c = cluster();
  const ns = 'stuck-at-start';
  const target = `${c.context}:${ns}`;
  const env = replicaEnv(c, ns, 'slstart', {
    SDC_RETENTION: `${RETENTION_MS}ms`,
    SDC_OVERDUE_GRACE: `${GRACE_MS}ms`,
  });
  const ids = ['sl-start-a', 'sl-start-b'];
  const key = targetKey(targetIn(c, ns));
  // The cut replica is the one the assignment rule gives the target to when both are ready.
  const cutId = assignTargets([key], ids).owners.get(key);
  const otherId = ids.find((id) => id !== cutId);
  if (!cutId || !otherId) throw new Error('no owner');
  const relays = await startRelays(c.redis.port, ids);
  const cutRelay = relays.get(cutId) as TcpProxy;
  await cutRelay.refuse();
  const start = (id: string) =>
    c.startReplica(id, { ...env, SDC_REDIS_URL: `redis://127.0.0.1:${relays.get(id)?.port}` });
  // The other replica first, ready for the target before the cut one starts: were neither ready (the other's
  // informer still listing on a loaded machine), the target would be assigned as if both were, and the cut
  // replica, its owner, elected (gated: it would not consume).
  const other = start(otherId);
  const replicas = [other];
  try {
    await other.waitForLine((l) => l.namespace === ns && l.msg === 'elected leader', LOAD_MS);
    const cut = start(cutId);
    replicas.push(cut);
    const url = await httpUrl(cut);
    await waitFor(
      'the cut replica not ready for the target: its Redis has not answered',
      async () =>
        (await gaugeByNamespace(url, 'sdc_target_not_ready', 'reason="redis"')).get(ns) === 1 &&
        (await gaugeByNamespace(url, 'sdc_target_ready')).get(ns) === 0,
      LOAD_MS,
    );
    const pods = createDrivers(c.server, ns, 4, 'at-start');
    const uids = pods.map(uidOf);
    await waitFor(
      'every pod deleted',
      () => c.server.pods.list(ns).length === 0,
      RETENTION_MS + TTL_MS + LOAD_MS,
      100,
    );
    expect(deletesPer(c.server, uids)).toEqual(uids.map(() => 1));
    expect(cut.lines.filter((l) => l.namespace === ns && l.msg === 'elected leader')).toEqual([]);
    const s = await runStatus({ ...serviceEnv(c.server.kubeconfigPath, c.redis, c.etcd), ...env });
    const row = s.json.targets.find((t) => t.target === target);
    expect(row?.notReadyOn).toEqual([cutId]);
    expect(row?.leader).toBe(otherId);

    // Healed: its Redis answers, it is ready, and the target moves to it, its assigned replica.
    await cutRelay.heal();
    await cut.waitForLine((l) => l.namespace === ns && l.msg === 'elected leader', LOAD_MS + TTL_MS);
    const later = createDrivers(c.server, ns, 2, 'at-start-later');
    await waitFor(
      'the later pods deleted',
      () => c.server.pods.list(ns).length === 0,
      RETENTION_MS + TTL_MS + LOAD_MS,
    );
    expect(deletesPer(c.server, later.map(uidOf))).toEqual(later.map(() => 1));
  } finally {
    await stopAll(replicas);
    await closeRelays(relays);
  }
}, 180_000);
