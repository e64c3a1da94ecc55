/**
 * `spark-driver-cleaner demo` end to end, as a user runs it: a child process of the CLI that starts its own
 * redis-server, etcd, sandbox API servers and replica processes. Asserts on its JSON summary, its exit
 * code, and that none of the processes it started outlives it (descendants found through /proc).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HARNESS_CLI_PATH } from '../../harness/sandbox/replica-process.ts';
import { boundMs } from '../helpers/bounds.ts';
import { waitFor } from '../helpers/wait.ts';

interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  state: string;
}

/** Every process in /proc: `pid (comm) state ppid …` (comm may contain spaces and parentheses). */
function processTable(): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const [state = '', ppid = '0'] = stat.slice(close + 2).split(' ');
      out.push({
        pid: Number(name),
        ppid: Number(ppid),
        comm: stat.slice(stat.indexOf('(') + 1, close),
        state,
      });
    } catch {
      // exited while we read
    }
  }
  return out;
}

function descendants(root: number): Proc[] {
  const table = processTable();
  const found: Proc[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const parent = queue.shift();
    for (const p of table.filter((x) => x.ppid === parent)) {
      found.push(p);
      queue.push(p.pid);
    }
  }
  return found;
}

/** Still running: present and not a zombie (pids are not reused within a test's few seconds). */
function stillRunning(p: Proc): boolean {
  const now = processTable().find((x) => x.pid === p.pid);
  return now !== undefined && now.state !== 'Z';
}

interface DemoRun {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Every descendant seen while it ran, by pid. */
  seen: Map<number, Proc>;
  exited: Promise<number | string>;
}

function startDemo(args: string[]): DemoRun {
  const env = { ...process.env };
  // The demo must start its own Redis and etcd or ZooKeeper here.
  delete env.REDIS_URL;
  delete env.ETCD_ENDPOINTS;
  delete env.ZOOKEEPER;
  const child = spawn(process.execPath, [HARNESS_CLI_PATH, 'demo', ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const seen = new Map<number, Proc>();
  const sample = () => {
    // Keep the latest view: a child is still `node` between fork and exec of redis-server or etcd.
    if (child.pid) for (const p of descendants(child.pid)) seen.set(p.pid, p);
  };
  const timer = setInterval(sample, 200);
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      clearInterval(timer);
      resolve(code ?? signal ?? -1);
    });
  });
  return { child, stdout: () => out, stderr: () => err, seen, exited };
}

function parseSummary(run: DemoRun) {
  const text = run.stdout().trim();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(
      `stdout is not one JSON object: ${text.slice(0, 500)}\nstderr: ${run.stderr().slice(-2000)}`,
    );
  }
}

function expectNoSurvivors(run: DemoRun) {
  const kinds = [...run.seen.values()].map((p) => p.comm);
  const survivors = [...run.seen.values()].filter(stillRunning);
  expect(survivors, `still running after the demo exited: ${JSON.stringify(survivors)}`).toEqual([]);
  return kinds;
}

/** The README's `npm run demo -- --leadership zookeeper` at its smallest size. */
const ZOOKEEPER_DEMO = ['--leadership', 'zookeeper', '--pods', '20', '--replicas', '2', '--json'];

describe('spark-driver-cleaner demo', () => {
  it(
    '--pods 60 --replicas 3 --retention 2s --json: every driver deleted once, nothing left running',
    async () => {
      const run = startDemo(['--pods', '60', '--replicas', '3', '--retention', '2s', '--json']);
      const code = await run.exited;
      const s = parseSummary(run);
      expect(code, run.stderr().slice(-2000)).toBe(0);
      expect(s).toMatchObject({
        replicas: 3,
        pods_created: 60,
        pods_terminated: 60,
        pods_deleted: 60,
        pods_leaked: 0,
        // The cleaner's own self-check agrees with the ground truth: nothing overdue at the end.
        overdue_pods_reported: 0,
        delete_requests: 60,
        delete_requests_per_pod: { max: 1, mean: 1 },
        failed_outcomes: 0,
        failovers: 0,
      });
      expect(s.targets).toEqual([
        'cluster-a:spark-etl',
        'cluster-a:spark-adhoc',
        'cluster-b:spark-ml',
        'cluster-b:spark-reports',
      ]);
      expect(Object.keys(s.leaders).sort()).toEqual([...s.targets].sort());
      for (const leader of Object.values(s.leaders)) expect(leader).toMatch(/^replica-[123]$/);
      // Each replica's URL is printed at start.
      expect(run.stderr().match(/replica-\d \(pid \d+\) {2}http:\/\/127\.0\.0\.1:\d+/g)).toHaveLength(3);
      const kinds = expectNoSurvivors(run);
      expect(kinds).toEqual(expect.arrayContaining(['redis-server', 'etcd']));
      expect(run.seen.size).toBeGreaterThanOrEqual(5);
    },
    // The whole run: measured ≤ 16.1 s.
    boundMs(16_100),
  );

  it(
    '--leadership zookeeper --pods 20 --replicas 2: leaders elected on a launched ZooKeeper, every driver deleted once, nothing left running',
    async () => {
      const logDir = mkdtempSync(join(tmpdir(), 'sdc-demo-zk-'));
      const run = startDemo([...ZOOKEEPER_DEMO, '--log-dir', logDir]);
      const code = await run.exited;
      const s = parseSummary(run);
      expect(code, run.stderr().slice(-2000)).toBe(0);
      expect(s).toMatchObject({
        replicas: 2,
        pods_terminated: 20,
        pods_deleted: 20,
        pods_leaked: 0,
        delete_requests: 20,
        delete_requests_per_pod: { max: 1, mean: 1 },
      });
      expect(Object.keys(s.leaders).sort()).toEqual([...s.targets].sort());
      expect(run.stderr()).toMatch(/demo: started .*zookeeper 127\.0\.0\.1:\d+/);
      const kinds = expectNoSurvivors(run);
      // ZooKeeper (a JVM) instead of etcd.
      expect(kinds).toEqual(expect.arrayContaining(['redis-server', 'java']));
      expect(kinds).not.toContain('etcd');
      // Each replica held a ZooKeeper session (not single-server mode).
      for (const replica of ['replica-1', 'replica-2']) {
        const lines = readFileSync(join(logDir, 'coordinated', `${replica}.log`), 'utf8');
        expect(lines, replica).toContain('"msg":"zookeeper session connected"');
      }
      rmSync(logDir, { recursive: true, force: true });
    },
    // The whole run: measured ≤ 15 s.
    boundMs(15_000),
  );

  it(
    '--kill-leader-at: the leader is SIGKILLed mid-run, another takes over, no pod gets a second DELETE',
    async () => {
      const run = startDemo(['--pods', '60', '--retention', '2s', '--kill-leader-at', '3', '--json']);
      const code = await run.exited;
      const s = parseSummary(run);
      expect(code, run.stderr().slice(-2000)).toBe(0);
      expect(s.failovers).toBeGreaterThanOrEqual(1);
      expect(s.delete_requests_per_pod.max).toBe(1);
      expect(s.pods_leaked).toBe(0);
      expect(s.pods_deleted).toBe(s.pods_terminated);
      expect(s.pods_terminated).toBe(60);
      const killed = /SIGKILL (replica-\d), the leader of (cluster-a:spark-etl)/.exec(run.stderr());
      expect(killed, run.stderr().slice(-2000)).not.toBeNull();
      // The killed replica leads nothing at the end.
      expect(Object.values(s.leaders)).not.toContain(killed?.[1]);
      expect(s.leaders['cluster-a:spark-etl']).toMatch(/^replica-\d$/);
      expectNoSurvivors(run);
    },
    // The whole run: measured ≤ 15 s.
    boundMs(15_000),
  );

  it(
    'SIGINT mid-run stops redis-server, etcd and every replica before the demo exits',
    async () => {
      const run = startDemo(['--pods', '5000', '--json']);
      await waitFor(
        'the three replicas printed their URLs',
        () => (run.stderr().match(/replica-\d \(pid \d+\)/g) ?? []).length === 3,
        // Redis, etcd, the API servers and three replicas started: measured ≤ 3.9 s.
        boundMs(3_900),
        200,
      );
      const tree = descendants(run.child.pid as number);
      expect(tree.map((p) => p.comm)).toEqual(expect.arrayContaining(['redis-server', 'etcd']));
      expect(tree.length).toBeGreaterThanOrEqual(5); // redis, etcd, three replicas
      for (const p of tree) run.seen.set(p.pid, p);
      run.child.kill('SIGINT');
      expect(await run.exited).toBe(130);
      expectNoSurvivors(run);
    },
    // The whole run: measured ≤ 4.2 s.
    boundMs(4_200),
  );

  it(
    '--baseline: every replica sends its own DELETE, so each pod gets as many as there are replicas',
    async () => {
      const run = startDemo(['--baseline', '--pods', '20', '--replicas', '3', '--retention', '1s', '--json']);
      const code = await run.exited;
      const s = parseSummary(run);
      expect(code, run.stderr().slice(-2000)).toBe(0);
      expect(s.pods_terminated).toBe(20);
      expect(s.pods_leaked).toBe(0);
      expect(s.delete_requests_per_pod.max).toBe(3);
      expect(s.delete_requests).toBe(3 * s.pods_terminated);
      // One replica wins each pod; the two others' 404s are logged as failures, as Kyuubi does.
      expect(s.failed_outcomes).toBe(2 * s.pods_terminated);
      expect(s.leaders).toEqual({});
      expectNoSurvivors(run);
    },
    // The whole run: measured ≤ 7.3 s.
    boundMs(7_300),
  );

  it('bad options exit with code 2 and name the option', async () => {
    const bad = startDemo(['--replicas', '0']);
    expect(await bad.exited).toBe(2);
    expect(bad.stderr()).toContain('--replicas');
    const both = startDemo(['--baseline', '--compare']);
    expect(await both.exited).toBe(2);
    expect(both.stderr()).toMatch(/--baseline and --compare/);
    expect(both.seen.size).toBe(0); // nothing was started
  }, 60_000);
});
