/**
 * CI smoke of the benchmarks: `spark-driver-cleaner bench --quick --out <tmp>` runs every benchmark at
 * small sizes (real Redis, etcd, sandbox API server, replica processes) and writes a results file of the
 * documented shape and a report. Timing targets are not asserted here (they are figures for the
 * report); counts that are product guarantees are: one DELETE per pod coordinated, N for the baseline.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import type { BenchResults } from '../../bench/results.ts';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

it('bench --quick writes every benchmark’s figures, the machine facts and a report', async () => {
  const out = mkdtempSync(join(tmpdir(), 'sdc-bench-'));
  const child = spawn(process.execPath, [CLI, 'bench', '--quick', '--name', 'smoke', '--out', out], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect(code, stderr).toBe(0);

  const r = JSON.parse(readFileSync(join(out, 'smoke.json'), 'utf8')) as BenchResults;
  expect(r).toMatchObject({ schema: 1, name: 'smoke', quick: true });
  expect(r.machine.cores).toBeGreaterThan(0);
  expect(r.machine.node).toMatch(/^v\d+/);
  expect(r.machine.loadAverageAtStart).toHaveLength(3);
  expect(Object.keys(r.benchmarks).sort()).toEqual(
    ['apiRate', 'burst', 'cost', 'deletesPerPod', 'failover', 'lateness'].sort(),
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
  for (const run of lateness?.runs ?? []) {
    expect(run.serverLatenessMs).toHaveLength(lateness?.config.pods ?? -1);
    expect(run.leaked).toBe(0);
  }
  expect(burst?.raw.deletesPerSecond).toBeGreaterThan(0);
  for (const run of burst?.runs ?? []) expect(run.podsPerSecond).toBeGreaterThan(0);
  expect(apiRate?.achievedQps).toBeGreaterThan(0);
  expect(cost?.maxCoordinatedRssMiB).toBeGreaterThan(0);
  expect(cost?.redisBytesPerPendingJob).toBeGreaterThan(0);
  expect(readFileSync(join(out, 'REPORT.md'), 'utf8')).toContain('## Targets');
  expect(existsSync(join(out, 'deletes-per-pod.svg'))).toBe(true);
}, 300_000);
