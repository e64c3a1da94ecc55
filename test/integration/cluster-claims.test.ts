/**
 * Claims on a cluster name in a real Redis (src/cleaner/cluster-claims.ts), with a short refresh period: two
 * clusters under one name refuse it on both sides and resume once one stops claiming; so do replicas of one
 * cluster that elect through two leadership backends; a CA rotation's claims
 * (old, bundle, new) refuse nothing; a live member's claim in the membership refuses too; nothing is decided
 * before Redis answered once.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalService, startRedis } from '../../harness/sandbox/local-services.ts';
import { claimField } from '../../src/cleaner/claim-conflict.ts';
import {
  type ClusterClaims,
  createClusterClaims,
  type MemberClaims,
} from '../../src/cleaner/cluster-claims.ts';
import type { ClusterIdentity } from '../../src/kube/cluster-identity.ts';
import { clusterClaimsKey } from '../../src/queue/job-identity.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let redis: LocalService;
const conns: Redis[] = [];
const running: ClusterClaims[] = [];
beforeAll(async () => {
  redis = await startRedis();
}, 60_000);
afterAll(async () => {
  for (const c of running) c.stop();
  for (const c of conns) c.disconnect();
  await redis?.stop();
});

const INTERVAL_MS = 200;
/** The leadership backend the test's replicas claim with, unless a case says otherwise. */
const LEADERSHIP = 'etcd spark-driver-cleaner/';
/** The namespaces the test's replicas serve, unless a case says otherwise. */
const NAMESPACES = ['spark'];
const id = (name: string, ...fingerprints: string[]): ClusterIdentity => ({
  name,
  source: 'clusterName',
  fingerprints,
});

function claims(
  prefix: string,
  cluster: ClusterIdentity,
  opts: { members?: () => MemberClaims[]; url?: string; leadership?: string; namespaces?: string[] } = {},
) {
  const conn = new Redis(opts.url ?? redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  conn.on('error', () => undefined);
  conns.push(conn);
  const mem = memoryLogger('info');
  const c = createClusterClaims({
    redis: conn,
    prefix,
    clusters: [cluster],
    members: opts.members,
    leadership: opts.leadership ?? LEADERSHIP,
    namespaces: () => opts.namespaces ?? NAMESPACES,
    log: mem.log,
    intervalMs: INTERVAL_MS,
  });
  running.push(c);
  c.start();
  return { c, lines: mem.lines };
}

describe('cluster name claims (real Redis)', () => {
  it('two clusters under one name: both refuse it, with both fingerprints; one stops → the other resumes', async () => {
    const a = claims('cc1', id('prod', 'ca:aaaaaaaaaaaa'));
    await waitFor('a looked', () => a.c.refusal('prod') !== 'unchecked');
    expect(a.c.refusal('prod')).toBeUndefined();
    const b = claims('cc1', id('prod', 'ca:bbbbbbbbbbbb'));
    await waitFor('b refuses', () => typeof b.c.refusal('prod') === 'object');
    await waitFor('a refuses at its next look', () => typeof a.c.refusal('prod') === 'object');
    const refusal = a.c.refusal('prod');
    expect(typeof refusal === 'object' && refusal.others.map((o) => o.fingerprints)).toEqual([
      ['ca:bbbbbbbbbbbb'],
    ]);
    expect(a.lines.filter((l) => l.level === 'error')).toHaveLength(1);
    expect(a.lines.find((l) => l.level === 'error')).toMatchObject({
      cluster: 'prod',
      fingerprints: ['ca:aaaaaaaaaaaa'],
      otherFingerprints: ['ca:bbbbbbbbbbbb'],
      setting: 'clusterName',
    });
    const changes: number[] = [];
    a.c.onChange(() => changes.push(1));
    b.c.stop();
    // No longer live three periods after its last claim.
    await waitFor('a resumes', () => a.c.refusal('prod') === undefined, 10_000);
    expect(changes.length).toBeGreaterThan(0);
    expect(a.lines.at(-1)?.msg).toBe(
      'cluster name no longer used by another cluster: cleaning its targets again',
    );
  });

  it('replicas of one cluster electing through two backends for one namespace: both refuse it; the other stops → cleaning resumes', async () => {
    const cluster = id('shared', 'ca:cccccccccccc');
    const onEtcd = claims('cc-backend', cluster, {
      leadership: 'etcd spark-driver-cleaner/',
      namespaces: ['spark', 'etl'],
    });
    await waitFor('the etcd replica looked', () => onEtcd.c.refusal('shared') !== 'unchecked');
    expect(onEtcd.c.backendConflict('shared', 'spark')).toBeUndefined();
    // Same cluster, same name, one namespace in common: a rollback whose replicas elect through ZooKeeper.
    const onZk = claims('cc-backend', cluster, {
      leadership: 'zookeeper /spark-driver-cleaner',
      namespaces: ['spark', 'ml'],
    });
    await waitFor(
      'the ZooKeeper replica refuses spark',
      () => onZk.c.backendConflict('shared', 'spark') !== undefined,
    );
    await waitFor(
      'the etcd replica refuses spark at its next look',
      () => onEtcd.c.backendConflict('shared', 'spark') !== undefined,
    );
    // Only the namespace both serve: each cleans its own.
    expect(onEtcd.c.backendConflict('shared', 'etl')).toBeUndefined();
    expect(onZk.c.backendConflict('shared', 'ml')).toBeUndefined();
    // Not a name conflict: one cluster.
    expect(onEtcd.c.refusal('shared')).toBeUndefined();
    expect(onEtcd.c.backendConflict('shared', 'spark')).toContain('through zookeeper /spark-driver-cleaner');
    expect(onEtcd.lines.filter((l) => l.level === 'error')).toEqual([
      expect.objectContaining({
        cluster: 'shared',
        namespaces: ['spark'],
        leadership: 'etcd spark-driver-cleaner/',
        otherLeadership: ['zookeeper /spark-driver-cleaner'],
      }),
    ]);
    // A replica of the same backend refuses the shared namespace too.
    const sameBackend = claims('cc-backend', cluster, {
      leadership: 'etcd spark-driver-cleaner/',
      namespaces: ['spark', 'etl'],
    });
    await waitFor('the second etcd replica looked', () => sameBackend.c.refusal('shared') !== 'unchecked');
    expect(sameBackend.c.backendConflict('shared', 'spark')).toContain('through zookeeper');
    onZk.c.stop();
    await waitFor(
      'the etcd replicas resume',
      () => [onEtcd, sameBackend].every((r) => r.c.backendConflict('shared', 'spark') === undefined),
      10_000,
    );
    expect(onEtcd.lines.at(-1)?.msg).toBe(
      'no replica that serves these namespaces elects through another backend any more: cleaning them again',
    );
  });

  it('fleets of one cluster electing through two backends for different namespaces refuse nothing', async () => {
    const cluster = id('split', 'ca:dddddddddddd');
    const onEtcd = claims('cc-split', cluster, {
      leadership: 'etcd spark-driver-cleaner/',
      namespaces: ['a'],
    });
    const onZk = claims('cc-split', cluster, {
      leadership: 'zookeeper /spark-driver-cleaner',
      namespaces: ['b'],
    });
    // Each has read the other's claim: two looks after both have claimed.
    const probe = new Redis(redis.url);
    conns.push(probe);
    await waitFor(
      'both claimed',
      async () => Object.keys(await probe.hgetall(clusterClaimsKey('cc-split', 'split'))).length === 2,
    );
    const changes: string[] = [];
    onEtcd.c.onChange(() => changes.push('etcd'));
    onZk.c.onChange(() => changes.push('zk'));
    const since = Date.now();
    await waitFor('two more looks each', () => Date.now() - since > 3 * INTERVAL_MS);
    expect([onEtcd.c.backendConflict('split', 'a'), onZk.c.backendConflict('split', 'b')]).toEqual([
      undefined,
      undefined,
    ]);
    expect([...onEtcd.lines, ...onZk.lines].filter((l) => l.level === 'error')).toEqual([]);
  });

  it('a CA rotation (old CA, then the bundle, then the new CA alone) refuses nothing', async () => {
    const old = claims('cc2', id('rot', 'ca:000000000001'));
    await waitFor('old looked', () => old.c.refusal('rot') !== 'unchecked');
    const bundle = claims('cc2', id('rot', 'ca:000000000001', 'ca:000000000002'));
    await waitFor('bundle looked', () => bundle.c.refusal('rot') !== 'unchecked');
    bundle.c.stop();
    const fresh = claims('cc2', id('rot', 'ca:000000000002'));
    await waitFor('new looked', () => fresh.c.refusal('rot') !== 'unchecked');
    // Once the bundle's claim is no longer live (three periods unseen), it still links the two: both look again
    // after that and refuse nothing.
    const probe = new Redis(redis.url);
    conns.push(probe);
    const key = clusterClaimsKey('cc2', 'rot');
    const redisNow = async () => {
      const [s, us] = await probe.time();
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    const field = (...fps: string[]) => claimField(fps, LEADERSHIP, NAMESPACES);
    const bundleSeen = Number(await probe.hget(key, field('ca:000000000001', 'ca:000000000002')));
    await waitFor(
      'the bundle claim no longer live',
      async () => (await redisNow()) - bundleSeen > 4 * INTERVAL_MS,
    );
    const since = await redisNow();
    await waitFor('both looked again since', async () => {
      const all = await probe.hgetall(key);
      return [field('ca:000000000001'), field('ca:000000000002')].every((f) => Number(all[f]) > since);
    });
    expect([old.c.refusal('rot'), fresh.c.refusal('rot')]).toEqual([undefined, undefined]);
    expect(Object.keys(await probe.hgetall(clusterClaimsKey('cc2', 'rot'))).sort()).toEqual([
      ...[
        field('ca:000000000001'),
        field('ca:000000000001', 'ca:000000000002'),
        field('ca:000000000002'),
      ].sort(),
    ]);
    expect(await probe.pttl(clusterClaimsKey('cc2', 'rot'))).toBeGreaterThan(6 * 24 * 3600 * 1000);
  });

  it('a live member of the scope claiming the name for another cluster refuses it, without its Redis claim', async () => {
    let members: MemberClaims[] = [];
    const a = claims('cc3', id('m', 'ca:aaaaaaaaaaaa'), { members: () => members });
    await waitFor('a looked', () => a.c.refusal('m') !== 'unchecked');
    expect(a.c.refusal('m')).toBeUndefined();
    members = [{ replica: 'other-0', clusters: { m: ['ca:cccccccccccc'], unrelated: ['ca:dddddddddddd'] } }];
    a.c.membersChanged();
    const r = a.c.refusal('m');
    expect(typeof r === 'object' && r.message).toContain('replica other-0 (alive in etcd or ZooKeeper)');
    members = [];
    a.c.membersChanged();
    expect(a.c.refusal('m')).toBeUndefined();
  });

  it('Redis does not answer: the name stays unchecked (its targets wait), nothing is refused', async () => {
    const gone = claims('cc4', id('x', 'ca:aaaaaaaaaaaa'), { url: 'redis://127.0.0.1:1' });
    await waitFor('a failed look', () =>
      gone.lines.some((l) => l.msg === 'cannot refresh the cluster name claims in Redis; retrying'),
    );
    expect(gone.c.refusal('x')).toBe('unchecked');
  });
});
