/**
 * The replica's HTTP surface against real Redis, real etcd and the sandbox API server: `/metrics`
 * (checked by `promtool check metrics`), the application-state API, basic auth, the dashboard's
 * read-only mode, and `/readyz` reporting Redis (down: still ready).
 */

import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { monotonicClock } from '../../src/clock.ts';
import { type HttpServer, startHttpServer } from '../../src/http/server.ts';
import { ASSIGNMENT_RULE } from '../../src/leadership/assignment.ts';
import { cleanupJobId, queueName } from '../../src/queue/job-identity.ts';
import { waitFor } from '../helpers/wait.ts';
import { createTerminatedDriver, http, type OpsEnv, type OpsReplica, startOpsEnv } from './ops-env.ts';
import { ensureTool } from './test-tools.ts';

const AUTH = 'operator:s3cret pass';
let env: OpsEnv;
let r: OpsReplica;
/** A second server on the same replica: no credentials, dashboard actions allowed. */
let writable: HttpServer;
let promtool: string | undefined;
const completed: string[] = [];

beforeAll(async () => {
  promtool = ensureTool('promtool');
  env = await startOpsEnv(['alpha'], { etcd: true });
  const server = env.servers.alpha;
  if (!server) throw new Error('no sandbox server');
  // A reset watch makes the ops-b informer restart once (sdc_informer_restarts_total).
  server.faults.inject({ verb: 'watch', path: '/namespaces/ops-b/', reset: true, count: 1 });
  // The first DELETE in ops-b fails with 500 and is retried (code="500", outcome="failed").
  server.faults.inject({ verb: 'delete', path: '/namespaces/ops-b/', status: 500, count: 1 });
  r = await env.startReplica('ops-1', {
    SDC_TARGETS: 'alpha:ops-a,alpha:ops-b',
    SDC_QUEUE_PREFIX: 'ops',
    SDC_RECHECK: 'live', // the GET series below need the GET of `live`
    // COMPLETED keeps failed and killed drivers: they stay for the application-state checks.
    SDC_POLICY: 'COMPLETED',
    SDC_DASHBOARD_USER: AUTH.split(':')[0] ?? '',
    SDC_DASHBOARD_PASSWORD: AUTH.split(':')[1] ?? '',
  });
  writable = await startHttpServer({
    config: { ...r.config, dashboard: { readOnly: false, user: undefined, password: undefined } },
    replica: r.replica,
    log: r.logs.log,
    monotonicNow: monotonicClock,
    dashboardTimeoutMs: 1000,
  });
  await waitFor('elected for both targets', () => r.replica.cleaners.every((c) => c.isLeader), 30_000);
  const pods = [
    createTerminatedDriver(server, 'ops-a', 'nightly-etl'),
    createTerminatedDriver(server, 'ops-a', 'hourly-etl'),
    createTerminatedDriver(server, 'ops-b', 'report'),
  ];
  completed.push(...pods.map((p) => p.metadata?.uid ?? ''));
  await waitFor(
    'the three terminated drivers deleted',
    () => pods.every((p) => !server.pods.get(p.metadata?.namespace ?? '', p.metadata?.name ?? '')),
    30_000,
  );
}, 120_000);
afterAll(async () => {
  await writable?.close();
  await env?.stop();
});

const url = () => r.http.url;
const seriesValue = (text: string, line: RegExp) => {
  const m = text.split('\n').find((l) => line.test(l));
  return m === undefined ? undefined : Number(m.slice(m.lastIndexOf(' ') + 1));
};

/** The `cluster` label of the alpha server's series: the name replicas derive for it. */
const cluster = () => `cluster="${env.servers.alpha?.clusterName}"`;

describe('/metrics', () => {
  it('passes promtool check metrics and has every series, with the outcomes that happened', async (ctx) => {
    const text = await waitFor('informer restart and the 500 counted', async () => {
      const t = (await http(url(), '/metrics')).text;
      return t.includes(`sdc_informer_restarts_total{${cluster()},context="alpha",namespace="ops-b"} 1`) &&
        t.includes('outcome="failed"')
        ? t
        : undefined;
    });
    mkdirSync('test-artifacts', { recursive: true });
    writeFileSync('test-artifacts/metrics.txt', text);
    const res = await http(url(), '/metrics'); // open: no credentials even with auth configured
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);

    const a = `${cluster()},context="alpha",namespace="ops-a"`;
    const b = `${cluster()},context="alpha",namespace="ops-b"`;
    expect(seriesValue(text, new RegExp(`^sdc_cleanup_outcomes_total\\{${a},outcome="accepted"\\}`))).toBe(2);
    expect(seriesValue(text, new RegExp(`^sdc_cleanup_outcomes_total\\{${b},outcome="failed"\\}`))).toBe(1);
    expect(seriesValue(text, new RegExp(`^sdc_cleanup_outcomes_total\\{${b},outcome="accepted"\\}`))).toBe(1);
    expect(seriesValue(text, new RegExp(`^sdc_delete_lateness_seconds_count\\{${a}\\}`))).toBe(2);
    expect(
      seriesValue(
        text,
        new RegExp(`^sdc_kube_request_duration_seconds_count\\{${b},verb="DELETE",code="500"\\}`),
      ),
    ).toBe(1);
    const deleteOk = ['200', '202']
      .map((code) =>
        seriesValue(
          text,
          new RegExp(`^sdc_kube_request_duration_seconds_count\\{${a},verb="DELETE",code="${code}"\\}`),
        ),
      )
      .reduce<number>((s, v) => s + (v ?? 0), 0);
    expect(deleteOk).toBe(2);
    expect(
      seriesValue(
        text,
        new RegExp(`^sdc_kube_request_duration_seconds_count\\{${a},verb="GET",code="200"\\}`),
      ),
    ).toBe(2);
    expect(text).toMatch(
      new RegExp(`^sdc_kube_request_duration_seconds_bucket\\{le="0.005",${a},verb="GET"`, 'm'),
    );
    expect(seriesValue(text, new RegExp(`^sdc_queue_jobs\\{${a},state="completed"\\}`))).toBe(2);
    expect(seriesValue(text, new RegExp(`^sdc_queue_jobs\\{${a},state="delayed"\\}`))).toBe(0);
    expect(seriesValue(text, new RegExp(`^sdc_leader\\{${a}\\}`))).toBe(1);
    expect(seriesValue(text, new RegExp(`^sdc_leader\\{${b}\\}`))).toBe(1);
    const keepaliveAge = seriesValue(text, new RegExp(`^sdc_lease_keepalive_age_seconds\\{${a}\\}`));
    expect(keepaliveAge).toBeGreaterThanOrEqual(0);
    expect(keepaliveAge).toBeLessThan(3); // TTL 3 s: a keepalive every TTL/3
    expect(seriesValue(text, new RegExp(`^sdc_informer_restarts_total\\{${a}\\}`))).toBe(0);
    expect(seriesValue(text, new RegExp(`^sdc_informer_synced\\{${b}\\}`))).toBe(1);
    expect(seriesValue(text, new RegExp(`^sdc_reconcile_runs_total\\{${a}\\}`))).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(new RegExp(`^sdc_reconcile_enqueued_pods_total\\{${a}\\} \\d+$`, 'm'));
    expect(text).toMatch(new RegExp(`^sdc_reconcile_retried_jobs_total\\{${a}\\} \\d+$`, 'm'));
    for (const line of text.split('\n').filter((l) => l && !l.startsWith('#'))) {
      expect(line).toMatch(/^sdc_[a-z0-9_]+[ {]/);
    }

    if (!promtool) {
      ctx.skip('promtool is not installed and could not be (apt-get install prometheus)');
      return;
    }
    const check = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(`${check.stdout}${check.stderr}`.trim()).toBe('');
    expect(check.status).toBe(0);
  });
});

describe('/api/v1/applications', () => {
  it('answers from the informer cache: state, app id, app name, error; 404 when absent', async () => {
    const server = env.servers.alpha;
    if (!server) throw new Error('no sandbox server');
    const running = server.pods.create(
      sparkDriverPod({ namespace: 'ops-a', appName: 'streaming', phase: 'Running', nowMs: Date.now() }),
    );
    const killed = server.pods.create(
      sparkDriverPod({
        namespace: 'ops-b',
        appName: 'wide-join',
        phase: 'Failed',
        failureReason: 'OOMKilled',
        nowMs: Date.now(),
      }),
    );
    const tag = (p: typeof running) => p.metadata?.labels?.['kyuubi-unique-tag'] ?? '';
    const byTag = await waitFor('the running driver in the cache', async () => {
      const res = await http(url(), `/api/v1/applications?tag=${tag(running)}`, { auth: AUTH });
      return res.status === 200 ? res.json() : undefined;
    });
    expect(byTag).toEqual({
      id: running.metadata?.labels?.['spark-app-selector'],
      name: 'streaming',
      state: 'RUNNING',
      url: null,
      error: null,
      tag: tag(running),
      cluster: env.servers.alpha?.clusterName,
      context: 'alpha',
      namespace: 'ops-a',
      pod: running.metadata?.name,
      uid: running.metadata?.uid,
      finishedAt: null,
      deleting: false,
      deletionTimestamp: null,
    });
    const byName = await waitFor('the killed driver in the cache', async () => {
      const res = await http(url(), `/api/v1/applications/ops-b/${killed.metadata?.name}`, { auth: AUTH });
      return res.status === 200 ? res.json() : undefined;
    });
    expect(byName).toMatchObject({
      id: killed.metadata?.labels?.['spark-app-selector'],
      name: 'wide-join',
      // As Kyuubi maps it: a failed pod (and its OOM-killed container, exit 137) is FAILED, not KILLED.
      state: 'FAILED',
      error: 'OOMKilled (exit code 137)',
      finishedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });

    const noTag = await http(url(), '/api/v1/applications?tag=no-such-tag', { auth: AUTH });
    expect(noTag.status).toBe(404);
    expect(noTag.json()).toEqual({ error: 'no driver pod with kyuubi-unique-tag=no-such-tag' });
    const noPod = await http(url(), '/api/v1/applications/ops-a/no-such-driver', { auth: AUTH });
    expect(noPod.status).toBe(404);
    expect(noPod.json()).toMatchObject({ error: expect.stringContaining('ops-a/no-such-driver') });
    expect((await http(url(), '/api/v1/applications', { auth: AUTH })).status).toBe(400);
  });
});

describe('basic auth', () => {
  it('rejects requests without valid credentials to the dashboard and the API; probes and metrics stay open', async () => {
    for (const path of ['/ui', '/ui/', '/ui/api/queues', '/api/v1/leaders', '/api/v1/applications?tag=x']) {
      const anonymous = await http(url(), path);
      expect(anonymous.status, path).toBe(401);
      expect(anonymous.headers.get('www-authenticate'), path).toMatch(/^Basic realm="spark-driver-cleaner"/);
      expect((await http(url(), path, { auth: 'operator:wrong' })).status, path).toBe(401);
    }
    // A percent-encoded path routes to the dashboard too: it must not slip past the check.
    expect([401, 404]).toContain((await http(url(), '/%75i/api/queues')).status);
    const page = await http(url(), '/ui', { auth: AUTH });
    expect(page.status).toBe(200);
    expect(page.text).toContain('<div id="root">');
    expect(page.text).not.toContain('fonts.googleapis.com'); // no request leaves the cluster
    const leaders = await http(url(), '/api/v1/leaders', { auth: AUTH });
    const none = { overdue: 0, oldestOverdueSeconds: 0, oldestOverdue: [] };
    // Its cluster, and that it consumes both: nothing refused, nothing waited for.
    const row = {
      cluster: env.servers.alpha?.clusterName,
      leader: 'ops-1',
      assigned: 'ops-1',
      consuming: true,
    };
    const free = { refused: null, waiting: null };
    expect(leaders.json()).toEqual({
      replica: 'ops-1',
      leaders: { 'alpha:ops-a': 'ops-1', 'alpha:ops-b': 'ops-1' },
      targets: {
        'alpha:ops-a': { ...row, ...free, ...none },
        'alpha:ops-b': { ...row, ...free, ...none },
      },
      // How leaderships are balanced, as this replica sees it: alone, it is assigned and leads both.
      balance: {
        rule: ASSIGNMENT_RULE,
        members: ['ops-1'],
        targets: 2,
        cap: 2,
        share: { 'ops-1': { assigned: 2, leading: 2 } },
        notReady: {}, // it can clean both
      },
    });
    for (const path of ['/healthz', '/metrics']) expect((await http(url(), path)).status, path).toBe(200);
    // Open too; its verdict (200, or 503 when etcd answers slowly on a loaded machine) is not the point here.
    expect([200, 503]).toContain((await http(url(), '/readyz')).status);
  });
});

describe('dashboard actions', () => {
  it('refuses retry and remove in read-only mode, and allows them when configured writable', async () => {
    const queue = encodeURIComponent(
      queueName({ cluster: env.servers.alpha?.clusterName ?? '', namespace: 'ops-a' }),
    );
    const job = cleanupJobId(completed[0]);
    const cleaner = r.replica.cleaners.find((c) => c.target.namespace === 'ops-a');
    const listed = (await http(url(), '/ui/api/queues', { auth: AUTH })).json() as {
      queues: { name: string; readOnlyMode: boolean }[];
    };
    const alpha = env.servers.alpha?.clusterName;
    expect(listed.queues.map((q) => [q.name, q.readOnlyMode])).toEqual([
      [`{${alpha}/ops-a}`, true],
      [`{${alpha}/ops-b}`, true],
    ]);
    for (const action of ['retry', 'clean']) {
      const res = await http(url(), `/ui/api/queues/${queue}/${job}/${action}`, {
        method: 'PUT',
        auth: AUTH,
      });
      expect(res.status, action).toBe(405);
    }
    expect(await cleaner?.queue.bullQueue.getJobState(job)).toBe('completed');

    const removed = await http(writable.url, `/ui/api/queues/${queue}/${job}/clean`, { method: 'PUT' });
    expect(removed.status).toBe(204);
    expect(await cleaner?.queue.bullQueue.getJobState(job)).toBe('unknown');
  });
});

describe('/readyz', () => {
  it('stays ready when Redis stops, reporting it down, and reports it up when it is back', async () => {
    const ready = await waitFor('ready', async () => {
      const res = await http(url(), '/readyz');
      return res.status === 200 ? res.json() : undefined;
    });
    expect(ready).toMatchObject({ ok: true, redis: true, etcd: true, informersSynced: true });
    await env.redis.kill();
    const down = await waitFor('Redis reported down', async () => {
      const res = await http(url(), '/readyz');
      const body = res.json() as Record<string, unknown>;
      return body.redis === false ? { status: res.status, body } : undefined;
    });
    // A shared backend down is down for every replica: failing them all would only block node drains.
    expect(down.status).toBe(200);
    expect(down.body).toMatchObject({ ok: true, redis: false, etcd: true });
    expect((await http(url(), '/healthz')).status).toBe(200); // alive: it reconnects by itself
    // The dashboard reads Redis: it answers 503 after its timeout instead of holding the request open.
    const board = await http(writable.url, '/ui/api/queues');
    expect(board.status).toBe(503);
    expect(board.text).toMatch(/did not answer within 1 s: is Redis reachable/);
    await env.redis.restart();
    const up = await waitFor(
      'Redis reported up again',
      async () => {
        const res = await http(url(), '/readyz');
        const body = res.json() as Record<string, unknown>;
        return res.status === 200 && body.redis === true ? body : undefined;
      },
      30_000,
    );
    expect(up).toMatchObject({ ok: true, redis: true });
  });
});
