/**
 * The HTTP port against hostile or careless clients, on a real replica (real Redis, the sandbox API server) and
 * servers of its own: what a writable dashboard still refuses (edits that would skip a driver's retention),
 * read-only answers that say so, framing headers, client errors kept out of the warn log, failed logins logged
 * (sampled, with the client address) and slowed per address, and explain answering only for the driver pods
 * the label selector selects.
 */
import { request } from 'node:http';
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { monotonicClock } from '../../src/clock.ts';
import { AUTH_BACKOFF_INITIAL_MS, AUTH_FAILURES_ALLOWED } from '../../src/http/auth-failures.ts';
import { type HttpServer, startHttpServer } from '../../src/http/server.ts';
import { cleanupJobId, queueName } from '../../src/queue/job-identity.ts';
import { type MemoryLog, memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';
import { createTerminatedDriver, http, type OpsEnv, type OpsReplica, startOpsEnv } from './ops-env.ts';

const NS = 'hard-a';
const AUTH = 'ops:pw-7x';
let env: OpsEnv;
let r: OpsReplica;
/** Servers of the same replica without credentials: dashboard actions allowed, and read-only. */
let writable: HttpServer;
let readOnly: HttpServer;
/** A finished driver whose job waits out its hour of retention. */
let pending: V1Pod;
const uidOf = (p: V1Pod) => p.metadata?.uid ?? '';
const nameOf = (p: V1Pod) => p.metadata?.name ?? '';

beforeAll(async () => {
  env = await startOpsEnv(['alpha']);
  r = await env.startReplica('hard-1', {
    SDC_TARGETS: `alpha:${NS}`,
    SDC_QUEUE_PREFIX: 'hard',
    SDC_RETENTION: '1h',
    SDC_DASHBOARD_USER: AUTH.split(':')[0] ?? '',
    SDC_DASHBOARD_PASSWORD: AUTH.split(':')[1] ?? '',
  });
  const open = (readOnlyMode: boolean) =>
    startHttpServer({
      config: { ...r.config, dashboard: { readOnly: readOnlyMode, user: undefined, password: undefined } },
      replica: r.replica,
      log: r.logs.log,
      monotonicNow: monotonicClock,
    });
  writable = await open(false);
  readOnly = await open(true);
  await waitFor('elected', () => r.replica.cleaners.every((c) => c.isLeader), 30_000);
  const server = env.servers.alpha;
  if (!server) throw new Error('no sandbox server');
  pending = createTerminatedDriver(server, NS, 'hourly');
  await waitFor('its job delayed for the retention', async () => {
    const state = await r.replica.cleaners[0]?.queue.bullQueue.getJobState(cleanupJobId(uidOf(pending)));
    return state === 'delayed';
  });
}, 120_000);
afterAll(async () => {
  await writable?.close();
  await readOnly?.close();
  await env?.stop();
});

const queuePath = () =>
  `/ui/api/queues/${encodeURIComponent(queueName(r.replica.cleaners[0]?.target ?? { cluster: '?', namespace: NS }))}`;

describe('dashboard actions', () => {
  it('a writable dashboard refuses update-data, delay and add on a cleanup queue (405): the job, its data and its delay untouched', async () => {
    const queue = r.replica.cleaners[0]?.queue.bullQueue;
    const id = cleanupJobId(uidOf(pending));
    const before = await queue?.getJob(id);
    const counts = await queue?.getJobCounts();
    const job = `${queuePath()}/${id}`;
    const attempts = [
      // Retention skipped: a deadline of 0 (update-data) or a run time of now (delay), then promote.
      await http(writable.url, `${job}/update-data`, {
        method: 'PATCH',
        body: { jobData: { deadlineMs: 0 } },
      }),
      await http(writable.url, `${job}/delay`, { method: 'PATCH', body: { runAt: Date.now() } }),
      // A job made up by hand: no informer saw its pod terminal.
      await http(writable.url, `${queuePath()}/add`, {
        method: 'POST',
        body: { name: 'made-up', data: { deadlineMs: 0 }, options: { jobId: 'made-up' } },
      }),
    ];
    expect(attempts.map((a) => a.status)).toEqual([405, 405, 405]);
    for (const a of attempts) expect(a.text).toMatch(/refused on the cleanup queues/);
    // A percent-encoded action routes the same way: refused too.
    const encoded = await http(writable.url, `${job}/%75pdate-data`, {
      method: 'PATCH',
      body: { jobData: { deadlineMs: 0 } },
    });
    expect(encoded.status).toBe(405);
    const after = await queue?.getJob(id);
    expect(await queue?.getJobState(id)).toBe('delayed');
    expect(after?.data).toEqual(before?.data);
    expect(after?.delay).toBe(before?.delay);
    expect(await queue?.getJobCounts()).toEqual(counts);
    // What stays allowed on a writable dashboard: reading the job.
    expect((await http(writable.url, job)).status).toBe(200);
  });

  it('a read-only dashboard answers pause and resume of every queue with 405, and pauses nothing', async () => {
    const queue = r.replica.cleaners[0]?.queue.bullQueue;
    for (const action of ['pause', 'resume']) {
      const res = await http(readOnly.url, `/ui/api/queues/${action}`, { method: 'PUT' });
      expect(res.status, action).toBe(405);
      expect(res.text, action).toMatch(/read-only/);
    }
    expect((await http(readOnly.url, `${queuePath()}/pause`, { method: 'PUT' })).status).toBe(405);
    expect(await queue?.isPaused()).toBe(false);
  });
});

describe('headers and client errors', () => {
  it('/ui and its API forbid framing: X-Frame-Options DENY and a CSP with frame-ancestors none', async () => {
    for (const path of ['/ui', '/ui/api/queues']) {
      const res = await http(r.http.url, path, { auth: AUTH });
      expect(res.status, path).toBe(200);
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('content-security-policy'), path).toMatch(/frame-ancestors 'none'/);
    }
  });

  it('200 malformed requests from a client without credentials → answered 4xx, no warn line (client errors are logged at debug)', async () => {
    const linesBefore = r.logs.lines.length;
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) {
      for (const base of [writable.url, r.http.url]) {
        const res = await fetch(new URL(`/ui/api/queues/pause?i=${i}`, base), {
          method: 'PUT',
          headers: { 'content-type': 'application/json' },
          body: '{"not json',
        });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    }
    expect(statuses.every((s) => s >= 400 && s < 500)).toBe(true);
    const warned = r.logs.lines
      .slice(linesBefore)
      .filter((l) => l.level === 'warn' && String(l.msg).startsWith('http'));
    expect(warned).toEqual([]);
    expect(r.logs.lines.some((l) => l.level === 'debug' && l.msg === 'http client error')).toBe(true);
  });
});

/** A request from a chosen local address (127.0.0.x: all loopback on Linux), as another client. */
function requestFrom(
  localAddress: string,
  base: string,
  path: string,
  auth?: string,
): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        localAddress,
        headers: auth ? { authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {},
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: res.headers['retry-after'] as string | undefined,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('failed logins', () => {
  it(`are logged with the client address (sampled) and, after ${AUTH_FAILURES_ALLOWED} from one address, slowed for that address alone (429 with Retry-After); a success resets it`, async () => {
    let now = 1_000_000;
    const logs: MemoryLog = memoryLogger('debug');
    const guarded = await startHttpServer({
      config: { ...r.config, dashboard: { readOnly: true, user: 'ops', password: 'right' } },
      replica: r.replica,
      log: logs.log,
      monotonicNow: () => now,
    });
    try {
      const one = (auth?: string) => requestFrom('127.0.0.1', guarded.url, '/api/v1/leaders', auth);
      expect((await one()).status).toBe(401); // no credentials: a challenge, not a failed attempt
      for (let i = 0; i < AUTH_FAILURES_ALLOWED; i++) expect((await one(`ops:guess-${i}`)).status).toBe(401);
      // One more failure starts the backoff; meanwhile every request of that address is refused unchecked.
      expect((await one('ops:guess-x')).status).toBe(401);
      const blocked = await one('ops:right');
      expect(blocked).toEqual({ status: 429, retryAfter: String(AUTH_BACKOFF_INITIAL_MS / 1000) });
      // Another client is not slowed by it.
      expect((await requestFrom('127.0.0.2', guarded.url, '/api/v1/leaders', 'ops:right')).status).toBe(200);
      // Probes and metrics stay open to the slowed address.
      expect((await one()).status).toBe(429);
      expect((await requestFrom('127.0.0.1', guarded.url, '/healthz')).status).toBe(200);
      now += AUTH_BACKOFF_INITIAL_MS;
      expect((await one('ops:right')).status).toBe(200);
      // The success reset it: a mistake is a plain 401 again.
      expect((await one('ops:typo')).status).toBe(401);
      expect((await one('ops:right')).status).toBe(200);

      const lines = logs.lines.filter((l) => l.msg === 'http authentication failed');
      // Sampled: the first failure of the address and the one that started the backoff, not all 13.
      expect(lines.map((l) => [l.level, l.client, l.failures])).toEqual([
        ['warn', '127.0.0.1', 1],
        ['warn', '127.0.0.1', AUTH_FAILURES_ALLOWED + 1],
        ['warn', '127.0.0.1', 1],
      ]);
      expect(lines[1]).toMatchObject({ blockedForMs: AUTH_BACKOFF_INITIAL_MS, path: '/api/v1/leaders' });
      expect(JSON.stringify(logs.lines)).not.toMatch(/guess|right|typo/);
    } finally {
      await guarded.close();
    }
  });
});

describe('/api/v1/explain', () => {
  it('answers only for the driver pods the label selector selects: another pod of a target namespace reads as unknown, no uid or phase', async () => {
    const server = env.servers.alpha;
    if (!server) throw new Error('no sandbox server');
    const executor = sparkDriverPod({
      namespace: NS,
      appName: 'exec-1',
      phase: 'Succeeded',
      nowMs: Date.now(),
    });
    if (executor.metadata?.labels) executor.metadata.labels['spark-role'] = 'executor';
    const other = server.pods.create(executor);
    const ask = (name: string) => http(r.http.url, `/api/v1/explain/${NS}/${name}`, { auth: AUTH });
    const [unselected, absent, driver] = [
      await ask(nameOf(other)),
      await ask('no-such-pod'),
      await ask(nameOf(pending)),
    ];
    expect(unselected.status).toBe(404);
    expect(unselected.text).not.toContain(uidOf(other));
    expect(unselected.text).not.toContain('Succeeded');
    // The same answer as for a pod that does not exist: nothing says which of the two it is.
    expect(absent.status).toBe(404);
    expect(unselected.json()).toEqual({
      error: (absent.json() as { error: string }).error.replace('no-such-pod', nameOf(other)),
    });
    expect(driver.status).toBe(200);
    expect(driver.json()).toMatchObject({ kind: 'pending', uid: uidOf(pending) });
  });
});
