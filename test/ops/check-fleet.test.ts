/**
 * `check`'s fleet checks against a running replica process, real Redis and etcd: a healthy fleet (one leader,
 * consuming alone), then another deployment's worker on the same queue (same cluster name, Redis and
 * queuePrefix: another cluster) and jobs of a format this release refuses, each found and named.
 */
import { randomUUID } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { queueName } from '../../src/queue/job-identity.ts';
import { firstLeader, replicaEnv, stopAll, useFailureCluster } from '../failure/helpers.ts';
import { serviceEnv } from '../helpers/cluster.ts';
import { dump, runCheck, withId } from './check-cli.ts';

const cluster = useFailureCluster({ context: 'fleet' });
const NS = 'spark-fleet';
const PREFIX = 'flt';
let replica: ReplicaProcess;

const env = () => ({
  ...serviceEnv(cluster().server.kubeconfigPath, cluster().redis, cluster().etcd),
  ...replicaEnv(cluster(), NS, PREFIX),
});

beforeAll(async () => {
  const admin = new Redis(cluster().redis.url);
  await admin.config('SET', 'appendonly', 'yes');
  admin.disconnect();
  replica = cluster().startReplica('f1', env());
  await firstLeader([replica], NS);
}, 90_000);
afterAll(async () => {
  await stopAll([replica]);
});

describe('fleet checks', () => {
  it('one replica leading and consuming alone → fleet ✓, exit 0', async () => {
    const run = await runCheck(['--output', 'json'], env());
    expect(run.status, dump(run)).toBe(0);
    expect(run.checks.filter((c) => c.group === 'fleet').map((c) => [c.id, c.status])).toEqual([
      ['fleet.leader', 'pass'],
      ['fleet.members', 'pass'],
      ['fleet.job-format', 'pass'],
      ['fleet.foreign-jobs', 'pass'],
    ]);
  });

  it('another deployment’s worker on the same queue, and jobs this release cannot read → both ✗ with their fix, exit 1', async () => {
    const connection = new Redis(cluster().redis.url, { maxRetriesPerRequest: null });
    const name = queueName({ cluster: cluster().clusterName, namespace: NS });
    // Another deployment's replica: the same cluster name, Redis and queuePrefix, its own etcd.
    const stranger = new Worker(name, async () => undefined, {
      connection,
      prefix: PREFIX,
      name: 'other-cluster-7',
    });
    const queue = new Queue(name, { connection, prefix: PREFIX });
    try {
      // Jobs written by a release whose format renamed the deadline (refused here), and a readable newer one.
      await queue.add(
        'kyuubi-x-driver',
        { v: 2, dueAt: Date.now() + 3_600_000 },
        { jobId: randomUUID(), delay: 3_600_000 },
      );
      await queue.add(
        'kyuubi-y-driver',
        { v: 2, deadlineMs: Date.now() + 3_600_000 },
        { jobId: randomUUID(), delay: 3_600_000 },
      );
      await stranger.waitUntilReady();
      const run = await runCheck(['--output', 'json'], env());
      expect(run.status, dump(run)).toBe(1);
      expect(withId(run, 'fleet.foreign-consumer')).toEqual([
        expect.objectContaining({
          status: 'fail',
          message: `fleet:${NS}: other-cluster-7 consumes its queue but is not a member of this fleet: another deployment (the same cluster name, Redis and queuePrefix, another etcd or ZooKeeper) uses the same queue`,
          fix: expect.stringContaining('give each deployment its own queuePrefix'),
        }),
      ]);
      const format = withId(run, 'fleet.job-format')[0];
      expect(format).toMatchObject({ status: 'fail', details: { formats: { '2': 2 } } });
      expect(format?.message).toMatch(
        /^job format: 1 of 2 sampled jobs cannot be read by this release \(job .* has no finite deadline/,
      );
    } finally {
      await stranger.close();
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      connection.disconnect();
    }
  });
});
