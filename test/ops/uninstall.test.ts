/**
 * docs/deployment.md, "Uninstalling", step 4: the three commands that remove the cleaner's data from the operator's
 * own backends, run as written (bash, the real redis-cli, etcdctl and ZooKeeper's zkCli.sh) against real servers
 * after replicas used them — one on etcd, one on ZooKeeper, each killed so that its keys and nodes outlive it — and
 * beside other users' data. They must remove every `sdc:*` key, the etcd prefix and the ZooKeeper root, and nothing
 * else.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalZooKeeper, startZooKeeper } from '../../harness/sandbox/local-zookeeper.ts';
import {
  createTerminatedDrivers,
  deletesPer,
  startTestCluster,
  type TestCluster,
} from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

/** The commands as docs/deployment.md shows them. */
const REDIS_CLEANUP =
  'redis-cli -u "$REDIS_URL" --scan --pattern \'sdc:*\' | xargs -r -d \'\\n\' redis-cli -u "$REDIS_URL" unlink';
const ETCD_CLEANUP = 'etcdctl del --prefix spark-driver-cleaner/';
const ZOOKEEPER_CLEANUP = 'zkCli.sh -server "$ZOOKEEPER" deleteall /spark-driver-cleaner';
/** Where Debian's zookeeper package puts zkCli.sh (ZooKeeper's own distribution: bin/). */
const ZOOKEEPER_BIN = '/usr/share/zookeeper/bin';

let cluster: TestCluster;
let zk: LocalZooKeeper;
let admin: Redis;
let etcd: Etcd3;
let env: NodeJS.ProcessEnv;

function sh(command: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) =>
    execFile('bash', ['-c', command], { env, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, out: stdout + stderr }),
    ),
  );
}
/** The children of a ZooKeeper path, through zkCli.sh (`[a, b]` on its last line). */
async function zkChildren(path: string): Promise<string[] | undefined> {
  const r = await sh(`zkCli.sh -server "$ZOOKEEPER" ls ${path}`);
  const listing = r.out
    .split('\n')
    .map((l) => /^\[(.*)\]$/.exec(l.trim())?.[1])
    .findLast((l) => l !== undefined);
  if (listing === undefined && !r.out.includes('NoNode')) throw new Error(`zkCli.sh ls ${path}: ${r.out}`);
  return listing
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

beforeAll(async () => {
  [cluster, zk] = await Promise.all([startTestCluster(['alpha']), startZooKeeper()]);
  admin = new Redis(cluster.redis.url);
  etcd = new Etcd3({ hosts: cluster.etcd.endpoints });
  env = {
    ...process.env,
    PATH: `${ZOOKEEPER_BIN}:${process.env.PATH}`,
    REDIS_URL: cluster.redis.url,
    ETCDCTL_ENDPOINTS: cluster.etcd.endpoints.join(','),
    ZOOKEEPER: zk.connect,
  };
}, 120_000);

afterAll(async () => {
  admin?.disconnect();
  etcd?.close();
  await Promise.all([cluster?.stop(), zk?.stop()]);
});

describe('uninstalling: the cleaner’s data in Redis, etcd and ZooKeeper', () => {
  it('zkCli.sh is where the test looks for it', () => {
    expect(existsSync(`${ZOOKEEPER_BIN}/zkCli.sh`)).toBe(true);
  });

  it('is removed by the documented commands, and nothing else is', async () => {
    const server = cluster.servers.alpha as NonNullable<TestCluster['servers'][string]>;
    // A replica on etcd cleans three drivers (Redis: jobs, tombstones; etcd: its lease's keys), one on ZooKeeper
    // leads its target (the nodes under /spark-driver-cleaner); both are killed, so nothing is resigned.
    const onEtcd = cluster.startReplica('uninstall-etcd', {
      SDC_TARGETS: 'alpha:uninstall',
      SDC_RETENTION: '1s',
      SDC_ELECTION_TTL_SECONDS: '60',
    });
    const onZk = cluster.startReplica('uninstall-zk', {
      SDC_TARGETS: 'alpha:uninstall-zk',
      SDC_ETCD_ENDPOINTS: '',
      SDC_ZOOKEEPER: zk.connect,
    });
    const elected = (ns: string) => (l: { msg?: string; namespace?: string }) =>
      l.msg === 'elected leader' && l.namespace === ns;
    await Promise.all([
      onEtcd.waitForLine(elected('uninstall'), 60_000),
      onZk.waitForLine(elected('uninstall-zk'), 60_000),
    ]);
    const pods = createTerminatedDrivers(server, 'uninstall', 3, 'gone');
    const uids = pods.map((p) => p.metadata?.uid ?? '');
    await waitFor('the drivers deleted', () => deletesPer(server, uids).every((n) => n === 1), 60_000);
    for (const r of [onEtcd, onZk]) r.kill('SIGKILL');
    await Promise.all([onEtcd.exited, onZk.exited]);

    // What they left, and other users' data beside it.
    expect((await admin.keys('sdc:*')).length).toBeGreaterThan(3);
    expect(Object.keys(await etcd.getAll().prefix('spark-driver-cleaner/').strings()).length).toBeGreaterThan(
      0,
    );
    expect(await zkChildren('/spark-driver-cleaner')).toEqual(expect.arrayContaining(['clusters']));
    await admin.set('other:key', '1');
    await admin.set('sdcx:key', '1');
    await etcd.put('other/key').value('1');
    expect((await sh('zkCli.sh -server "$ZOOKEEPER" create /kyuubi x')).code).toBe(0);

    for (const command of [REDIS_CLEANUP, ETCD_CLEANUP, ZOOKEEPER_CLEANUP]) {
      const r = await sh(command);
      expect(r.code, `${command}\n${r.out}`).toBe(0);
    }

    expect(await admin.keys('sdc:*')).toEqual([]);
    expect((await admin.keys('*')).sort()).toEqual(['other:key', 'sdcx:key']);
    expect(await etcd.getAll().prefix('spark-driver-cleaner/').keys()).toEqual([]);
    expect(await etcd.get('other/key').string()).toBe('1');
    const root = await zkChildren('/');
    expect(root).toContain('kyuubi');
    expect(root).not.toContain('spark-driver-cleaner');
  }, 240_000);
});
