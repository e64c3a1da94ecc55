/**
 * `check` against real backends, each broken the way operators break them: Redis with an eviction policy,
 * Redis ACL users without EVAL or without the queue keys, etcd with auth whose role lacks the key prefix (or may
 * only read it), ZooKeeper with a root under /kyuubi (refused as configuration) or inside a Kyuubi namespace
 * found in ZooKeeper itself. Each: the right ✗ line and exit code, and the same checks ✓ once fixed.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import {
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../../harness/sandbox/local-services.ts';
import { createEtcdClient } from '../../src/leadership/etcd/client.ts';
import {
  createNode,
  createZkHandle,
  OPEN_ACL_UNSAFE,
  ZK_MODE,
  type ZkHandle,
} from '../../src/leadership/zookeeper/client.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';
import { dump, runCheck, withId } from './check-cli.ts';

const zk = useZooKeeper();
let server: SandboxApiServer;
let redis: LocalService;
let etcd: LocalEtcd;
let admin: Redis;

beforeAll(async () => {
  [server, redis, etcd] = await Promise.all([
    startSandboxApiServer({ contextName: 'be' }),
    startRedis(),
    startEtcd(),
  ]);
  admin = new Redis(redis.url);
  await admin.config('SET', 'appendonly', 'yes');
  // Redis users as an operator would make them for BullMQ, one missing EVAL, one on another key prefix.
  await admin.call(
    'ACL',
    'SETUSER',
    'sdc-good',
    'on',
    '>pw',
    '~sdc:*',
    '+@all',
    '-@dangerous',
    '+info',
    '+client|setname',
    '+client|list',
  );
  await admin.call(
    'ACL',
    'SETUSER',
    'sdc-noeval',
    'on',
    '>pw',
    '~sdc:*',
    '+@all',
    '-@dangerous',
    '+info',
    '+client|setname',
    '+client|list',
    '-eval',
  );
  await admin.call(
    'ACL',
    'SETUSER',
    'sdc-otherkeys',
    'on',
    '>pw',
    '~other:*',
    '+@all',
    '-@dangerous',
    '+info',
    '+client|setname',
    '+client|list',
  );
  // etcd with auth: root, and three users whose roles cover the prefix, another prefix, or read only.
  const root = createEtcdClient(etcd.endpoints);
  try {
    await root.user('root').create('root-pw');
    await root.user('root').addRole('root');
    for (const [user, prefix, permission] of [
      ['cleaner-good', 'spark-driver-cleaner/', 'Readwrite'],
      ['cleaner-other', 'other-team/', 'Readwrite'],
      ['cleaner-reader', 'spark-driver-cleaner/', 'Read'],
    ] as const) {
      await root.role(user).create();
      await root.role(user).grant({ permission, range: root.range({ prefix }) });
      await root.user(user).create(`${user}-pw`);
      await root.user(user).addRole(user);
    }
    await root.auth.authEnable();
  } finally {
    root.close();
  }
}, 60_000);

afterAll(async () => {
  admin?.disconnect();
  await Promise.all([server?.close(), redis?.stop(), etcd?.stop()]);
});

/** The replicas' configuration: one target, Redis as `redisUrl`, and the leadership settings given. */
const env = (extra: Record<string, string>) => ({
  KUBECONFIG: server.kubeconfigPath,
  SDC_TARGETS: 'be:spark-a',
  SDC_REDIS_URL: redis.url,
  SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
  SDC_ETCD_USERNAME: 'cleaner-good',
  SDC_ETCD_PASSWORD: 'cleaner-good-pw',
  ...extra,
});
const userUrl = (user: string) => redis.url.replace('redis://', `redis://${user}:pw@`);
const failures = (run: Awaited<ReturnType<typeof runCheck>>) =>
  run.checks.filter((c) => c.status === 'fail' || c.status === 'unreachable');

describe('Redis', () => {
  it('maxmemory-policy allkeys-lru → ✗ naming the policy and the fix, exit 1; noeviction → ✓', async () => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const run = await runCheck(['--output', 'json'], env({}));
      expect(run.status, dump(run)).toBe(1);
      expect(failures(run)).toEqual([
        expect.objectContaining({
          id: 'redis.eviction-policy',
          message: 'maxmemory-policy: allkeys-lru: Redis may evict pending cleanup jobs and tombstones',
          fix: expect.stringContaining('CONFIG SET maxmemory-policy noeviction'),
        }),
      ]);
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    }
    const fixed = await runCheck(['--output', 'json'], env({ SDC_REDIS_URL: userUrl('sdc-good') }));
    expect(fixed.status, dump(fixed)).toBe(0);
    expect(withId(fixed, 'redis.eviction-policy')[0]?.status).toBe('pass');
    expect(withId(fixed, 'redis.acl')[0]?.message).toMatch(
      /^ACL: the user may run the \d+ commands the cleaner sends on sdc:\* keys$/,
    );
  });

  it('an ACL user without EVAL → ✗ naming EVAL and Redis’s refusal, exit 1', async () => {
    const run = await runCheck(['--output', 'json'], env({ SDC_REDIS_URL: userUrl('sdc-noeval') }));
    expect(run.status, dump(run)).toBe(1);
    expect(failures(run).map((c) => c.id)).toEqual(['redis.acl']);
    const acl = withId(run, 'redis.acl')[0];
    expect(acl?.message).toMatch(/^ACL: the user may not run EVAL \(NOPERM .*'eval'.*\)$/);
    expect(acl?.details?.refused).toEqual([{ command: 'eval', error: expect.stringMatching(/^NOPERM /) }]);
    const text = await runCheck([], env({ SDC_REDIS_URL: userUrl('sdc-noeval') }));
    expect(text.stdout).toMatch(/\n {2}✗ ACL: the user may not run EVAL /);
  });

  it('an ACL user without INFO (which BullMQ sends at connect) → ✗ naming INFO, the settings it hides ‼', async () => {
    await admin.call(
      'ACL',
      'SETUSER',
      'sdc-noinfo',
      'on',
      '>pw',
      '~sdc:*',
      '+@all',
      '-@dangerous',
      '+client|setname',
      '+client|list',
    );
    const run = await runCheck(['--output', 'json'], env({ SDC_REDIS_URL: userUrl('sdc-noinfo') }));
    expect(run.status, dump(run)).toBe(1);
    expect(failures(run).map((c) => c.id)).toEqual(['redis.acl']);
    expect(withId(run, 'redis.acl')[0]?.message).toMatch(/^ACL: the user may not run INFO \(NOPERM /);
    expect(withId(run, 'redis.settings')[0]).toMatchObject({ status: 'warn' });
  });

  it('an ACL user limited to other keys → ✗ naming the refused commands and the key refusal', async () => {
    const run = await runCheck(['--output', 'json'], env({ SDC_REDIS_URL: userUrl('sdc-otherkeys') }));
    expect(run.status, dump(run)).toBe(1);
    const refused = withId(run, 'redis.acl')[0]?.details?.refused as { command: string; error: string }[];
    expect(refused.map((c) => c.command)).toEqual(['evalsha', 'bzpopmin', 'eval']);
    expect(refused.find((c) => c.command === 'eval')?.error).toMatch(/NOPERM .*key/);
    // Nothing the probe touched is left in Redis.
    expect(await admin.keys('*check-probe*')).toEqual([]);
  });
});

describe('etcd with auth', () => {
  it('a role without the key prefix → ✗ key prefix naming user and fix, exit 1', async () => {
    const run = await runCheck(
      ['--output', 'json'],
      env({ SDC_ETCD_USERNAME: 'cleaner-other', SDC_ETCD_PASSWORD: 'cleaner-other-pw' }),
    );
    expect(run.status, dump(run)).toBe(1);
    expect(failures(run)).toEqual([
      expect.objectContaining({
        id: 'etcd.prefix',
        message: expect.stringMatching(
          /^access: etcdKeyPrefix \(--etcd-key-prefix\) spark-driver-cleaner\/: etcd denies user "cleaner-other" reading under it/,
        ),
      }),
    ]);
    expect(withId(run, 'etcd.reachable')[0]?.status).toBe('pass');
  });

  it('a role that may only read the prefix → ✗ writing refused, exit 1; readwrite → ✓', async () => {
    const run = await runCheck(
      ['--output', 'json'],
      env({ SDC_ETCD_USERNAME: 'cleaner-reader', SDC_ETCD_PASSWORD: 'cleaner-reader-pw' }),
    );
    expect(run.status, dump(run)).toBe(1);
    expect(failures(run)).toEqual([
      expect.objectContaining({
        id: 'etcd.prefix',
        message: expect.stringMatching(
          /^key prefix spark-driver-cleaner\/: etcd denies user "cleaner-reader" writing under it/,
        ),
        fix: expect.stringContaining(
          'etcdctl role grant-permission <role> --prefix=true readwrite spark-driver-cleaner/',
        ),
      }),
    ]);
    const good = await runCheck(['--output', 'json'], env({}));
    expect(good.status, dump(good)).toBe(0);
    expect(withId(good, 'etcd.prefix')[0]?.message).toBe(
      'key prefix spark-driver-cleaner/: user "cleaner-good" may grant a lease, write and read a key under it',
    );
  });

  it('a wrong password → ✗ access naming the user, exit 1', async () => {
    const run = await runCheck(['--output', 'json'], env({ SDC_ETCD_PASSWORD: 'wrong' }));
    expect(run.status, dump(run)).toBe(1);
    expect(failures(run).map((c) => c.id)).toEqual(['etcd.auth']);
    expect(withId(run, 'etcd.auth')[0]?.message).toContain('etcd refused user "cleaner-good"');
  });
});

describe('ZooKeeper', () => {
  const zkEnv = (root: string) =>
    env({
      SDC_ETCD_ENDPOINTS: '',
      SDC_ETCD_USERNAME: '',
      SDC_ETCD_PASSWORD: '',
      SDC_ZOOKEEPER: zk().connect,
      SDC_ZOOKEEPER_ROOT: root,
    });

  it('a root under /kyuubi → ✗ configuration naming zookeeperRoot, exit 2', async () => {
    const run = await runCheck(['--output', 'json'], zkEnv('/kyuubi/spark-driver-cleaner'));
    expect(run.status).toBe(2);
    expect(run.checks).toEqual([
      expect.objectContaining({
        id: 'configuration.invalid',
        message: expect.stringContaining(
          "SDC_ZOOKEEPER_ROOT: inside Kyuubi's default kyuubi.ha.namespace (/kyuubi)",
        ),
      }),
    ]);
  });

  it('a root inside a Kyuubi namespace found in ZooKeeper (/kyuubi-prod with a server registration) → ✗, exit 1; outside → ✓', async () => {
    const h: ZkHandle = createZkHandle(zk().connect, 10_000);
    const up = new Promise<void>((resolve) => h.on('connect', () => resolve()));
    h.init({});
    await up;
    try {
      // What a Kyuubi server with kyuubi.ha.namespace=kyuubi-prod registers.
      await createNode(h, '/kyuubi-prod', '', ZK_MODE.persistent, OPEN_ACL_UNSAFE);
      await createNode(
        h,
        '/kyuubi-prod/serverUri=10.0.0.7:10009;version=1.9.0;sequence=0000000001',
        '',
        ZK_MODE.ephemeral,
        OPEN_ACL_UNSAFE,
      );
      const run = await runCheck(['--output', 'json'], zkEnv('/kyuubi-prod/spark-driver-cleaner'));
      expect(run.status, dump(run)).toBe(1);
      expect(failures(run)).toEqual([
        expect.objectContaining({
          id: 'zookeeper.kyuubi-namespace',
          message:
            "Kyuubi's namespace: zookeeperRoot /kyuubi-prod/spark-driver-cleaner is inside /kyuubi-prod, which holds Kyuubi server registrations (serverUri=10.0.0.7:10009;version=1.9.0;sequence=0000000001): Kyuubi reads every child there as a server address",
        }),
      ]);
      const outside = await runCheck(['--output', 'json'], zkEnv('/spark-driver-cleaner'));
      expect(outside.status, dump(outside)).toBe(0);
      expect(withId(outside, 'zookeeper.root')[0]?.message).toBe(
        'root /spark-driver-cleaner: does not exist yet; the replicas can create it (nodes can be created in /)',
      );
      expect(await h.get_children('/', false)).not.toContainEqual(expect.stringMatching(/^check-/));
    } finally {
      h.close();
    }
  });
});
