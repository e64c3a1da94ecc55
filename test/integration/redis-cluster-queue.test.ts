/**
 * The cleanup queue's core behaviour against a real 3-master Redis Cluster (Debian's redis-server, created by
 * `redis-cli --cluster create`), through ioredis `Cluster` connections: the cases of cleanup-queue.test.ts
 * that make the guarantees — one job per UID whatever the number of replicas, delayed jobs promoted and
 * consumed by the worker no earlier than their deadline, tombstones that stop every replica's enqueue, a
 * cancel racing with adds — and that every key of a target (queue, jobs, tombstones) hashes to one slot, as
 * the queue name's hash tag intends (src/queue/job-identity.ts).
 *
 * The product itself cannot use a cluster yet: the configuration has only `redisUrl` and src/replica.ts
 * builds `new Redis(url)`. These tests hand the queue and worker modules a `Cluster` where their types say
 * `Redis` (the cast below); bench/README.md says what a cluster option would take.
 */
import { Cluster, type Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedisCluster, startRedisCluster } from '../../harness/sandbox/redis-cluster.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import { createCleanupQueue } from '../../src/queue/cleanup-queue.ts';
import { queueName } from '../../src/queue/job-identity.ts';
import { createQueueConsumer } from '../../src/queue/queue-consumer.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let cluster: LocalRedisCluster;
const conns: Cluster[] = [];
beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 });
}, 90_000);
afterAll(async () => {
  for (const c of conns) c.disconnect();
  await cluster?.stop();
});

const target = { cluster: 'eks-a', context: 'arn:aws:eks:x:1:cluster/a', namespace: 'spark' };

/** A new cluster connection (BullMQ: commands wait for the connection instead of failing). */
function connect(): Cluster {
  const c = new Cluster([...cluster.nodes], { redisOptions: { maxRetriesPerRequest: null } });
  conns.push(c);
  return c;
}

/** The queue and worker modules type their connection as `Redis`; a `Cluster` is what is tested here. */
const asRedis = (c: Cluster) => c as unknown as Redis;

function replicaQueue(prefix: string, tombstoneTtlMs = 60_000) {
  return createCleanupQueue({
    target,
    connection: asRedis(connect()),
    prefix,
    tombstoneTtlMs,
    log: memoryLogger().log,
    now: Date.now,
  });
}

const data = (uid: string, deadlineMs = Date.now() + 60_000): CleanupJobData => ({
  context: target.context,
  namespace: target.namespace,
  pod: `p-${uid.slice(0, 4)}`,
  uid,
  deadlineMs,
  finishedAtMs: Date.now(),
  enqueuedBy: 'r',
});

/** Every key under `prefix:` on every master, with the node that holds it. */
async function keysOnMasters(prefix: string): Promise<{ key: string; node: string }[]> {
  const c = connect();
  await waitFor('cluster connection ready', () => c.status === 'ready');
  const out: { key: string; node: string }[] = [];
  for (const node of c.nodes('master')) {
    for (const key of await node.keys(`${prefix}:*`))
      out.push({ key, node: `${node.options.host}:${node.options.port}` });
  }
  return out;
}

describe('cleanup queue on a 3-master Redis Cluster', () => {
  it('the cluster has 3 masters sharing the 16,384 slots', async () => {
    const c = connect();
    await waitFor('cluster connection ready', () => c.status === 'ready');
    expect(c.nodes('master')).toHaveLength(3);
    const slots = (await c.cluster('SLOTS')) as [number, number, ...unknown[]][];
    expect(slots.reduce((n, [from, to]) => n + to - from + 1, 0)).toBe(16_384);
  });

  it('N replicas adding the same pod → exactly one delayed job', async () => {
    const replicas = [replicaQueue('k1'), replicaQueue('k1'), replicaQueue('k1')];
    const uid = '0b1c1a52-2c4e-4c55-9a0e-000000000001';
    await Promise.all(replicas.flatMap((q) => [q.enqueue(data(uid)), q.enqueue(data(uid))]));
    expect(await replicas[0]?.bullQueue.getDelayedCount()).toBe(1);
    expect(await replicas[1]?.enqueue(data(uid))).toBe('exists');
  });

  it('a delayed job is promoted at its deadline and consumed by the worker (not before)', async () => {
    const q = replicaQueue('k2');
    const uid = '0b1c1a52-2c4e-4c55-9a0e-000000000002';
    const deadlineMs = Date.now() + 1500;
    expect(await q.enqueue(data(uid, deadlineMs))).toBe('added');
    expect(await q.bullQueue.getJobState(uid)).toBe('delayed');
    const processedAt: number[] = [];
    const worker = createQueueConsumer({
      handler: cleanupDriverPod,
      target,
      connection: asRedis(connect()),
      prefix: 'k2',
      concurrency: 2,
      replicaId: 'replica-a',
      keepFinishedMs: q.keepFinishedMs,
      log: memoryLogger().log,
      deps: {
        // The pod is gone (not in the cache, and the live GET finds none): already-absent.
        pods: { get: async () => undefined } as unknown as PodApi,
        cached: () => undefined,
        recheck: 'cache',
        fence: async () => {},
        stillLeader: () => true,
        selector: parseLabelSelector('spark-role=driver'),
        policy: 'ALL',
        retentionMs: 0,
        dryRun: false,
        now: Date.now,
      },
      telemetry: {
        process: async (_d, run) => {
          processedAt.push(Date.now());
          return run();
        },
      },
    });
    try {
      await worker.run();
      // BullMQ's getWorkers reads CLIENT LIST on every master of a cluster.
      expect(await waitFor('worker listed', async () => (await q.workerNames()).includes('replica-a'))).toBe(
        true,
      );
      await waitFor('job completed', async () => (await q.bullQueue.getJobState(uid)) === 'completed');
      expect(processedAt).toHaveLength(1);
      expect(processedAt[0]).toBeGreaterThanOrEqual(deadlineMs);
      expect((await q.bullQueue.getJob(uid))?.returnvalue).toEqual({ outcome: 'already-absent' });
    } finally {
      await worker.stop('test done');
    }
  });

  it('cancel tombstones the UID for every replica; a cancel racing with adds leaves no pending job', async () => {
    const [a, b] = [replicaQueue('k3'), replicaQueue('k3')];
    const uid = '0b1c1a52-2c4e-4c55-9a0e-000000000003';
    expect(await a?.enqueue(data(uid))).toBe('added');
    expect(await b?.cancel(uid)).toBe('removed');
    expect(await a?.bullQueue.getJob(uid)).toBeUndefined();
    expect(await a?.enqueue(data(uid))).toBe('tombstoned');
    expect(await b?.enqueue(data(uid))).toBe('tombstoned');
    expect(await a?.isTombstoned(uid)).toBe(true);

    const qs = [a, b, replicaQueue('k3')];
    for (let i = 0; i < 20; i++) {
      const racing = `0b1c1a52-2c4e-4c55-9a0e-1000000000${String(i).padStart(2, '0')}`;
      await Promise.all([qs[0]?.enqueue(data(racing)), qs[1]?.cancel(racing), qs[2]?.enqueue(data(racing))]);
    }
    expect(await a?.bullQueue.getDelayedCount()).toBe(0);
  });

  it('every key a target uses (queue, jobs, tombstones, finished jobs) hashes to one slot, on one master', async () => {
    const c = connect();
    for (const prefix of ['k1', 'k2', 'k3']) {
      const keys = await keysOnMasters(prefix);
      expect(keys.length, prefix).toBeGreaterThan(2);
      const slots = new Set(await Promise.all(keys.map(({ key }) => c.cluster('KEYSLOT', key))));
      expect([...slots], prefix).toHaveLength(1);
      expect(new Set(keys.map((k) => k.node)).size, prefix).toBe(1);
      for (const { key } of keys) expect(key.startsWith(`${prefix}:${queueName(target)}:`), key).toBe(true);
    }
    // Tombstones were written (k3) and found in the same slot as that queue's jobs.
    expect((await keysOnMasters('k3')).some(({ key }) => key.includes(':tombstone:'))).toBe(true);
  });
});
