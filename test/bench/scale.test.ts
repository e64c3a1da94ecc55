/**
 * The scale benchmark at its smallest size, run exactly as bench/README.md shows it:
 * `npm run bench -- --quick --only scale --name scale-quick` (4 targets × 2 replicas) writes
 * `bench/results/scale-quick.json` and its report in `bench/results/scale-quick/`; whatever was there is set
 * aside and put back. Every figure of the scale table must be there. Times are not asserted (they are
 * figures for the report); the counts that are product guarantees are: one DELETE per pod, none leaked,
 * every target led.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createMemoryCgroup, deploymentMemoryLimitBytes } from '../../bench/memory-cgroup.ts';
import type { BenchResults } from '../../bench/results.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const OUTPUTS = [join(ROOT, 'bench/results/scale-quick.json'), join(ROOT, 'bench/results/scale-quick')];
const CLUSTER_OUTPUTS = [
  join(ROOT, 'bench/results/scale-quick-cluster.json'),
  join(ROOT, 'bench/results/scale-quick-cluster'),
];
const DEPLOYED_OUTPUTS = [
  join(ROOT, 'bench/results/scale-quick-deployed.json'),
  join(ROOT, 'bench/results/scale-quick-deployed'),
];
const aside = (path: string) => `${path}.before-test-${process.pid}`;

beforeAll(() => {
  for (const p of [...OUTPUTS, ...CLUSTER_OUTPUTS, ...DEPLOYED_OUTPUTS])
    if (existsSync(p)) renameSync(p, aside(p));
});
afterAll(() => {
  for (const p of [...OUTPUTS, ...CLUSTER_OUTPUTS, ...DEPLOYED_OUTPUTS]) {
    rmSync(p, { recursive: true, force: true });
    if (existsSync(aside(p))) renameSync(aside(p), p);
  }
});

const count = expect.any(Number);

/** Runs `command` in a shell from the checkout's root; resolves with its exit code and stderr. */
async function sh(command: string): Promise<{ code: number | null; stderr: string }> {
  const child = spawn('bash', ['-c', command], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stderr };
}

it('npm run bench -- --quick --only scale --name scale-quick (as bench/README.md shows it) writes every scale figure and the report table', async () => {
  const { code, stderr } = await sh('npm run bench -- --quick --only scale --name scale-quick');
  expect(code, stderr).toBe(0);
  const [json = '', reportDir = ''] = OUTPUTS;

  const r = JSON.parse(readFileSync(json, 'utf8')) as BenchResults;
  expect(r).toMatchObject({ schema: 1, name: 'scale-quick', quick: true });
  expect(Object.keys(r.benchmarks)).toEqual(['scale']);
  const runs = r.benchmarks.scale?.runs ?? [];
  expect(runs.map((x) => `${x.targets}x${x.replicas}`)).toEqual(['4x2']);
  const [run] = runs;
  if (!run) throw new Error('no scale run');

  // Every figure of the scale table is there.
  expect(run.redis.clientsAfterStart).toBeGreaterThan(0);
  expect(run.redis.clientsIdle).toBeGreaterThan(0);
  expect(Object.values(run.redis.clientsByName).reduce((a, b) => a + b, 0)).toBe(run.redis.clientsIdle);
  expect(run.redis.commandsPerSecondIdle).toBeGreaterThan(0);
  expect(run.redis.commandsPerSecondIdlePerTarget).toBeCloseTo(run.redis.commandsPerSecondIdle / 4, 1);
  expect(run.etcd.leases).toBeGreaterThanOrEqual(2); // at least one per replica
  expect(run.etcd.keepalivesPerSecond).toBeGreaterThan(0);
  expect(run.etcd).toMatchObject({ watchers: count, watchStreams: count });
  expect(run.api.listsAtStart).toBeGreaterThanOrEqual(2); // each replica lists at least once
  expect(run.api.watchesAtStart).toBeGreaterThanOrEqual(2);
  expect(run.api.openWatchesIdle).toBeGreaterThanOrEqual(2);
  expect(Object.keys(run.rssMiB)).toHaveLength(2);
  expect(run.rssMinMiB).toBeGreaterThan(0);
  expect(run.rssMaxMiB).toBeGreaterThanOrEqual(run.rssMinMiB);
  expect(run.allLedAfterMs).toEqual(count);
  expect(run.allLedAfterReadyMs).toEqual(count);

  // Spreads: every target led by a live replica; the restarted and the added replica are among them.
  const { start, afterRestart, afterAdd } = run.spread;
  for (const s of [start, afterRestart, afterAdd]) {
    expect(s.unled).toBe(0);
    expect(s.fairShare).toBe(Math.ceil(4 / Object.keys(s.perReplica).length));
    expect(Object.values(s.perReplica).reduce((a, b) => a + b, 0) + s.other).toBe(4);
    expect(s.spread).toBeGreaterThan(0);
    // The balance: no replica leads more than its fair share + 1 once the start has settled.
    expect(Math.max(...Object.values(s.perReplica))).toBeLessThanOrEqual(s.fairShare + 1);
  }
  expect(Object.keys(start.perReplica)).toHaveLength(2);
  expect(Object.keys(afterRestart.perReplica)).toContain(afterRestart.restarted);
  expect(Object.keys(afterRestart.perReplica)).toHaveLength(2);
  expect(Object.keys(afterAdd.perReplica)).toContain(afterAdd.added);
  expect(Object.keys(afterAdd.perReplica)).toHaveLength(3);
  expect(afterRestart.restartedLeads).toEqual(count);
  expect(afterAdd.addedLeads).toEqual(count);

  // Lateness with pods due across every target: one DELETE each, none left.
  expect(run.lateness).toMatchObject({ pods: 8, undeleted: 0, deletesPerPod: 1, leaked: 0 });
  for (const ms of [run.lateness.p50Ms, run.lateness.p99Ms, run.lateness.maxMs])
    expect(Number.isFinite(ms)).toBe(true);

  const report = readFileSync(join(reportDir, 'REPORT.md'), 'utf8');
  expect(report).toContain('## Scale');
  expect(report).toContain('| | 4 targets × 2 replicas |');
  for (const row of [
    'leaderships per replica when all were first led',
    'leaderships per replica 2 × TTL after start',
    'Redis clients after start / idle',
    'Redis commands/s while idle',
    'etcd leases',
    'etcd keepalives/s',
    'API LISTs / WATCHes at start',
    'replica RSS',
    'ready → every target led',
    'DELETE lateness p50 / p99 / max',
  ])
    expect(report).toContain(`| ${row}`);
}, 300_000);

it("--scale-scope cluster (the soak's scope at 1,000 targets): one watch per replica, whatever the targets", async () => {
  const { code, stderr } = await sh(
    'npm run bench -- --quick --only scale --scale-scope cluster --name scale-quick-cluster',
  );
  expect(code, stderr).toBe(0);
  const [json = '', reportDir = ''] = CLUSTER_OUTPUTS;
  const r = JSON.parse(readFileSync(json, 'utf8')) as BenchResults;
  expect(r.benchmarks.scale?.config.informerScope).toBe('cluster');
  const [run] = r.benchmarks.scale?.runs ?? [];
  if (!run) throw new Error('no scale run');
  // 4 targets × 2 replicas: 8 watches in namespace scope, 2 in cluster scope.
  expect(run.api.openWatchesIdle).toBe(2);
  expect(run.api.listsAtStart).toBe(2);
  expect(run.lateness).toMatchObject({ pods: 8, undeleted: 0, deletesPerPod: 1, leaked: 0 });
  for (const s of [run.spread.start, run.spread.afterRestart, run.spread.afterAdd]) expect(s.unled).toBe(0);
  expect(readFileSync(join(reportDir, 'REPORT.md'), 'utf8')).toContain('informer scope cluster');
}, 300_000);

it("--scale-as-deployed: replicas run compiled, each in a memory cgroup with the Deployment's limit", async () => {
  const { code, stderr } = await sh(
    'npm run bench -- --quick --only scale --scale-as-deployed --name scale-quick-deployed',
  );
  expect(code, stderr).toBe(0);
  const [json = '', reportDir = ''] = DEPLOYED_OUTPUTS;
  const r = JSON.parse(readFileSync(json, 'utf8')) as BenchResults;
  expect(r.benchmarks.scale?.config.asDeployed).toBe(true);
  const [run] = r.benchmarks.scale?.runs ?? [];
  if (!run) throw new Error('no scale run');
  expect(run.build).toBe('compiled');
  // Where this process may make cgroups (root on cgroup v2 here), each replica ran under the Deployment's limit.
  const probe = createMemoryCgroup(`sdc-scale-test-${process.pid}`, deploymentMemoryLimitBytes());
  probe?.remove();
  expect(run.memoryLimitMiB).toBe(probe ? Math.round(deploymentMemoryLimitBytes() / 2 ** 20) : null);
  expect(run.replicasInCgroup).toBe(probe ? run.replicas : 0);
  expect(run.lateness).toMatchObject({ pods: 8, undeleted: 0, deletesPerPod: 1, leaked: 0 });
  expect(readFileSync(join(reportDir, 'REPORT.md'), 'utf8')).toMatch(
    /replica RSS \| [\d.]+–[\d.]+ MiB \(compiled, /,
  );
}, 300_000);
