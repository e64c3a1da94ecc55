/**
 * CI smoke of the benchmarks, run exactly as bench/README.md shows it: `npm run bench -- --quick` from the
 * repository root runs every benchmark at small sizes (real Redis, etcd, sandbox API server, replica
 * processes) and writes `bench/results/quick.json` and its report in `bench/results/quick/` (the directory a
 * fresh clone lacks). Whatever was there before is set aside and put back afterwards. Timing targets are not
 * asserted here (they are figures for the report); counts that are product guarantees are: one DELETE per
 * pod coordinated, N for the baseline.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { BenchResults } from '../../bench/results.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** What bench/README.md's quick run writes. */
const OUTPUTS = [join(ROOT, 'bench/results/quick.json'), join(ROOT, 'bench/results/quick')];
const aside = (path: string) => `${path}.before-test-${process.pid}`;

beforeAll(() => {
  for (const p of OUTPUTS) if (existsSync(p)) renameSync(p, aside(p));
});
afterAll(() => {
  for (const p of OUTPUTS) {
    rmSync(p, { recursive: true, force: true });
    if (existsSync(aside(p))) renameSync(aside(p), p);
  }
});

it('npm run bench -- --quick (as bench/README.md shows it) writes every benchmark’s figures, the machine facts and a report', async () => {
  const child = spawn('bash', ['-c', 'npm run bench -- --quick'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect(code, stderr).toBe(0);
  const [json = '', reportDir = ''] = OUTPUTS;

  const r = JSON.parse(readFileSync(json, 'utf8')) as BenchResults;
  expect(r).toMatchObject({ schema: 1, name: 'quick', quick: true });
  expect(r.machine.cores).toBeGreaterThan(0);
  expect(r.machine.node).toMatch(/^v\d+/);
  expect(r.machine.loadAverageAtStart).toHaveLength(3);
  expect(Object.keys(r.benchmarks).sort()).toEqual(
    ['apiRate', 'burst', 'cost', 'deletesPerPod', 'failover', 'lateness', 'scale'].sort(),
  );
  const { deletesPerPod, failover, lateness, burst, apiRate, cost } = r.benchmarks;
  for (const run of deletesPerPod?.runs ?? []) {
    expect(run.leaked).toBe(0);
    expect(run.deletesPerPod).toBe(run.mode === 'coordinated' ? 1 : run.replicas);
  }
  expect(deletesPerPod?.runs.map((x) => `${x.mode}/${x.recheck}`)).toEqual([
    'coordinated/resource-version',
    'baseline/none',
    'coordinated/live',
    'coordinated/cache',
  ]);
  expect(failover?.trials.map((t) => t.signal)).toEqual(['SIGKILL', 'SIGTERM']);
  for (const t of failover?.trials ?? []) expect(t.firstDeleteAfterMs).toEqual(expect.any(Number));
  // The frozen leader held all 40 jobs; the new leader took every one and deleted each pod once.
  expect(failover?.frozen?.trials.map((t) => [t.tookOver, t.deleteRequests, t.acceptedDeletes])).toEqual([
    [40, 40, 40],
  ]);
  for (const run of lateness?.runs ?? []) {
    expect(run.serverLatenessMs).toHaveLength(lateness?.config.pods ?? -1);
    expect(run.leaked).toBe(0);
  }
  expect(burst?.raw.deletesPerSecond).toBeGreaterThan(0);
  for (const run of burst?.runs ?? []) expect(run.podsPerSecond).toBeGreaterThan(0);
  expect(apiRate?.achievedQps).toBeGreaterThan(0);
  expect(cost?.maxCoordinatedRssMiB).toBeGreaterThan(0);
  expect(cost?.redisBytesPerPendingJob).toBeGreaterThan(0);
  expect(readFileSync(join(reportDir, 'REPORT.md'), 'utf8')).toContain('## Targets');
  expect(existsSync(join(reportDir, 'deletes-per-pod.svg'))).toBe(true);
}, 300_000);
