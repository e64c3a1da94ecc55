/**
 * `status` and `explain` when Redis or etcd does not answer, and `status`'s count of overdue jobs. The
 * commands run as an operator runs them (`src/cli.ts status|explain`, SDC_* configuration) against a real
 * `redis-server` and a real `etcd` of this file, frozen with SIGSTOP: the port accepts connections and nothing
 * answers, as a hung server or a proxy whose backend is gone. No replica: the queue is written here.
 */
import { execFile } from 'node:child_process';
import { Queue } from 'bullmq';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildKubeconfig } from '../../harness/sandbox/apiserver/kubeconfig.ts';
import {
  type LocalEtcd,
  type LocalService,
  startEtcd,
  startRedis,
} from '../../harness/sandbox/local-services.ts';
import { CLI_PATH } from '../../harness/sandbox/replica-process.ts';
import { clusterIdentity } from '../../src/kube/cluster-identity.ts';
import { electionPrefix, queueName } from '../../src/queue/job-identity.ts';
import { tempFile } from '../helpers/cluster.ts';

let redis: LocalService;
let etcd: LocalEtcd;
beforeAll(async () => {
  [redis, etcd] = await Promise.all([startRedis(), startEtcd()]);
}, 60_000);
afterAll(async () => {
  await Promise.all([redis?.stop(), etcd?.stop()]);
});

/** No API server is asked: the kubeconfig only names the context's cluster, whose identity names the queue. */
const API_URL = 'http://127.0.0.1:1';
const kubeconfig = tempFile('kubeconfig', buildKubeconfig([{ contextName: 'ctx', url: API_URL }]));
const target = {
  cluster: clusterIdentity({ server: API_URL, tls: {} }).name,
  context: 'ctx',
  namespace: 'frozen',
};
const env = (extra: Record<string, string> = {}) => ({
  KUBECONFIG: kubeconfig,
  SDC_TARGETS: `${target.context}:${target.namespace}`,
  SDC_REDIS_URL: redis.url,
  SDC_ETCD_ENDPOINTS: etcd.endpoints.join(','),
  SDC_QUEUE_PREFIX: 'frz',
  SDC_OVERDUE_GRACE: '1s',
  SDC_LOG_LEVEL: 'silent',
  ...extra,
});

interface CliResult {
  status: number | null;
  stderr: string;
  stdout: string;
  /** From spawn to exit, ms (Node's start included). */
  tookMs: number;
}

/** Runs `src/cli.ts <args>`; killed after 30 s (what a hang comes to). */
function cli(args: string[], extra: Record<string, string> = {}): Promise<CliResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_PATH, ...args],
      { env: { ...process.env, ...env(extra) }, timeout: 30_000 },
      (err, stdout, stderr) => {
        const status = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ status, stdout, stderr, tookMs: performance.now() - started });
      },
    );
  });
}

/** Runs `fn` with `svc` frozen (SIGSTOP), thawing it after. */
async function frozen<T>(svc: LocalService, fn: () => Promise<T>): Promise<T> {
  svc.pause();
  try {
    return await fn();
  } finally {
    svc.resume();
  }
}

describe('status and explain against a server that does not answer', () => {
  const commands = [
    ['status', ['status']],
    ['explain', ['explain', `${target.context}:${target.namespace}/spark-pi-driver`, '--offline']],
  ] as const;
  for (const [name, args] of commands) {
    it(`${name}: Redis frozen → exit 3, naming redisUrl`, async () => {
      const r = await frozen(redis, () => cli([...args]));
      console.info(`[status] ${name} with Redis frozen: exit ${r.status} after ${Math.round(r.tookMs)} ms`);
      expect(r.status).toBe(3);
      expect(r.stderr).toContain('redisUrl (--redis-url, SDC_REDIS_URL)');
      expect(r.stderr).not.toContain('etcdEndpoints');
      // Not a timing target (measured in docs/failure-modes.md): a hang is killed at 30 s. The wait itself is
      // 1.5 s (ANSWER_TIMEOUT_MS); the rest is Node's start, which a loaded machine stretches.
      expect(r.tookMs).toBeLessThan(20_000);
    }, 60_000);

    it(`${name}: etcd frozen → exit 3, naming etcdEndpoints`, async () => {
      const member = etcd.members[0] as LocalService;
      const r = await frozen(member, () => cli([...args]));
      console.info(`[status] ${name} with etcd frozen: exit ${r.status} after ${Math.round(r.tookMs)} ms`);
      expect(r.status).toBe(3);
      expect(r.stderr).toContain('etcdEndpoints (--etcd-endpoints, SDC_ETCD_ENDPOINTS)');
      expect(r.stderr).not.toContain('redisUrl');
      // Not a timing target (measured in docs/failure-modes.md): a hang is killed at 30 s. The wait itself is
      // 1.5 s (ANSWER_TIMEOUT_MS); the rest is Node's start, which a loaded machine stretches.
      expect(r.tookMs).toBeLessThan(20_000);
    }, 60_000);
  }
});

describe('status counts every overdue job', () => {
  it('a job in retry backoff behind a job not yet due is overdue: exit 1', async () => {
    const conn = new Redis(redis.url, { maxRetriesPerRequest: 3 });
    const queue = new Queue(queueName(target), { connection: conn, prefix: 'frz-backoff' });
    const client = new Etcd3({ hosts: etcd.endpoints });
    const now = Date.now();
    try {
      // A leader in etcd (a candidate key as a replica writes it): the target's only problem can be overdue jobs.
      await client.put(`${electionPrefix(target)}7587888`).value('replica-1');
      // As the queue holds them: delayed jobs scored by when they run next. The first runs in a minute, at its
      // deadline; the second's deadline passed ten minutes ago and it waits out a retry backoff of five.
      await queue.add(
        'spark-a-driver',
        { deadlineMs: now + 60_000 },
        { jobId: crypto.randomUUID(), delay: 60_000 },
      );
      await queue.add(
        'spark-b-driver',
        { deadlineMs: now - 600_000 },
        { jobId: crypto.randomUUID(), delay: 300_000 },
      );
      const r = await cli(['status', '--json'], { SDC_QUEUE_PREFIX: 'frz-backoff' });
      expect(r.stderr).toBe('');
      const json = JSON.parse(r.stdout) as {
        targets: { leader: string; overdue: number; problems: string[] }[];
      };
      expect(json.targets.map((t) => [t.leader, t.overdue, t.problems.length])).toEqual([
        ['replica-1', 1, 1],
      ]);
      expect(r.status).toBe(1);
    } finally {
      await client.delete().prefix(electionPrefix(target));
      client.close();
      await queue.obliterate({ force: true });
      await queue.close();
      conn.disconnect();
    }
  }, 60_000);
});
