import { type AddressInfo, createServer } from 'node:net';
/**
 * Failure modes: bad input. Every configuration field wrong in turn (exit 2, the message names the
 * field); Redis, etcd and the API server all unreachable at start (clear warnings, retries with backoff,
 * the process stays up and recovers); malformed pod objects from the API (skipped and logged).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { buildKubeconfig } from '../../harness/sandbox/apiserver/kubeconfig.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { startRedis } from '../../harness/sandbox/local-services.ts';
import { spawnReplica } from '../../harness/sandbox/replica-process.ts';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { envName, FIELDS, flagName } from '../../src/config/fields.ts';
import { tempFile } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  bystandersIntact,
  CLEAN,
  checkInvariants,
  createBystanders,
  createDrivers,
  firstLeader,
  remember,
  replicaEnv,
  SOAK,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();

/** One wrong value per configuration field (a new field without one fails the first test). */
const BAD: Record<string, Record<string, string>> = {
  targets: { SDC_TARGETS: ':spark' },
  kubeconfig: { SDC_KUBECONFIG: '/nonexistent/kc.yaml' },
  clusterName: { SDC_CLUSTER_NAME: 'Prod_EU' }, // a DNS label only: it goes into keys, paths, labels
  clusterNames: { SDC_CLUSTER_NAMES: 'fm' }, // no =name
  namespaceSelector: { SDC_NAMESPACE_SELECTOR: 'team in (spark' },
  labelSelector: { SDC_LABEL_SELECTOR: 'spark-role in (driver' },
  policy: { SDC_POLICY: 'SOME' },
  applicationStateSource: { SDC_APPLICATION_STATE_SOURCE: 'SIDECAR' },
  applicationStateContainer: { SDC_APPLICATION_STATE_CONTAINER: 'driver_container' },
  retention: { SDC_RETENTION: 'five minutes' },
  redisUrl: { SDC_REDIS_URL: 'http://127.0.0.1:6379' },
  redisMode: { SDC_REDIS_MODE: 'replicated' },
  redisSentinels: { SDC_REDIS_SENTINELS: 'x::' },
  redisClusterNodes: { SDC_REDIS_CLUSTER_NODES: 'a b' },
  redisTls: { SDC_REDIS_TLS: 'maybe' },
  // Wrong only for the mode: checked once every field is valid, so alone.
  redisMasterName: { SDC_REDIS_MODE: 'sentinel', SDC_REDIS_SENTINELS: '127.0.0.1:26379' }, // missing
  redisUsername: { SDC_REDIS_USERNAME: 'u' }, // single mode: the user goes in redisUrl
  redisPassword: { SDC_REDIS_PASSWORD: 'p' },
  redisSentinelPassword: { SDC_REDIS_SENTINEL_PASSWORD: 's' },
  etcdEndpoints: { SDC_ETCD_ENDPOINTS: 'etcd:2379' },
  etcdCaFile: { SDC_ETCD_CA_FILE: '/nonexistent/ca.pem' }, // a Secret not mounted: exit 2 at start
  etcdCertFile: { SDC_ETCD_CERT_FILE: '/nonexistent/client.pem' },
  etcdKeyFile: { SDC_ETCD_KEY_FILE: '/nonexistent/client.key' },
  etcdPasswordFile: { SDC_ETCD_PASSWORD_FILE: '/nonexistent/password' },
  etcdKeyPrefix: { SDC_ETCD_KEY_PREFIX: 'no-trailing-slash' },
  // Wrong only without etcdEndpoints (every valid run here has none), so alone.
  etcdUsername: { SDC_ETCD_USERNAME: 'cleaner' },
  etcdPassword: { SDC_ETCD_PASSWORD: 'pw' },
  zookeeper: { SDC_ZOOKEEPER: 'zk-0' }, // no port
  zookeeperRoot: { SDC_ZOOKEEPER_ROOT: '/kyuubi/cleaner' }, // inside Kyuubi's namespace
  zookeeperAuth: { SDC_ZOOKEEPER_AUTH: 'no-password' },
  zookeeperAuthFile: { SDC_ZOOKEEPER_AUTH_FILE: '/nonexistent/digest' },
  electionTtlSeconds: { SDC_ELECTION_TTL_SECONDS: '1' },
  recheck: { SDC_RECHECK: 'sometimes' },
  apiQps: { SDC_API_QPS: '-5' },
  apiBurst: { SDC_API_BURST: '0' },
  informerScope: { SDC_INFORMER_SCOPE: 'everywhere' },
  apiHttp2: { SDC_API_HTTP2: 'yes' },
  apiTimeout: { SDC_API_TIMEOUT: 'soon' },
  concurrency: { SDC_CONCURRENCY: '0' },
  retryBaseDelay: { SDC_RETRY_BASE_DELAY: 'x' },
  retryMaxDelay: { SDC_RETRY_MAX_DELAY: '2 days' },
  dryRun: { SDC_DRY_RUN: 'maybe' },
  replicaId: { SDC_REPLICA_ID: 'bad id!' },
  httpHost: { SDC_HTTP_HOST: 'not a host' },
  httpPort: { SDC_HTTP_PORT: '70000' },
  httpAllowUnauthenticated: { SDC_HTTP_ALLOW_UNAUTHENTICATED: 'perhaps' },
  tombstoneTtl: { SDC_TOMBSTONE_TTL: '0' }, // a duration, out of its range (1h to 365d)
  reconcileInterval: { SDC_RECONCILE_INTERVAL: 'P30D' }, // above Node's timer limit: reconciled every 1 ms
  overdueGrace: { SDC_OVERDUE_GRACE: '500ms' }, // below its range (1s to 24h)
  queuePrefix: { SDC_QUEUE_PREFIX: 'a:b' },
  logLevel: { SDC_LOG_LEVEL: 'loud' },
  dashboardReadOnly: { SDC_DASHBOARD_READ_ONLY: 'perhaps' },
  dashboardUser: { SDC_DASHBOARD_USER: 'admin' },
  dashboardPassword: { SDC_DASHBOARD_PASSWORD: 'secret' },
};

/**
 * Runs `src/cli.ts <command> <args…>` (default `run`) with a valid configuration overridden by `env`; kills it
 * if it does not exit. `stdout`: its lines (JSON log lines, or `run --check`'s configuration), as JSON text.
 */
async function runWith(
  id: string,
  env: Record<string, string>,
  command = 'run',
  args: string[] = [],
): Promise<{ code: number | string; stderr: string; stdout: string }> {
  const kubeconfig = tempFile(
    'kubeconfig.yaml',
    buildKubeconfig([{ contextName: 'fm', url: 'http://127.0.0.1:9' }]),
  );
  const r = spawnReplica({
    id,
    command,
    args,
    env: {
      KUBECONFIG: kubeconfig,
      SDC_TARGETS: 'fm:spark',
      SDC_REDIS_URL: cluster().redis.url,
      SDC_HTTP_PORT: '0',
      SDC_REPLICA_ID: id,
      ...env,
    },
  });
  // Generous: a CLI start costs seconds of CPU, and CI runs other suites beside this one.
  const timer = setTimeout(() => r.kill('SIGKILL'), 90_000);
  const code = await r.exited;
  clearTimeout(timer);
  return { code, stderr: r.stderr(), stdout: JSON.stringify(r.lines) };
}

describe('bad input', () => {
  it(`each configuration field wrong ${SOAK ? 'in turn' : 'at once, and the dependent ones in turn'} → exit 2, a line naming each field`, async () => {
    expect(Object.keys(BAD).sort()).toEqual(FIELDS.map((f) => f.key).sort());
    // The loader checks every field independently and reports one line per bad field, so CI runs them
    // all in one process (each CLI start costs seconds of CPU). Some can only be checked alone: the
    // kubeconfig is read after validation, the dashboard pair is only wrong when half-set, and the Redis
    // settings of one mode are only wrong for another mode.
    const alone = [
      'kubeconfig',
      'dashboardUser',
      'dashboardPassword',
      'redisMasterName',
      'redisUsername',
      'redisPassword',
      'redisSentinelPassword',
      'etcdUsername',
      'etcdPassword',
    ];
    const runs: { keys: string[]; env: Record<string, string> }[] = SOAK
      ? Object.keys(BAD).map((k) => ({ keys: [k], env: BAD[k] ?? {} }))
      : [
          {
            keys: Object.keys(BAD).filter((k) => !alone.includes(k)),
            env: Object.assign(
              {},
              ...Object.keys(BAD)
                .filter((k) => !alone.includes(k))
                .map((k) => BAD[k]),
            ),
          },
          ...alone.map((k) => ({ keys: [k], env: BAD[k] ?? {} })),
        ];
    const results = await Promise.all(
      runs.map(async (run, i) => ({ ...run, ...(await runWith(`bad-${i}`, run.env)) })),
    );
    const problems: string[] = [];
    for (const r of results) {
      if (r.code !== 2) problems.push(`${r.keys.join(',')}: exit ${r.code}: ${r.stderr.slice(0, 300)}`);
      const lines = r.stderr.split('\n').filter((l) => l.startsWith('  - '));
      for (const key of r.keys) {
        const named = lines.some((l) => [envName(key), flagName(key), key].some((n) => l.includes(n)));
        if (!named) problems.push(`${key}: no line names it in: ${r.stderr.slice(0, 500)}`);
      }
      // One line per problem, no stack trace.
      if (/\n\s+at /.test(r.stderr))
        problems.push(`${r.keys.join(',')}: stack trace: ${r.stderr.slice(0, 300)}`);
    }
    expect(problems).toEqual([]);
  }, 240_000);

  it('a selector that selects everything (empty in the YAML file, only exclusions in the env) → exit 2 naming labelSelector, its flag and variable and an example; no pod touched', async () => {
    const ns = 'wide';
    // Finished pods a selector without a required label would take: an executor, a hand-submitted driver.
    const bystanders = createBystanders(cluster().server, ns);
    const file = tempFile('config.yaml', 'labelSelector: ""\n');
    const env = (extra: Record<string, string>) => ({
      ...replicaEnv(cluster(), ns, 'bi-wide', { SDC_RECONCILE_INTERVAL: '1s' }),
      ...extra,
    });
    const replicas = [
      // An empty variable counts as unset: the file's empty selector applies.
      cluster().startReplica('wide-file', env({ SDC_CONFIG: file, SDC_LABEL_SELECTOR: '' })),
      cluster().startReplica('wide-env', env({ SDC_LABEL_SELECTOR: '!spark-exec-id,spark-role!=x' })),
    ];
    try {
      // Before the fix these replicas ran and deleted the bystanders: stop waiting at whichever comes first.
      await waitFor(
        'both replicas exited, or a bystander touched',
        () =>
          replicas.every((r) => r.child.exitCode !== null) || !bystandersIntact(cluster().server, bystanders),
        60_000,
        100,
      );
      expect(bystandersIntact(cluster().server, bystanders)).toBe(true);
      for (const r of replicas) {
        expect(r.child.exitCode, r.stderr()).toBe(2);
        expect(r.stderr()).toMatch(
          /^ {2}- (labelSelector in .*config\.yaml|SDC_LABEL_SELECTOR): .*set labelSelector \(--label-selector, SDC_LABEL_SELECTOR\) to e\.g\. spark-role=driver,kyuubi-unique-tag$/m,
        );
        expect(r.stderr()).not.toMatch(/\n\s+at /);
      }
    } finally {
      await stopAll(replicas);
    }
  }, 120_000);

  it('a Redis password in the URL (query or userinfo) and etcd credentials never reach stdout or stderr; a sub-second retention and a short tombstoneTtl are warned', async () => {
    const secret = 'Zq7-s3cret-pw';
    // A Redis of its own that requires the password: the query form must really authenticate.
    const redis = await startRedis();
    const admin = new Redis(redis.url);
    await admin.config('SET', 'requirepass', secret);
    admin.disconnect();
    const port = new URL(redis.url).port;
    const pods = createDrivers(cluster().server, 'secrets', 3, 'sec');
    const replicas = [
      cluster().startReplica('sec-query', {
        ...replicaEnv(cluster(), 'secrets', 'bi-sec'),
        SDC_REDIS_URL: `redis://127.0.0.1:${port}?password=${secret}`,
        SDC_RETENTION: '500ms', // under 1 s: warned, and then shorter than the tombstone's margin (1 h)
        SDC_TOMBSTONE_TTL: '1h',
      }),
      // A wrong password in the userinfo: Redis refuses it at start, a configuration error (exit 2).
      cluster().startReplica('sec-userinfo', {
        ...replicaEnv(cluster(), 'secrets-2', 'bi-sec2'),
        SDC_REDIS_URL: `redis://:${secret}-x@127.0.0.1:${port}`,
      }),
      // etcd3 would pass the credentials to gRPC inside the address: refused.
      cluster().startReplica('sec-etcd', {
        ...replicaEnv(cluster(), 'secrets-3', 'bi-sec3'),
        SDC_ETCD_ENDPOINTS: `http://root:${secret}@127.0.0.1:2379`,
      }),
    ];
    const [query, userinfo, etcd] = replicas;
    try {
      const start = await query?.waitForLine((l) => l.msg === 'effective configuration');
      expect((start?.config as { redis?: { url?: string } } | undefined)?.redis?.url).toBe(
        `redis://127.0.0.1:${port}?password=***`,
      );
      await waitGone(cluster().server, pods, 'pods deleted through the Redis whose password is in the query');
      await waitFor(
        'the replica given a wrong password exits',
        () => userinfo?.child.exitCode !== null,
        60_000,
      );
      expect(userinfo?.child.exitCode, userinfo?.stderr()).toBe(2);
      expect(userinfo?.stderr()).toContain(
        `- redisUrl (--redis-url, SDC_REDIS_URL) redis://:***@127.0.0.1:${port}: Redis refused the credentials (WRONGPASS`,
      );
      await waitFor('the replica given etcd credentials exits', () => etcd?.child.exitCode !== null, 60_000);
      expect(etcd?.child.exitCode).toBe(2);
      expect(etcd?.stderr()).toContain(
        '- SDC_ETCD_ENDPOINTS: "http://root:***@127.0.0.1:2379/": credentials, a path or a query in an etcd endpoint are not supported',
      );
      for (const r of replicas) {
        const text = `${JSON.stringify(r.lines)}\n${r.stderr()}`;
        expect(text.includes(secret), `${r.id} printed the secret`).toBe(false);
      }
      const warned = query?.lines.filter(
        (l) => l.level === 'warn' && String(l.msg).startsWith('configuration:'),
      );
      expect(warned?.map((l) => [l.field, l.value])).toEqual([
        ['retention', '500ms'],
        ['tombstoneTtl', '1h'],
      ]);
    } finally {
      await stopAll(replicas);
      await redis.stop();
    }
  }, 120_000);

  it('two targets that are one (`spark` and `fm:spark`, the current context fm) → run, run --check and status exit 2 naming both', async () => {
    const env = { SDC_TARGETS: 'spark,fm:spark' };
    // `run --check` refuses what `run` refuses: one validation for both.
    const [run, check] = await Promise.all([
      runWith('same-target', env),
      runWith('same-target-check', env, 'run', ['--check']),
    ]);
    for (const r of [run, check]) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(
        '- targets (--targets, SDC_TARGETS): "spark" and "fm:spark" are the same target, fm:spark',
      );
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    // The same check as the operator's `status` beside the replicas, before Redis or etcd is asked anything.
    const status = await runWith('same-target-status', env, 'status');
    expect(status.code, status.stderr).toBe(2);
    expect(status.stderr).toContain('"spark" and "fm:spark" are the same target, fm:spark');
    // Written twice the same way, too.
    const twice = await runWith('same-target-twice', { SDC_TARGETS: 'fm:spark,fm:spark' });
    expect(twice.code, twice.stderr).toBe(2);
    expect(twice.stderr).toContain('"fm:spark" and "fm:spark" are the same target');
  }, 120_000);

  it('an HTTP port already in use, or an address not of this host → exit 2 naming httpHost/httpPort, no stack trace', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((taken.address() as AddressInfo).port);
      const [inUse, foreign] = await Promise.all([
        runWith('http-in-use', { SDC_HTTP_HOST: '127.0.0.1', SDC_HTTP_PORT: port }),
        // TEST-NET-2 (RFC 5737): never an address of this host.
        runWith('http-foreign', {
          SDC_HTTP_HOST: '198.51.100.7',
          SDC_DASHBOARD_USER: 'ops',
          SDC_DASHBOARD_PASSWORD: 'pw',
        }),
      ]);
      for (const [r, why] of [
        [inUse, 'EADDRINUSE'],
        [foreign, 'EADDRNOTAVAIL'],
      ] as const) {
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toMatch(
          /- httpHost\/httpPort \(--http-host\/--http-port, SDC_HTTP_HOST\/SDC_HTTP_PORT\)/,
        );
        expect(r.stderr).toContain(why);
        expect(r.stderr).not.toMatch(/\n\s+at /);
      }
    } finally {
      taken.close();
    }
  }, 120_000);

  it('the HTTP port beyond loopback without dashboard credentials → run --check and run exit 2 naming httpHost, dashboardUser and dashboardPassword; the opt-out is warned about; with credentials the listening line names the bound address', async () => {
    const open = { SDC_HTTP_HOST: '0.0.0.0' };
    const [check, run, v6, optOut, local] = await Promise.all([
      runWith('open-check', open, 'run', ['--check']),
      runWith('open-run', open),
      runWith('open-v6', { SDC_HTTP_HOST: '::' }, 'run', ['--check']),
      runWith('open-opt-out', { ...open, SDC_HTTP_ALLOW_UNAUTHENTICATED: 'true' }, 'run', ['--check']),
      runWith('open-local', { SDC_HTTP_HOST: 'localhost' }, 'run', ['--check']),
    ]);
    for (const r of [check, run, v6]) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(
        /^ {2}- SDC_HTTP_HOST: .*not a loopback address.*set dashboardUser and dashboardPassword.*httpAllowUnauthenticated/m,
      );
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    // The opt-out (a NetworkPolicy or a sidecar guards the port) starts, and says what it leaves open.
    expect(optOut.code, optOut.stderr).toBe(0);
    expect(optOut.stderr).toMatch(
      /warning: httpAllowUnauthenticated true: \/ui and \/api\/v1\/ answer anyone who reaches 0\.0\.0\.0:0/,
    );
    expect(local.code, local.stderr).toBe(0);
    expect(local.stderr).toBe('');
    // With credentials: it serves, and its listening line names the address the socket is bound to.
    const r = cluster().startReplica('open-auth', {
      ...replicaEnv(cluster(), 'open', 'bi-open'),
      SDC_HTTP_HOST: '0.0.0.0',
      SDC_DASHBOARD_USER: 'ops',
      SDC_DASHBOARD_PASSWORD: 'pw',
    });
    try {
      const line = await r.waitForLine((l) => l.msg === 'http server listening', 60_000);
      expect(String(line.address)).toMatch(/^0\.0\.0\.0:[1-9]\d*$/);
      const port = String(line.address).split(':')[1];
      expect(line.url).toBe(`http://127.0.0.1:${port}`);
      expect((await fetch(`http://127.0.0.1:${port}/api/v1/leaders`)).status).toBe(401);
    } finally {
      await stopAll([r]);
    }
  }, 150_000);

  it('a Redis URL that the Redis client cannot use (malformed percent-encoding, a database that is no number, a port out of range, a fragment, an unencoded #) → run --check, run and status exit 2 naming redisUrl and the fix, no stack trace, no secret', async () => {
    const port = new URL(cluster().redis.url).port;
    const secret = 'Zq7-s3cret';
    const bad = {
      encoding: `redis://:${secret}%zz@127.0.0.1:${port}`,
      db: `redis://127.0.0.1:${port}/abc`,
      dbQuery: `redis://127.0.0.1:${port}?db=two`,
      port: 'redis://127.0.0.1:70000',
      fragment: `redis://127.0.0.1:${port}/0#${secret}`,
      hash: `redis://:${secret}#x@127.0.0.1:${port}`,
    };
    const want: Record<keyof typeof bad, RegExp> = {
      encoding:
        /SDC_REDIS_URL: "redis:\/\/:\*\*\*@127\.0\.0\.1:\d+": the password has malformed percent-encoding.*%25/,
      db: /SDC_REDIS_URL: "redis:\/\/127\.0\.0\.1:\d+\/abc": the database \(\/abc\) is not a number; expected \/0 to \/15/,
      dbQuery: /SDC_REDIS_URL: .*: the database \(db=two\) is not a number; expected/,
      port: /SDC_REDIS_URL: "redis:\/\/127\.0\.0\.1:70000": port 70000 is out of range; expected 1 to 65535/,
      fragment: /SDC_REDIS_URL: "redis:\/\/127\.0\.0\.1:\d+\/0#\*\*\*": a fragment .* %23/,
      hash: /SDC_REDIS_URL: "redis:\/\/:\*\*\*@127\.0\.0\.1:\d+": .*%23/,
    };
    const keys = Object.keys(bad) as (keyof typeof bad)[];
    const results = await Promise.all([
      ...keys.map(async (k) => ({
        k,
        how: 'run --check',
        ...(await runWith(`url-${k}`, { SDC_REDIS_URL: bad[k] }, 'run', ['--check'])),
      })),
      // Before they were refused, these crashed `run` and `status` with URIError: URI malformed.
      {
        k: 'encoding' as const,
        how: 'run',
        ...(await runWith('url-enc-run', { SDC_REDIS_URL: bad.encoding })),
      },
      {
        k: 'encoding' as const,
        how: 'status',
        ...(await runWith('url-enc-status', { SDC_REDIS_URL: bad.encoding }, 'status')),
      },
    ]);
    const problems: string[] = [];
    for (const r of results) {
      const what = `${r.k} (${r.how})`;
      if (r.code !== 2) problems.push(`${what}: exit ${r.code}: ${r.stderr.slice(0, 300)}`);
      if (!want[r.k].test(r.stderr))
        problems.push(`${what}: no line like ${want[r.k]} in: ${r.stderr.slice(0, 400)}`);
      if (/\n\s+at /.test(r.stderr)) problems.push(`${what}: stack trace: ${r.stderr.slice(0, 300)}`);
      if (`${r.stdout}${r.stderr}`.includes(secret)) problems.push(`${what}: printed the secret`);
    }
    expect(problems).toEqual([]);
  }, 150_000);

  it('Redis refusing the replica at start (a wrong password, no password, a database it does not have) → exit 2 naming redisUrl and the fix; refused later → a named warn line, and it recovers', async () => {
    const secret = 'Zq7-other-pw';
    const redis = await startRedis();
    const admin = new Redis(redis.url);
    await admin.config('SET', 'requirepass', secret);
    const port = new URL(redis.url).port;
    const plain = new URL(cluster().redis.url).port;
    try {
      const [wrong, none, db] = await Promise.all([
        runWith('refused-wrong', { SDC_REDIS_URL: `redis://:${secret}-x@127.0.0.1:${port}` }),
        runWith('refused-none', { SDC_REDIS_URL: `redis://127.0.0.1:${port}` }),
        runWith('refused-db', { SDC_REDIS_URL: `redis://127.0.0.1:${plain}/99` }),
      ]);
      for (const [r, line] of [
        [
          wrong,
          /^ {2}- redisUrl .*redis:\/\/:\*\*\*@127\.0\.0\.1:\d+: Redis refused the credentials \(WRONGPASS.*\)\. Fix: /m,
        ],
        [none, /^ {2}- redisUrl .*: Redis requires a password and none is configured \(NOAUTH.*\)\. Fix: /m],
        [db, /^ {2}- redisUrl .*\/99: Redis has no database 99 \(.*out of range.*\)\. Fix: /m],
      ] as const) {
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toMatch(line);
        expect(r.stderr).not.toMatch(/\n\s+at /);
        expect(`${r.stdout}${r.stderr}`).not.toContain(secret);
      }
      // Started with the right password, then the password changes under it: a warn line naming the setting.
      const ns = 'refused-later';
      const r = cluster().startReplica('refused-later', {
        ...replicaEnv(cluster(), ns, 'bi-refused'),
        SDC_REDIS_URL: `redis://:${secret}@127.0.0.1:${port}`,
      });
      try {
        await firstLeader([r], ns);
        await admin.config('SET', 'requirepass', `${secret}-rotated`);
        await admin.auth(`${secret}-rotated`);
        await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
        const refused = await r.waitForLine(
          (l) => l.msg === 'redis refused the credentials; retrying',
          60_000,
        );
        expect(refused).toMatchObject({ level: 'warn', setting: 'redisUrl' });
        expect(String(refused.fix)).toContain('password');
        await admin.config('SET', 'requirepass', secret);
        await r.waitForLine((l) => l.msg === 'redis reachable again', 60_000);
        const pods = createDrivers(cluster().server, ns, 2, 'refused');
        await waitGone(cluster().server, pods, 'pods deleted once Redis accepts the replica again', 60_000);
        expect(r.child.exitCode).toBeNull();
        expect(`${JSON.stringify(r.lines)}${r.stderr()}`).not.toContain(secret);
      } finally {
        await stopAll([r]);
      }
    } finally {
      admin.disconnect();
      await redis.stop();
    }
  }, 180_000);

  it('a sub-millisecond retention is warned about in its unit; an exec credential plugin failing with secrets on stderr → its stderr logged once, truncated, tokens redacted', async () => {
    const half = await runWith('retention-half', { SDC_RETENTION: '0.5' }, 'run', ['--check']);
    expect(half.code, half.stderr).toBe(0);
    expect(half.stderr).toMatch(/warning: retention 0\.5ms: .*a number without a unit is milliseconds/);
    // A plugin that fails, printing what cloud plugins print: account details and tokens.
    const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjbGVhbmVyIn0.c2lnbmF0dXJlLXRoYXQtaXMtbG9uZw';
    const google = 'ya29.a0AfH6SMBx3Y-secret-oauth-token';
    const marker = 'PLUGIN-STDERR-MARKER';
    const plugin = tempFile(
      'plugin.mjs',
      `process.stderr.write(${JSON.stringify(`${marker}: refresh failed for ops@example.com with Authorization: Bearer ${jwt} and ${google}; ${'x'.repeat(400)}\n`)});\nprocess.exit(1);\n`,
    );
    const kubeconfig = tempFile(
      'kubeconfig.yaml',
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'fm',
        clusters: [{ name: 'fm', cluster: { server: cluster().server.url } }],
        contexts: [{ name: 'fm', context: { cluster: 'fm', user: 'plugin' } }],
        users: [
          {
            name: 'plugin',
            user: {
              exec: {
                apiVersion: 'client.authentication.k8s.io/v1',
                command: process.execPath,
                args: [plugin],
                interactiveMode: 'Never',
              },
            },
          },
        ],
      }),
    );
    const ns = 'exec-stderr';
    const r = cluster().startReplica('exec-stderr', {
      ...replicaEnv(cluster(), ns, 'bi-exec'),
      KUBECONFIG: kubeconfig,
    });
    try {
      await waitFor(
        'the informer restarted 3 times on the failing plugin',
        () => r.lines.filter((l) => l.msg === 'informer stopped on an error; restarting').length >= 3,
        90_000,
        200,
      );
      const text = (l: unknown) => JSON.stringify(l);
      const withStderr = r.lines.filter((l) => text(l).includes(marker));
      expect(withStderr).toHaveLength(1);
      expect(text(withStderr[0])).not.toMatch(/x{200}/); // truncated
      const all = `${text(r.lines)}${r.stderr()}`;
      for (const token of [jwt, google, 'c2lnbmF0dXJl']) expect(all).not.toContain(token);
      expect(r.child.exitCode).toBeNull();
    } finally {
      await stopAll([r]);
    }
  }, 150_000);

  it('Redis, etcd and the API server unreachable at start → warnings, retries with backoff, no exit; recovers when they appear', async () => {
    const ns = 'late';
    // An API server that is not there yet: its port and kubeconfig, then closed.
    const first = await startSandboxApiServer({ contextName: 'late' });
    const port = Number(new URL(first.url).port);
    await first.close();
    await cluster().redis.kill();
    const etcd = cluster().etcd.members[0];
    await etcd?.kill();
    let api: SandboxApiServer | undefined;
    const r = cluster().startReplica('late-r', {
      ...replicaEnv(cluster(), ns, 'bi2'),
      SDC_TARGETS: `late:${ns}`,
      KUBECONFIG: first.kubeconfigPath,
    });
    try {
      const downAt = Date.now();
      await r.waitForLine((l) => l.msg === 'redis unreachable; retrying', 60_000);
      await waitFor(
        'retries of the campaign and the informer',
        () =>
          r.lines.filter((l) => l.msg === 'campaign failed; retrying').length >= 2 &&
          r.lines.filter((l) => l.msg === 'informer stopped on an error; restarting').length >= 3,
        30_000,
        200,
      );
      expect(r.child.exitCode).toBeNull();
      const informerDelays = r.lines
        .filter((l) => l.msg === 'informer stopped on an error; restarting')
        .map((l) => Number(l.retryInMs));
      // Backoff, not a hot loop: each informer restart waits longer (base 500 ms, doubling, jitter).
      expect(informerDelays.at(-1)).toBeGreaterThan(informerDelays[0] ?? Infinity);
      const outageMs = Date.now() - downAt;
      const campaignFailures = r.lines.filter((l) => l.msg === 'campaign failed; retrying').length;
      expect(campaignFailures).toBeLessThan(outageMs / 200);
      for (const l of r.lines.filter((x) => /unreachable|failed|stopped/.test(String(x.msg))))
        expect(['warn', 'error']).toContain(l.level);
      // The services appear.
      await cluster().redis.restart();
      await etcd?.restart();
      api = await startSandboxApiServer({
        contextName: 'late',
        port,
        kubeconfigOut: tempFile('kubeconfig.yaml', ''),
      });
      const pods = createDrivers(api, ns, 10, 'late');
      await waitGone(api, pods, 'pods deleted once everything is up', 90_000);
      expect(checkInvariants(api, ns, pods.map(uidOf), { retentionMs: 1000 })).toEqual(CLEAN);
      expect(pods.map((p) => api?.requests.deletesByUid().get(uidOf(p))?.length)).toEqual(pods.map(() => 1));
      expect(r.child.exitCode).toBeNull();
      console.info(
        `[failure] unreachable at start for ${outageMs} ms: ${campaignFailures} campaign retries, informer delays ${informerDelays.join(', ')} ms`,
      );
    } finally {
      await stopAll([r]);
      await api?.close();
    }
  }, 150_000);

  it('malformed pod objects from the API (list and watch) → skipped and logged; well-formed pods around them are cleaned', async () => {
    const ns = 'malformed';
    const labels = (tag: string) => ({ 'spark-role': 'driver', 'kyuubi-unique-tag': tag });
    const oddPods = (when: string, now: number): V1Pod[] => {
      const noUid = sparkDriverPod({
        namespace: ns,
        appName: `no-uid-${when}`,
        phase: 'Succeeded',
        nowMs: now,
      });
      if (noUid.metadata) noUid.metadata.uid = '';
      return [
        noUid, // no UID: cannot be the subject of a job
        { metadata: { name: `no-status-${when}-driver`, namespace: ns, labels: labels(`a${when}`) } },
        {
          metadata: { name: `bad-statuses-${when}-driver`, namespace: ns, labels: labels(`b${when}`) },
          status: { phase: 'Running', containerStatuses: 'terminated' as unknown as [] },
        },
        {
          metadata: { name: `null-status-${when}-driver`, namespace: ns, labels: labels(`c${when}`) },
          status: { phase: 'Running', containerStatuses: [null as unknown as never] },
        },
        {
          metadata: { name: `odd-phase-${when}-driver`, namespace: ns, labels: labels(`d${when}`) },
          status: { phase: 'Exploded' },
        },
      ];
    };
    // Some before the replica starts (seen by the initial list), some after (seen by the watch).
    const before = oddPods('list', cluster().server.clock.now());
    for (const p of before) remember(cluster().server.pods.create(p, 'verbatim'));
    const good = createDrivers(cluster().server, ns, 5, 'fine', 5000);
    const r = cluster().startReplica(
      'mal-r',
      replicaEnv(cluster(), ns, 'bi3', { SDC_RECONCILE_INTERVAL: '1s' }),
    );
    try {
      await firstLeader([r], ns);
      await r.waitForLine((l) => l.msg === 'reconciled' && l.namespace === ns, 60_000);
      const after = oddPods('watch', cluster().server.clock.now());
      for (const p of after) remember(cluster().server.pods.create(p, 'verbatim'));
      const good2 = createDrivers(cluster().server, ns, 5, 'fine2', 5000);
      await waitGone(cluster().server, [...good, ...good2], 'well-formed pods deleted', 60_000);
      const since = Date.now();
      await waitFor(
        'two reconciles with every pod in the cache',
        () =>
          r.lines.filter(
            (l) => l.msg === 'reconciled' && l.namespace === ns && Date.parse(String(l.time)) >= since,
          ).length >= 2,
      );
      expect(
        r.lines.filter((l) => l.msg === 'reconcile failed' || l.msg === 'informer event handler failed'),
      ).toEqual([]);
      const malformed = r.lines.filter((l) => l.msg === 'malformed pod object: left alone');
      expect(malformed.length).toBeGreaterThanOrEqual(2);
      for (const l of malformed) expect(l).toMatchObject({ level: 'warn', why: 'no metadata.uid' });
      // Every odd pod is still there: none was deleted.
      for (const p of [...before, ...after])
        expect(cluster().server.pods.get(ns, p.metadata?.name ?? '')).toBeDefined();
      expect(
        checkInvariants(cluster().server, ns, [...good, ...good2].map(uidOf), { retentionMs: 1000 }),
      ).toEqual(CLEAN);
      expect(r.child.exitCode).toBeNull();
    } finally {
      await stopAll([r]);
    }
  }, 150_000);
});
