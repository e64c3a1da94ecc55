/**
 * `check` against Redis in its other two shapes, real servers both: Sentinel (each Sentinel asked for the master,
 * one of them down) and Cluster (its state and slots, the settings of every master, the ACL probe routed to the
 * queue's slot). With persistence off on one Cluster master, the line names that master.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { type LocalRedisCluster, startRedisCluster } from '../../harness/sandbox/redis-cluster.ts';
import { type LocalRedisSentinel, startRedisSentinel } from '../../harness/sandbox/redis-sentinel.ts';
import { dump, runCheck, withId } from './check-cli.ts';

let server: SandboxApiServer;
let sentinel: LocalRedisSentinel;
let cluster: LocalRedisCluster;

/** Sets AOF on or off on the redis-server on `port`. */
async function appendonly(port: number, value: 'yes' | 'no'): Promise<void> {
  const r = new Redis({ port, host: '127.0.0.1' });
  try {
    await r.config('SET', 'appendonly', value);
  } finally {
    r.disconnect();
  }
}

beforeAll(async () => {
  [server, sentinel, cluster] = await Promise.all([
    startSandboxApiServer({ contextName: 'modes' }),
    startRedisSentinel({ replicas: 1, sentinels: 3 }),
    startRedisCluster({ masters: 3, replicas: 0 }),
  ]);
  await Promise.all([
    ...sentinel.nodes.map((n) => appendonly(n.port, 'yes')),
    ...cluster.servers.map((s) => appendonly(s.port, 'yes')),
  ]);
}, 90_000);
afterAll(async () => {
  await Promise.all([server?.close(), sentinel?.stop(), cluster?.stop()]);
});

/** Local leadership: these cases are about Redis. */
const env = (redis: Record<string, string>) => ({
  KUBECONFIG: server.kubeconfigPath,
  SDC_TARGETS: 'modes:spark-a',
  ...redis,
});
const hostPorts = (list: readonly { host: string; port: number }[]) =>
  list.map((n) => `${n.host}:${n.port}`).join(',');

describe('Redis Sentinel', () => {
  it('reachable through the Sentinels, each asked for the master; the settings of the master ✓; exit 0', async () => {
    const run = await runCheck(
      ['--output', 'json'],
      env({
        SDC_REDIS_MODE: 'sentinel',
        SDC_REDIS_SENTINELS: hostPorts(sentinel.sentinels),
        SDC_REDIS_MASTER_NAME: sentinel.masterName,
      }),
    );
    expect(run.status, dump(run)).toBe(0);
    expect(withId(run, 'redis.sentinel')[0]?.message).toBe(
      `Sentinel: 3 of 3 Sentinels name the master 127.0.0.1:${sentinel.masterPort()}`,
    );
    for (const id of [
      'redis.reachable',
      'redis.eviction-policy',
      'redis.persistence',
      'redis.memory',
      'redis.acl',
    ])
      expect(
        withId(run, id).map((c) => c.status),
        id,
      ).toEqual(['pass']);
  });

  it('a Sentinel address that does not answer → ‼ how many answer (a failover needs a majority)', async () => {
    const run = await runCheck(
      ['--output', 'json'],
      env({
        SDC_REDIS_MODE: 'sentinel',
        SDC_REDIS_SENTINELS: `${hostPorts(sentinel.sentinels.slice(0, 1))},127.0.0.1:1,127.0.0.1:2`,
        SDC_REDIS_MASTER_NAME: sentinel.masterName,
      }),
    );
    expect(withId(run, 'redis.sentinel')[0]).toMatchObject({
      status: 'warn',
      message: 'Sentinel: only 1 of 3 Sentinels answer: a failover needs a majority',
    });
  });
});

describe('Redis Cluster', () => {
  it('state ok with every slot, each master’s settings, the ACL probe on the queue’s slot ✓; exit 0', async () => {
    const run = await runCheck(
      ['--output', 'json'],
      env({ SDC_REDIS_MODE: 'cluster', SDC_REDIS_CLUSTER_NODES: hostPorts(cluster.nodes) }),
    );
    expect(run.status, dump(run)).toBe(0);
    expect(withId(run, 'redis.cluster')[0]?.message).toBe(
      'Cluster: state ok, 16384 of 16384 slots served, 3 masters',
    );
    expect(withId(run, 'redis.eviction-policy').map((c) => c.status)).toEqual(['pass', 'pass', 'pass']);
    expect(withId(run, 'redis.acl')[0]?.status).toBe('pass');
  });

  it('persistence off on one master → ✗ naming that master, exit 1', async () => {
    const port = cluster.servers[1]?.port as number;
    await appendonly(port, 'no');
    try {
      const run = await runCheck(
        ['--output', 'json'],
        env({ SDC_REDIS_MODE: 'cluster', SDC_REDIS_CLUSTER_NODES: hostPorts(cluster.nodes) }),
      );
      expect(run.status, dump(run)).toBe(1);
      expect(run.checks.filter((c) => c.status === 'fail')).toEqual([
        expect.objectContaining({
          id: 'redis.persistence',
          message: `persistence: off (appendonly no, save "") (127.0.0.1:${port}): a restart loses every pending cleanup and tombstone`,
        }),
      ]);
    } finally {
      await appendonly(port, 'yes');
    }
  });
});
