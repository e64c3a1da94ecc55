/**
 * `check` against the Kubernetes side, on the sandbox API server with RBAC from a permission table (the
 * cleaner's ServiceAccount as the example overlay grants it), real Redis and etcd: everything allowed and
 * answering (exit 0, the JSON valid against its schema); a token whose role lacks `delete` (✗ naming the
 * verb and namespace, exit 1, and no DELETE sent); a context that accepts connections and never answers (✗,
 * exit 3); this host's clock skewed by libfaketime (✗, exit 1); bad configuration (exit 2, nothing contacted).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PermissionTable } from '../../harness/sandbox/apiserver/authorization.ts';
import { buildKubeconfig } from '../../harness/sandbox/apiserver/kubeconfig.ts';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import {
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../../harness/sandbox/local-services.ts';
import { tempFile } from '../helpers/cluster.ts';
import { createFakeClock } from '../nemesis/faketime.ts';
import { dump, runCheck, withId } from './check-cli.ts';

const SA = 'system:serviceaccount:spark-driver-cleaner:spark-driver-cleaner';
const cleanerRules = (verbs: string[]) => [
  { verbs, resources: ['pods'], namespaces: ['spark-a', 'spark-b'] },
];
const TABLE: PermissionTable = {
  'cleaner-token': { name: SA, rules: cleanerRules(['get', 'list', 'watch', 'delete']) },
  'no-delete-token': { name: SA, rules: cleanerRules(['get', 'list', 'watch']) },
  'wide-token': { name: SA, rules: [{ verbs: ['get', 'list', 'watch', 'delete'], resources: ['pods'] }] },
  // Discovered namespaces (`prod:*`): the namespace-discovery overlay's grants, but pods in spark-a and spark-b only.
  'discovery-token': {
    name: SA,
    rules: [
      ...cleanerRules(['get', 'list', 'watch', 'delete']),
      { verbs: ['list', 'watch'], resources: ['namespaces'] },
    ],
  },
};

let server: SandboxApiServer;
let redis: LocalService;
let etcd: LocalEtcd;
let silent: Server;
const sockets = new Set<Socket>();

beforeAll(async () => {
  [server, redis, etcd] = await Promise.all([
    startSandboxApiServer({ contextName: 'prod', permissions: TABLE, token: 'cleaner-token' }),
    startRedis(),
    startEtcd(),
  ]);
  // Persistence on, as the README asks: the checks below fail only for what each case breaks.
  const admin = new Redis(redis.url);
  await admin.config('SET', 'appendonly', 'yes');
  admin.disconnect();
  // An API server address that accepts connections and never answers (a black-holing proxy, a frozen server).
  silent = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
}, 60_000);

afterAll(async () => {
  for (const s of sockets) s.destroy();
  silent?.close();
  await Promise.all([server?.close(), redis?.stop(), etcd?.stop()]);
});

/** The replicas' configuration: two targets of context `prod`, Redis, etcd. */
const env = (kubeconfig: string, extra: Record<string, string> = {}) => ({
  KUBECONFIG: kubeconfig,
  SDC_TARGETS: 'prod:spark-a,prod:spark-b',
  SDC_REDIS_URL: redis.url,
  SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
  ...extra,
});

describe('check on the Kubernetes side', () => {
  it('everything answers and is allowed → every check ✓ (plain http ‼), the fleet skipped, exit 0', async () => {
    const run = await runCheck(['--output', 'json'], env(server.kubeconfigPath));
    expect(run.status, dump(run)).toBe(0);
    expect(run.checks.filter((c) => c.status === 'fail' || c.status === 'unreachable')).toEqual([]);
    expect(withId(run, 'context.permissions').map((c) => [c.status, c.message])).toEqual([
      ['pass', 'permissions in spark-a: get, list, watch, delete on pods'],
      ['pass', 'permissions in spark-b: get, list, watch, delete on pods'],
    ]);
    expect(withId(run, 'context.tls')[0]).toMatchObject({ status: 'warn' });
    for (const id of [
      'context.reachable',
      'context.version',
      'context.clock',
      'context.auth',
      'redis.acl',
      'etcd.prefix',
    ])
      expect(withId(run, id)[0]?.status, id).toBe('pass');
    expect(withId(run, 'fleet.running')[0]).toMatchObject({ status: 'skip' });
    // The text form of the same run.
    const text = await runCheck([], env(server.kubeconfigPath));
    expect(text.status).toBe(0);
    expect(text.stdout).toContain('context prod\n  ✓ reachable: ');
    expect(text.stdout).toMatch(/\n\d+ passed, 1 warning, 0 failed, 0 not answering, 1 skipped: exit 0\n$/);
  });

  it('a token whose role lacks delete → ✗ naming delete and both namespaces, exit 1, and no DELETE sent', async () => {
    server.requests.reset();
    const run = await runCheck(['--output', 'json'], env(server.kubeconfigFor('no-delete-token')));
    expect(run.status, dump(run)).toBe(1);
    expect(withId(run, 'context.permissions').map((c) => [c.status, c.message])).toEqual([
      ['fail', 'permissions in spark-a: delete on pods refused (SelfSubjectAccessReview)'],
      ['fail', 'permissions in spark-b: delete on pods refused (SelfSubjectAccessReview)'],
    ]);
    expect(withId(run, 'context.permissions')[0]?.fix).toContain(
      'grant get, list, watch, delete on pods in spark-a',
    );
    expect(run.checks.filter((c) => c.status === 'fail').map((c) => c.id)).toEqual([
      'context.permissions',
      'context.permissions',
    ]);
    expect(server.requests.countsByVerb().delete ?? 0).toBe(0);
    const text = await runCheck([], env(server.kubeconfigFor('no-delete-token')));
    expect(text.stdout).toContain(
      '  ✗ permissions in spark-a: delete on pods refused (SelfSubjectAccessReview)\n      fix: grant',
    );
  });

  it('a context that does not answer → ✗ reachable naming it, its other checks skipped, the other context ✓, exit 3', async () => {
    const port = (silent.address() as { port: number }).port;
    const merged = tempFile(
      'kubeconfig-silent',
      buildKubeconfig(
        [
          { contextName: 'prod', url: server.url, token: 'cleaner-token' },
          { contextName: 'dark', url: `http://127.0.0.1:${port}`, token: 'x' },
        ],
        'prod',
      ),
    );
    const run = await runCheck(
      ['--output', 'json', '--timeout', '1s'],
      env(merged, { SDC_TARGETS: 'prod:spark-a,dark:spark-x' }),
    );
    expect(run.status, dump(run)).toBe(3);
    const dark = run.checks.filter((c) => c.group === 'context dark');
    expect(dark.map((c) => [c.id, c.status])).toEqual([
      ['context.reachable', 'unreachable'],
      ['context.permissions', 'skip'],
    ]);
    expect(dark[0]?.message).toBe(`reachable: http://127.0.0.1:${port} does not answer within 1000 ms`);
    expect(
      run.checks.filter((c) => c.group === 'context prod' && c.id === 'context.permissions')[0]?.status,
    ).toBe('pass');
  });

  it("this host's clock 2 minutes ahead (libfaketime) → ✗ clock with the skew, exit 1", async () => {
    const fake = createFakeClock();
    fake.step(120);
    const run = await runCheck(['--output', 'json'], { ...env(server.kubeconfigPath), ...fake.env });
    expect(run.status, dump(run)).toBe(1);
    const clock = withId(run, 'context.clock')[0];
    expect(clock).toMatchObject({ status: 'fail' });
    expect(clock?.message).toMatch(
      /^clock: the API server's clock is at least 11\d\.\d s behind ours \(at most 5 s accepted\)$/,
    );
    expect(clock?.details?.skewMs).toBeLessThan(-115_000);
    expect(run.checks.filter((c) => c.status === 'fail').map((c) => c.id)).toEqual(['context.clock']);
  });

  it('many target namespaces all allowed → one permissions line naming how many; the API rate’s waits are not timeouts', async () => {
    const targets = Array.from({ length: 12 }, (_, i) => `prod:t-${i}`).join(',');
    // 49 reviews at 10/s: most wait over 2 s for the rate limiter, and must not count it against --timeout.
    const run = await runCheck(
      ['--output', 'json', '--timeout', '2s'],
      env(server.kubeconfigFor('wide-token'), {
        SDC_TARGETS: targets,
        SDC_API_QPS: '10',
        SDC_API_BURST: '1',
      }),
    );
    expect(run.status, dump(run)).toBe(0);
    expect(withId(run, 'context.permissions').map((c) => c.message)).toEqual([
      'permissions in 12 target namespaces (t-0, t-1, t-2, …): get, list, watch, delete on pods',
    ]);
    expect(withId(run, 'context.permissions')[0]?.details?.namespaces).toHaveLength(12);
  });

  it('discovered namespaces (prod:*): list, watch on namespaces asked, then each labelled namespace; one without its grants ✗', async () => {
    for (const [ns, labels] of [
      ['spark-a', { 'spark-cleanup': 'enabled' }],
      ['spark-c', { 'spark-cleanup': 'enabled' }],
      ['other', {}],
    ] as const)
      if (!server.namespaces.get(ns)) server.namespaces.create(ns, labels);
    const discovery = { SDC_TARGETS: 'prod:*', SDC_NAMESPACE_SELECTOR: 'spark-cleanup=enabled' };
    const run = await runCheck(['--output', 'json'], env(server.kubeconfigFor('discovery-token'), discovery));
    expect(run.status, dump(run)).toBe(1);
    expect(withId(run, 'context.discovery')[0]?.message).toBe(
      'discovery: 2 namespaces match spark-cleanup=enabled (spark-a, spark-c)',
    );
    expect(withId(run, 'context.permissions').map((c) => [c.status, c.message])).toEqual([
      ['pass', 'permissions in spark-a: get, list, watch, delete on pods'],
      ['fail', 'permissions in spark-c: get, list, watch, delete on pods refused (SelfSubjectAccessReview)'],
    ]);
    const blind = await runCheck(['--output', 'json'], env(server.kubeconfigPath, discovery));
    expect(blind.status, dump(blind)).toBe(1);
    expect(withId(blind, 'context.permissions')[0]).toMatchObject({
      status: 'fail',
      message:
        'permissions: list, watch on namespaces at the cluster scope refused: discovered namespaces (prod:*) cannot be found',
    });
  });

  it('bad configuration → ✗ configuration lines naming the field, exit 2, nothing contacted', async () => {
    server.requests.reset();
    const run = await runCheck(['--output', 'json'], env(server.kubeconfigPath, { SDC_RETENTION: 'soon' }));
    expect(run.status).toBe(2);
    expect(run.checks).toEqual([
      expect.objectContaining({
        id: 'configuration.invalid',
        status: 'fail',
        message: expect.stringContaining('SDC_RETENTION: "soon" is not a duration'),
      }),
    ]);
    const unknownContext = await runCheck([], env(server.kubeconfigPath, { SDC_TARGETS: 'nowhere:spark-a' }));
    expect(unknownContext.status).toBe(2);
    expect(unknownContext.stdout).toContain('✗ --targets: context "nowhere" is not in');
    const badCanary = await runCheck(['--canary', 'spark-z'], env(server.kubeconfigPath));
    expect(badCanary.status).toBe(2);
    expect(badCanary.stdout).toContain(
      '✗ --canary spark-z: not a namespace the fleet cleans (targets: prod:spark-a, prod:spark-b)',
    );
    expect(server.requests.recent()).toEqual([]);
  });
});
