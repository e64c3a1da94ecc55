/**
 * Replica processes (`spark-driver-cleaner run`) electing on a real ZooKeeper, against real Redis and the
 * sandbox API server: every pod deleted exactly once end to end, a leader frozen past its session timeout
 * (the server expires its session; woken, it sends no DELETE from the old term), and the whole ensemble down
 * and back. DELETEs are counted from the sandbox's request log, and per replica through proxies.
 */
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CLI_PATH } from '../../harness/sandbox/replica-process.ts';
import { deletesPer, serviceEnv } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';
import {
  bystandersIntact,
  CLEAN,
  checkInvariants,
  createBystanders,
  createDrivers,
  firstLeader,
  httpUrl,
  linesSince,
  replicaEnv,
  startApiProxy,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();
const zk = useZooKeeper();

/** A replica's environment on ZooKeeper (no etcd): session timeout 3 s. */
const zkEnv = (ns: string, prefix: string, extra: Record<string, string> = {}) =>
  replicaEnv(cluster(), ns, prefix, { SDC_ETCD_ENDPOINTS: '', SDC_ZOOKEEPER: zk().connect, ...extra });

/** Runs `src/cli.ts <args>` as an operator beside the replicas; resolves with its exit code and stdout. */
function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_PATH, ...args],
      { env: { ...process.env, ...env, SDC_LOG_LEVEL: 'silent' }, timeout: 60_000 },
      (err, stdout) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout }),
    );
  });
}

describe('replicas on ZooKeeper', () => {
  it('three replicas, 60 terminated drivers → each deleted exactly once, by the leader; one session per replica', async () => {
    const ns = 'zk-e2e';
    // A 10 s session: this case is about one leader's work, not failover (a busy machine can stall a replica's
    // pings past a 3 s session's 2 s read timeout).
    const replicas = ['z1', 'z2', 'z3'].map((id) =>
      cluster().startReplica(id, zkEnv(ns, 'zk1', { SDC_ELECTION_TTL_SECONDS: '10' })),
    );
    const server = cluster().server;
    try {
      const leader = await firstLeader(replicas, ns);
      const bystanders = createBystanders(server, ns);
      const pods = createDrivers(server, ns, 60, 'zk', 10_000);
      const uids = pods.map(uidOf);
      await waitGone(server, pods, 'every driver pod deleted');
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 1));
      expect(checkInvariants(server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      expect(bystandersIntact(server, bystanders)).toBe(true);
      // A pod is gone when its DELETE is answered; the replica's line about it is read from its stdout after.
      const deletedBy = (r: (typeof replicas)[number]) =>
        r.lines.filter((l) => l.msg === 'driver pod deleted').length;
      await waitFor('every deletion logged', () => replicas.reduce((n, r) => n + deletedBy(r), 0) >= 60);
      expect(deletedBy(leader)).toBe(60);
      // status, /api/v1/leaders and explain read the same election and members from ZooKeeper.
      const c = cluster();
      const env = {
        ...serviceEnv(c.server.kubeconfigPath, c.redis, c.etcd),
        ...zkEnv(ns, 'zk1', { SDC_ELECTION_TTL_SECONDS: '10' }),
      };
      const st = await cli(['status', '--json'], env);
      const json = JSON.parse(st.stdout) as {
        targets: { leader: string | null; candidates: string[] }[];
        balance?: { members: string[] };
      };
      expect(json.targets[0]?.leader).toBe(leader.id);
      expect(json.targets[0]?.candidates).toEqual([]); // balanced: the others wait out of line
      expect(json.balance?.members).toEqual(['z1', 'z2', 'z3']);
      const url = await httpUrl(replicas[0] as (typeof replicas)[number]);
      const leaders = (await (await fetch(`${url}/api/v1/leaders`)).json()) as {
        targets: Record<string, { leader: string | null }>;
        balance?: { members: string[] };
      };
      expect(Object.values(leaders.targets).map((t) => t.leader)).toEqual([leader.id]);
      expect(leaders.balance?.members).toEqual(['z1', 'z2', 'z3']);
      const ex = await cli(['explain', '--offline', `${ns}/${pods[0]?.metadata?.name}`], env);
      expect(ex.stdout).toContain(`${leader.id} (zookeeper election)`);
      // One ZooKeeper session per replica, none lost.
      for (const r of replicas) {
        expect(
          r.lines.filter((l) => l.msg === 'zookeeper session connected' && l.newSession === true),
        ).toHaveLength(1);
        expect(r.lines.filter((l) => l.msg === 'zookeeper connection lost')).toEqual([]);
      }
    } finally {
      await stopAll(replicas);
    }
  }, 120_000);

  it('leader SIGSTOPped past its session timeout with 20 jobs in flight → the other deletes each pod once; woken, the old one sends nothing', async () => {
    const ns = 'zk-frozen';
    const n = 20;
    const server = cluster().server;
    const [p1, p2] = await Promise.all([startApiProxy(server), startApiProxy(server)]);
    const base = zkEnv(ns, 'zk2', { SDC_RECHECK: 'live', SDC_CONCURRENCY: '50' });
    const replicas = [
      cluster().startReplica('zf1', { ...base, ...p1.env }),
      cluster().startReplica('zf2', { ...base, ...p2.env }),
    ];
    const proxyOf = new Map([
      [replicas[0], p1],
      [replicas[1], p2],
    ]);
    try {
      const old = await firstLeader(replicas, ns);
      const next = replicas.find((r) => r !== old);
      if (!next) throw new Error('no second replica');
      // The re-check GETs are held, so the leader's jobs are all in flight, no DELETE sent, when it freezes.
      const held = server.faults.inject({ verb: 'get', path: `/namespaces/${ns}/pods/`, latencyMs: 60_000 });
      const pods = createDrivers(server, ns, n, 'zf', 10_000);
      const uids = pods.map(uidOf);
      const gets = () =>
        server.requests
          .arrivals()
          .filter((a) => a.verb === 'get' && a.path.includes(`/namespaces/${ns}/pods/`)).length;
      await waitFor(`the leader holds the ${n} jobs`, () => gets() >= n, 30_000);
      const stoppedAt = Date.now();
      old.kill('SIGSTOP');
      server.faults.clear(held);
      await next.waitForLine(
        (l) => l.msg === 'elected leader' && l.namespace === ns && timeOf(l) >= stoppedAt,
        30_000,
      );
      await waitGone(server, pods, 'every pod deleted by the new leader', 40_000);
      // Woken: its session expired on the server; its held GETs are answered now, yet no DELETE leaves it.
      const resumedAt = Date.now();
      old.kill('SIGCONT');
      await old.waitForLine((l) => l.msg === 'leadership lost' && timeOf(l) >= resumedAt, 15_000);
      await old.waitForLine(
        (l) => l.msg === 'zookeeper session connected' && l.newSession === true && timeOf(l) >= resumedAt,
        15_000,
      );
      const fenced = () =>
        linesSince(old, resumedAt, (l) => l.outcome === 'fenced' || l.outcome === 'aborted');
      await waitFor(
        'the woken leader has settled its old jobs',
        () => old.lines.some((l) => l.msg === 'stopped consuming' && timeOf(l) >= resumedAt),
        15_000,
      );
      expect(proxyOf.get(old)?.deletes()).toEqual([]);
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 1));
      expect(checkInvariants(server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      console.info(
        `[failure] zookeeper: leader frozen ${resumedAt - stoppedAt} ms (session timeout 3 s), 0 DELETEs after waking, ` +
          `${fenced().length} jobs fenced or aborted`,
      );
    } finally {
      await stopAll(replicas);
      await Promise.all([p1.close(), p2.close()]);
    }
  }, 180_000);

  it('the whole ensemble down and back → every term ends at once, leadership resumes, each pod deleted once', async () => {
    const ns = 'zk-down';
    const server = cluster().server;
    const replicas = ['zd1', 'zd2'].map((id) => cluster().startReplica(id, zkEnv(ns, 'zk3')));
    try {
      const leader = await firstLeader(replicas, ns);
      const downAt = Date.now();
      await zk().members[0]?.kill();
      await leader.waitForLine((l) => l.msg === 'leadership lost' && timeOf(l) >= downAt, 10_000);
      // Created while ZooKeeper is down: nobody leads, nothing is deleted.
      const pods = createDrivers(server, ns, 20, 'zd', 10_000);
      const uids = pods.map(uidOf);
      // Due at once, yet no DELETE while no replica leads.
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 0));
      await zk().members[0]?.restart();
      await waitGone(server, pods, 'every pod deleted after ZooKeeper came back', 60_000);
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 1));
      expect(checkInvariants(server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
    } finally {
      await stopAll(replicas);
    }
  }, 180_000);
});
