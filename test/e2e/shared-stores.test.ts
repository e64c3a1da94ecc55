/**
 * Several clusters on one Redis, one etcd, one ZooKeeper root: two sandbox API servers stand for two clusters
 * whose kubeconfigs name their context the same (`kyuubi`, as `in-cluster` is inside every pod), with the same
 * namespace names and the same replica ids (`r0`, `r1`: StatefulSet-like names in both). Real replica
 * processes, real Redis, etcd and ZooKeeper; every DELETE is read from the sandboxes' request logs.
 *
 * - sharing Redis, then also etcd, then a ZooKeeper root: every pod of both clusters deleted once, none early,
 *   each cluster with its own leader;
 * - two fleets given one explicit name for two clusters: both refuse it (error line with both fingerprints,
 *   `sdc_target_refused`, `status`), nothing is deleted meanwhile — in particular nothing in the wrong
 *   cluster — and cleaning resumes once one fleet is renamed;
 * - a cluster whose identity changes (its CA file replaced, as a CA rotation does) between two runs: the jobs
 *   queued under the old name are re-created under the new one by the reconcile, each pod deleted once.
 */
import { execFile } from 'node:child_process';
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { generate } from 'selfsigned';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildKubeconfig } from '../../harness/sandbox/apiserver/kubeconfig.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import {
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../../harness/sandbox/local-services.ts';
import { type LocalZooKeeper, startZooKeeper } from '../../harness/sandbox/local-zookeeper.ts';
import { CLI_PATH, type ReplicaProcess, spawnReplica } from '../../harness/sandbox/replica-process.ts';
import { parseClaimField } from '../../src/cleaner/claim-conflict.ts';
import { CLAIM_INTERVAL_MS } from '../../src/cleaner/cluster-claims.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import { trimPod } from '../../src/kube/driver-pod.ts';
import { clusterClaimsKey } from '../../src/queue/job-identity.ts';
import { decide } from '../../src/rules/decision.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  httpUrl,
  SELECTOR,
  stopAll,
  uidOf,
  waitGone,
} from '../failure/helpers.ts';
import { boundMs, E2E_BOUNDS } from '../helpers/bounds.ts';
import { deletesPer, tempFile } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

/** The context name both clusters' kubeconfigs use. */
const CONTEXT = 'kyuubi';
const RETENTION_MS = 3000;
const CASE_TIMEOUT_MS = 180_000;

let redis: LocalService;
let etcdA: LocalEtcd;
let etcdB: LocalEtcd;
let zk: LocalZooKeeper;
let a: SandboxApiServer;
let b: SandboxApiServer;
const replicas: ReplicaProcess[] = [];
const conns: Redis[] = [];
beforeAll(async () => {
  [redis, etcdA, etcdB, zk, a, b] = await Promise.all([
    startRedis(),
    startEtcd(),
    startEtcd(),
    startZooKeeper(),
    startSandboxApiServer({ contextName: CONTEXT, tls: true }),
    startSandboxApiServer({ contextName: CONTEXT, tls: true }),
  ]);
}, 90_000);
afterAll(async () => {
  for (const r of replicas) r.kill('SIGKILL');
  await Promise.all(replicas.map((r) => r.exited));
  for (const c of conns) c.disconnect();
  await Promise.all([a?.close(), b?.close()]);
  await Promise.all([redis?.stop(), etcdA?.stop(), etcdB?.stop(), zk?.stop()]);
});

/** Where a fleet keeps its leadership: an etcd, or ZooKeeper under its default root. */
type Store = { etcd: LocalEtcd } | { zookeeper: LocalZooKeeper };

/** Starts a replica of the fleet of `server`'s cluster, with `id` (the same ids in both fleets). */
function start(
  id: string,
  server: SandboxApiServer,
  store: Store,
  namespace: string,
  prefix: string,
  extra: Record<string, string> = {},
): ReplicaProcess {
  const r = spawnReplica({
    id,
    env: {
      KUBECONFIG: server.kubeconfigPath,
      SDC_REDIS_URL: redis.url,
      ...('etcd' in store
        ? { SDC_ETCD_ENDPOINTS: store.etcd.endpoints.join(',') }
        : { SDC_ETCD_ENDPOINTS: '', SDC_ZOOKEEPER: store.zookeeper.connect }),
      SDC_HTTP_PORT: '0',
      SDC_LOG_LEVEL: 'debug',
      SDC_TARGETS: `${CONTEXT}:${namespace}`,
      SDC_QUEUE_PREFIX: prefix,
      SDC_RETENTION: `${RETENTION_MS}ms`,
      SDC_ELECTION_TTL_SECONDS: '5',
      SDC_RETRY_BASE_DELAY: '200ms',
      SDC_RETRY_MAX_DELAY: '2s',
      SDC_LABEL_SELECTOR: SELECTOR,
      ...extra,
    },
  });
  replicas.push(r);
  return r;
}

const selector = parseLabelSelector(SELECTOR);
/**
 * DELETEs of `namespace`'s pods that reached `server` before the pod's deadline (finishedAt + retention), by
 * the server's clock.
 */
function earlyDeletes(server: SandboxApiServer, namespace: string, retentionMs = RETENTION_MS): string[] {
  return server.requests.deletes().flatMap((d) => {
    if (!d.found || d.found.metadata?.namespace !== namespace) return [];
    const s = decide(trimPod(d.found), { selector, policy: 'ALL', appState: KYUUBI_STATE_DEFAULTS });
    const finished = s.action === 'enqueue' ? s.state.finishedAtMs : undefined;
    return finished !== undefined && d.atMs < finished + retentionMs ? [String(d.uid)] : [];
  });
}

/** Every pod of `pods` gone from `server`, one DELETE each, none early, nothing else deleted. */
async function cleanedOnce(
  server: SandboxApiServer,
  namespace: string,
  pods: V1Pod[],
  what: string,
  timeoutMs: number = E2E_BOUNDS.cleaned,
) {
  await waitGone(server, pods, what, timeoutMs);
  const uids = pods.map(uidOf);
  expect(deletesPer(server, uids), `${what}: DELETE requests per pod`).toEqual(uids.map(() => 1));
  expect(checkInvariants(server, namespace, uids, { retentionMs: RETENTION_MS }), what).toEqual(CLEAN);
  expect(earlyDeletes(server, namespace), `${what}: DELETEs before the deadline`).toEqual([]);
}

/** `/api/v1/leaders` of a replica. */
async function leadersOf(r: ReplicaProcess) {
  const res = await fetch(`${await httpUrl(r, E2E_BOUNDS.elected)}/api/v1/leaders`, {
    signal: AbortSignal.timeout(5000),
  });
  return (await res.json()) as {
    targets: Record<string, { cluster: string; leader: string | null; refused: string | null }>;
    balance?: { members: string[] };
  };
}

/**
 * Two fleets of two replicas each (`r0`, `r1` in both), one per cluster, on one Redis and `storeOf` each:
 * every pod of both clusters deleted once, none early; each cluster elects its own leader among its own
 * members.
 */
async function twoFleets(storeA: Store, storeB: Store, namespace: string, prefix: string, perFleet: number) {
  const ids = Array.from({ length: perFleet }, (_, i) => `r${i}`);
  const fleetA = ids.map((id) => start(id, a, storeA, namespace, prefix));
  const fleetB = ids.map((id) => start(id, b, storeB, namespace, prefix));
  try {
    const [leaderA, leaderB] = await Promise.all([
      firstLeader(fleetA, namespace, E2E_BOUNDS.elected),
      firstLeader(fleetB, namespace, E2E_BOUNDS.elected),
    ]);
    // Each cluster's own leader at once, each balancing among its own members only (the election of one
    // cluster's target holds only its own fleet's candidates, whatever their ids).
    for (const [r, server, fleet] of [
      [leaderA, a, fleetA],
      [leaderB, b, fleetB],
    ] as const)
      await waitFor(
        `${server === a ? 'A' : 'B'}'s own leader and members, as its leader sees them`,
        async () => {
          const body = await leadersOf(r);
          const row = body.targets[`${CONTEXT}:${namespace}`];
          return (
            row?.cluster === server.clusterName &&
            row.leader !== null &&
            ids.includes(row.leader) &&
            (fleet.length === 1 || JSON.stringify(body.balance?.members) === JSON.stringify(ids))
          );
        },
        E2E_BOUNDS.follows,
      );
    const podsA = createDrivers(a, namespace, 8, `${prefix}-a`);
    const podsB = createDrivers(b, namespace, 8, `${prefix}-b`);
    await Promise.all([
      cleanedOnce(a, namespace, podsA, 'every pod of cluster A'),
      cleanedOnce(b, namespace, podsB, 'every pod of cluster B'),
    ]);
    // Each fleet's jobs, in its own cluster's queue.
    const names = [...fleetA, ...fleetB].flatMap((r) =>
      r.lines.filter((l) => l.msg === 'driver pod deleted').map((l) => [r, String(l.cluster)] as const),
    );
    for (const [r, cluster] of names)
      expect(cluster).toBe(fleetA.includes(r) ? a.clusterName : b.clusterName);
  } finally {
    await stopAll([...fleetA, ...fleetB]);
  }
}

describe('two clusters, one context name, one namespace name', () => {
  it(
    'one Redis (an etcd each): every pod of both clusters deleted once, none early',
    async () => {
      expect(a.clusterName).not.toBe(b.clusterName);
      await twoFleets({ etcd: etcdA }, { etcd: etcdB }, 'spark', 'sr1', 1);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'one Redis and one etcd: each cluster its own leader and members, every pod deleted once',
    async () => {
      await twoFleets({ etcd: etcdA }, { etcd: etcdA }, 'spark-e', 'sr2', 2);
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'one Redis and one ZooKeeper root: each cluster its own leader and members, every pod deleted once',
    async () => {
      await twoFleets({ zookeeper: zk }, { zookeeper: zk }, 'spark-z', 'sr3', 2);
    },
    CASE_TIMEOUT_MS,
  );
});

/** Runs `src/cli.ts <args>` with `env` as an operator does; resolves with its exit code and output. */
function cli(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_PATH, ...args],
      { env: { ...process.env, ...env, SDC_LOG_LEVEL: 'silent' }, timeout: E2E_BOUNDS.cli },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

describe('two fleets given one explicit cluster name for two clusters', () => {
  it(
    'both refuse it, naming both fingerprints; nothing is deleted, in neither cluster; renaming one resumes both',
    async () => {
      const ns = 'named';
      const prefix = 'sr4';
      const named = { SDC_CLUSTER_NAME: 'prod' };
      const fleetA = ['r0', 'r1'].map((id) => start(id, a, { etcd: etcdB }, ns, prefix, named));
      // Replica ids are unique in a membership scope (they are pod names): fleet B's differ from fleet A's, as
      // both fleets give the one name and so share one scope. (With one id in both, one membership entry
      // would carry each fleet's fingerprints in turn, and the refusal would come and go with it.)
      let fleetB = ['b0'].map((id) => start(id, b, { etcd: etcdB }, ns, prefix, named));
      try {
        const refusal = (r: ReplicaProcess) =>
          r.waitForLine(
            (l) => l.level === 'error' && /^cluster name prod is used by two clusters/.test(String(l.msg)),
            // Measured ≤ 1.7 s; at worst a claim interval: a replica that checked before the other fleet
            // claimed the name sees it at its next refresh.
            boundMs(1_700, CLAIM_INTERVAL_MS),
          );
        const lines = await Promise.all([...fleetA, ...fleetB].map(refusal));
        // Both identities (the name and each cluster's fingerprints) and the setting to change.
        for (const l of lines) {
          expect(l).toMatchObject({ cluster: 'prod', setting: 'clusterName' });
          expect(String(l.msg)).toContain('set a distinct clusterName (--cluster-name, SDC_CLUSTER_NAME)');
        }
        const fpA = lines[0]?.fingerprints as string[];
        const fpB = lines.at(-1)?.fingerprints as string[];
        expect(fpA).toHaveLength(1);
        expect(fpB).toHaveLength(1);
        expect(fpA).not.toEqual(fpB);
        expect(String(lines[0]?.msg)).toContain(`fingerprints ${fpB[0]}`);
        expect(String(lines.at(-1)?.msg)).toContain(`fingerprints ${fpA[0]}`);

        // Pods due in both clusters meanwhile: none is deleted, and no DELETE reaches either cluster.
        const podsA = createDrivers(a, ns, 4, 'na');
        const podsB = createDrivers(b, ns, 4, 'nb');
        const metrics = await (
          await fetch(`${await httpUrl(fleetA[0] as ReplicaProcess, E2E_BOUNDS.follows)}/metrics`)
        ).text();
        expect(metrics).toContain(
          `sdc_target_refused{cluster="prod",context="${CONTEXT}",namespace="${ns}",reason="cluster-name-conflict"} 1`,
        );
        const row = (await leadersOf(fleetA[0] as ReplicaProcess)).targets[`${CONTEXT}:${ns}`];
        expect(row?.refused).toMatch(/^cluster name prod is used by two clusters/);
        const status = await cli(['status'], {
          KUBECONFIG: a.kubeconfigPath,
          SDC_REDIS_URL: redis.url,
          SDC_ETCD_ENDPOINTS: etcdB.endpoints.join(','),
          SDC_TARGETS: `${CONTEXT}:${ns}`,
          SDC_QUEUE_PREFIX: prefix,
          ...named,
        });
        expect(status.code, status.out).toBe(1);
        expect(status.out).toContain('PROBLEM:       refused: cluster name prod is used by two clusters');
        // Well past the deadlines, by the servers' clocks: still nothing deleted.
        const due = Math.max(a.clock.now(), b.clock.now()) + RETENTION_MS + 5000;
        await waitFor(
          'the pods 5 s past their deadline',
          () => a.clock.now() > due && b.clock.now() > due,
          boundMs(0, RETENTION_MS + 5000),
        );
        const wrong = [...a.requests.deletes(), ...b.requests.deletes()].filter((d) =>
          [...podsA, ...podsB].some((p) => uidOf(p) === d.uid),
        );
        expect(
          wrong.map((d) => d.uid),
          [...fleetA, ...fleetB]
            .flatMap((r) =>
              r.lines
                .filter((l) => l.level !== 'debug' || l.outcome !== undefined)
                .map((l) => `${r.id} ${JSON.stringify(l)}`),
            )
            .join('\n'),
        ).toEqual([]);

        // Fleet B renamed (its stale claim forgotten rather than waited out): both fleets clean again.
        await stopAll(fleetB);
        const probe = new Redis(redis.url);
        conns.push(probe);
        const claimsKey = clusterClaimsKey(prefix, 'prod');
        for (const field of await probe.hkeys(claimsKey))
          if (parseClaimField(field).fingerprints.join(',') === fpB.join(','))
            await probe.hdel(claimsKey, field);
        fleetB = ['b0'].map((id) =>
          start(id, b, { etcd: etcdB }, ns, prefix, { SDC_CLUSTER_NAME: 'prod-b' }),
        );
        // Fleet A's leader sees the claims go at its next refresh, within a claim interval; fleet B starts anew.
        await Promise.all([
          cleanedOnce(
            a,
            ns,
            podsA,
            'cluster A cleaned once the name is its own',
            boundMs(3_700, CLAIM_INTERVAL_MS),
          ),
          cleanedOnce(
            b,
            ns,
            podsB,
            'cluster B cleaned under its new name',
            E2E_BOUNDS.elected + E2E_BOUNDS.cleaned,
          ),
        ]);
        // Each replica of fleet A sees the claims go at its own next refresh: within one claim interval of
        // B's stop (the leader's already came, as cluster A was cleaned), plus the floor for a stalled process.
        await waitFor(
          'fleet A logs the end of the refusal',
          () =>
            fleetA.every((r) =>
              r.lines.some(
                (l) => l.msg === 'cluster name no longer used by another cluster: cleaning its targets again',
              ),
            ),
          boundMs(0, CLAIM_INTERVAL_MS),
        );
      } finally {
        await stopAll([...fleetA, ...fleetB]);
      }
    },
    CASE_TIMEOUT_MS,
  );
});

describe('a cluster whose identity changes between two runs (its CA file replaced)', () => {
  it(
    'jobs queued under the old name are re-created under the new one: each pod deleted once, none early',
    async () => {
      const ns = 'rotated';
      const prefix = 'sr5';
      // The retention outlasts the first fleet, so its jobs are pending when it stops.
      const retention = { SDC_RETENTION: '20s' };
      const first = start('r0', a, { etcd: etcdA }, ns, prefix, retention);
      await firstLeader([first], ns, E2E_BOUNDS.elected);
      const pods = createDrivers(a, ns, 6, 'rot');
      await waitFor(
        'the first run enqueued every pod',
        () => pods.every((p) => first.lines.some((l) => l.uid === uidOf(p) && l.msg === 'enqueue')),
        E2E_BOUNDS.follows,
      );
      const before = String(
        (await first.waitForLine((l) => l.msg === 'replica started', E2E_BOUNDS.follows)).clusters,
      );
      await stopAll([first]);
      // The same server, its kubeconfig now trusting a bundle that also holds an older CA (a rotation's file):
      // the name derived from the oldest certificate is another one.
      const older = await generate([{ name: 'commonName', value: 'older-ca' }], {
        keyType: 'ec',
        curve: 'P-256',
        algorithm: 'sha256',
        notBeforeDate: new Date('2020-01-01T00:00:00Z'),
        notAfterDate: new Date('2040-01-01T00:00:00Z'),
        extensions: [{ name: 'basicConstraints', cA: true, critical: true }],
      });
      const rotated = tempFile(
        'kubeconfig.yaml',
        buildKubeconfig([{ contextName: CONTEXT, url: a.url, caCertPem: `${a.caCertPem}\n${older.cert}` }]),
      );
      const second = start('r0', a, { etcd: etcdA }, ns, prefix, { ...retention, KUBECONFIG: rotated });
      try {
        const started = await second.waitForLine((l) => l.msg === 'replica started', E2E_BOUNDS.elected);
        expect(JSON.stringify(started.clusters)).not.toBe(before);
        // The pods' retention (20 s) runs from their creation; measured ≤ 19.2 s in all.
        await waitGone(a, pods, 'every pod deleted by the second run', boundMs(0, 20_000));
        const uids = pods.map(uidOf);
        expect(deletesPer(a, uids)).toEqual(uids.map(() => 1));
        expect(earlyDeletes(a, ns, 20_000)).toEqual([]);
        // The second run re-created them from its informer: its reconcile added them to the new name's queue.
        // (A pod is gone once its DELETE is answered; the replica's line is read from its stdout after.)
        await waitFor(
          'a deleted line of the second run per pod',
          () => second.lines.filter((l) => l.msg === 'driver pod deleted').length >= pods.length,
          E2E_BOUNDS.follows,
        );
        expect(second.lines.filter((l) => l.msg === 'driver pod deleted').length).toBe(pods.length);
      } finally {
        await stopAll([second]);
      }
    },
    CASE_TIMEOUT_MS,
  );
});
