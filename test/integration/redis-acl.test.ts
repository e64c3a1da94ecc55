/**
 * The Redis ACL that docs/sizing.md ("Redis requirements") gives the cleaner, on a real Redis: a replica logged in
 * as that user cleans terminated drivers (one DELETE each) and serves its dashboard and metrics, and `status` and
 * `explain` answer, while Redis denies it nothing (`ACL LOG` stays empty: a denied command or key is logged there,
 * whoever sent it). And the rule is narrow: `ACL DRYRUN` shows it refuses keys outside the prefix, FLUSHALL, KEYS
 * and CONFIG SET.
 */
import { execFile } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../harness/sandbox/local-services.ts';
import { CLI_PATH } from '../../harness/sandbox/replica-process.ts';
import {
  createTerminatedDrivers,
  deletesPer,
  startTestCluster,
  type TestCluster,
} from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

/** docs/sizing.md's command, as written there (the password from the environment). */
const ACL_SETUSER =
  'redis-cli ACL SETUSER spark-driver-cleaner on ">$REDIS_CLEANER_PASSWORD" resetkeys "~sdc:*" resetchannels -@all +@read +@write +@keyspace +@scripting +@blocking +@connection +@transaction -@dangerous +info +config\\|get +client\\|list +time';
const PASSWORD = 'acl-test-password';
const NS = 'acl';

let cluster: TestCluster;
let admin: Redis;
let userUrl = '';

/** The command's arguments after `redis-cli`, as bash would pass them. */
function setuserArgs(): string[] {
  return ACL_SETUSER.replace(/^redis-cli /, '')
    .replace('$REDIS_CLEANER_PASSWORD', PASSWORD)
    .replace(/\\\|/g, '|')
    .match(/"[^"]*"|\S+/g)
    ?.map((a) => a.replace(/^"|"$/g, '')) as string[];
}

function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [CLI_PATH, ...args],
      { env: { ...process.env, SDC_LOG_LEVEL: 'silent', ...env }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, out: stdout + stderr }),
    ),
  );
}

beforeAll(async () => {
  cluster = await startTestCluster(['alpha']);
  admin = new Redis(cluster.redis.url);
  expect(await admin.call(...(setuserArgs() as [string, ...string[]]))).toBe('OK');
  await admin.call('ACL', 'LOG', 'RESET');
  userUrl = cluster.redis.url.replace('redis://', `redis://spark-driver-cleaner:${PASSWORD}@`);
}, 60_000);

afterAll(async () => {
  admin?.disconnect();
  await cluster?.stop();
});

describe('the documented Redis ACL', () => {
  it('is narrow: keys outside the prefix, FLUSHALL, KEYS and CONFIG SET are refused', async () => {
    const dryrun = (...args: string[]) => admin.call('ACL', 'DRYRUN', 'spark-driver-cleaner', ...args);
    expect(await dryrun('GET', 'sdc:{alpha.acl}:last-accepted')).toBe('OK');
    expect(await dryrun('EVALSHA', 'a'.repeat(40), '1', 'sdc:{alpha.acl}:wait')).toBe('OK');
    for (const refused of [
      ['GET', 'other:key'],
      ['FLUSHALL'],
      ['KEYS', '*'],
      ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'],
    ])
      expect(String(await dryrun(...(refused as [string])))).toMatch(/no permissions/);
  });

  it('lets a replica clean, serve its dashboard and metrics, and status and explain answer: Redis denies it nothing', async () => {
    const server = cluster.servers.alpha as NonNullable<TestCluster['servers'][string]>;
    const port = await freePort();
    const env = { SDC_TARGETS: `alpha:${NS}`, SDC_RETENTION: '1s', SDC_REDIS_URL: userUrl };
    const replica = cluster.startReplica('acl', { ...env, SDC_HTTP_PORT: String(port) });
    await replica.waitForLine((l) => l.msg === 'elected leader' && l.namespace === NS, 60_000);
    const pods = createTerminatedDrivers(server, NS, 5, 'acl');
    const uids = pods.map((p) => p.metadata?.uid ?? '');
    await waitFor('the drivers deleted', () => deletesPer(server, uids).every((n) => n === 1), 60_000);
    expect(deletesPer(server, uids)).toEqual([1, 1, 1, 1, 1]);

    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/metrics`)).status).toBe(200);
    expect((await fetch(`${base}/ui`)).status).toBe(200);
    // The dashboard's own API: queues with their counts and jobs, and the workers (CLIENT LIST).
    const queues = await fetch(`${base}/ui/api/queues?activeQueue=&status=latest&page=1`);
    expect(queues.status).toBe(200);
    const cliEnv = {
      KUBECONFIG: cluster.kubeconfig,
      SDC_ETCD_ENDPOINTS: cluster.etcd.endpoints.join(','),
      ...env,
    };
    const status = await cli(['status'], cliEnv);
    expect(status.code, status.out).toBe(0);
    const explain = await cli(['explain', `alpha:${NS}/${pods[0]?.metadata?.name}`], cliEnv);
    expect(explain.code, explain.out).toBe(0);
    replica.kill('SIGTERM');
    expect(await replica.exited).toBe(0);

    const denied = (await admin.call('ACL', 'LOG')) as unknown[];
    expect(denied).toEqual([]);
  }, 180_000);
});
