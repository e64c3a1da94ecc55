/**
 * The benchmark report's pure parts: percentiles, axis scaling, the targets table (a missed target is
 * reported as missed, never hidden) and the rendered Markdown and SVG files.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { percentile } from '../../bench/harness.ts';
import { latenessStats } from '../../bench/lateness.ts';
import { renderReport, targetRows } from '../../bench/report.ts';
import type { BenchResults } from '../../bench/results.ts';
import { niceScale } from '../../bench/svg-chart.ts';

describe('percentile (nearest rank)', () => {
  it.each([
    { name: 'empty list → NaN', xs: [], p: 50, want: Number.NaN },
    { name: 'one value → that value at any p', xs: [7], p: 99, want: 7 },
    { name: '1..100, p50 → 50', xs: Array.from({ length: 100 }, (_, i) => i + 1), p: 50, want: 50 },
    { name: '1..100, p99 → 99', xs: Array.from({ length: 100 }, (_, i) => i + 1), p: 99, want: 99 },
    { name: 'unsorted input, p100 → the max', xs: [5, 1, 9, 3], p: 100, want: 9 },
    { name: 'p0 → the min', xs: [5, 1, 9, 3], p: 0, want: 1 },
  ])('$name', ({ xs, p, want }) => {
    expect(percentile(xs, p)).toBe(want);
  });
});

describe('niceScale', () => {
  it.each([
    { name: 'max 10 → top 10, step 2', max: 10, top: 10, step: 2 },
    { name: 'max 3.3 → top 4, step 1', max: 3.3, top: 4, step: 1 },
    { name: 'max 0 → a unit axis', max: 0, top: 1, step: 0.2 },
  ])('$name', ({ max, top, step }) => {
    expect(niceScale(max)).toEqual({ top, step });
  });
});

function results(): BenchResults {
  const run = (mode: 'coordinated' | 'baseline', replicas: number, deletesPerPod: number) => ({
    mode,
    recheck: mode === 'baseline' ? ('none' as const) : ('live' as const),
    replicas,
    pods: 10,
    leaked: 0,
    deleteRequests: deletesPerPod * 10,
    deletesPerPod,
    deletesPerPodHistogram: { [deletesPerPod]: 10 },
    deleteCodes: { 200: 10 },
    getRequests: mode === 'baseline' ? 0 : 10,
    apiRequestsPerPod: deletesPerPod + (mode === 'baseline' ? 0 : 1),
    requestsByVerb: {},
    redisCommands: 0,
    redisCommandsPerPodPerReplica: 0,
    redisCommandsByName: {},
    durationMs: 1000,
    warnLines: 0,
  });
  const late = [100, 200, 1500];
  return {
    schema: 1,
    name: 'unit',
    quick: true,
    machine: {
      date: '2026-01-01T00:00:00.000Z',
      cores: 2,
      cpuModel: 'test cpu',
      memoryMiB: 1024,
      freeMemoryMiB: 512,
      node: 'v24.0.0',
      platform: 'linux',
      redis: '7.0.15',
      etcd: '3.4.23',
      loadAverageAtStart: [0.5, 0.5, 0.5],
      loadAverageAtEnd: [0.6, 0.5, 0.5],
    },
    benchmarks: {
      deletesPerPod: {
        config: { replicaCounts: [3], pods: 10, otherRecheckModes: [], apiQps: 200, retention: '1s' },
        runs: [run('coordinated', 3, 1), run('baseline', 3, 3)],
      },
      lateness: {
        config: { replicas: 3, pods: 3, windowMs: 3000, rechecks: ['cache'], retention: '600s' },
        runs: [
          {
            recheck: 'cache',
            apiQps: 20,
            apiBurst: 30,
            serverLatenessMs: late,
            loggedLatenessMs: late,
            server: latenessStats(late),
            logged: latenessStats(late),
            deleteRequests: 3,
            leaked: 0,
            drainMs: 3000,
          },
        ],
      },
    },
    durationMs: 5000,
  };
}

describe('report', () => {
  it('coordinated 1.00 DELETE/pod is met; a lateness p99 of 1500 ms is reported as missed', () => {
    const rows = targetRows(results());
    expect(rows.find((r) => r.what.includes('coordinated, live, 3 replica'))).toMatchObject({
      measured: '1.00',
      met: true,
    });
    expect(rows.find((r) => r.what.includes('baseline, 3 replica'))).toMatchObject({
      measured: '3.00',
      met: undefined,
    });
    expect(rows.find((r) => r.what.startsWith('Lateness'))).toMatchObject({
      measured: 'p50 200 ms, p99 1500 ms',
      met: false,
    });
  });

  it('renders REPORT.md with the machine and the missed target, and one SVG per chart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sdc-report-'));
    renderReport(results(), dir, join(dir, 'unit.json'));
    const md = readFileSync(join(dir, 'REPORT.md'), 'utf8');
    expect(md).toContain('| CPU | 2 × test cpu |');
    expect(md).toContain('1 target(s) missed');
    expect(md).toContain('![DELETE requests per pod](deletes-per-pod.svg)');
    expect(
      readdirSync(dir)
        .filter((f) => f.endsWith('.svg'))
        .sort(),
    ).toEqual(['deletes-per-pod.svg', 'lateness.svg']);
    const svg = readFileSync(join(dir, 'deletes-per-pod.svg'), 'utf8');
    expect(svg).toMatch(/^<svg [^>]*role="img"/);
    expect(svg).toContain('<title id="title">DELETE requests per terminated driver pod</title>');
    expect(svg.trim().endsWith('</svg>')).toBe(true);
  });

  it('creates its directory: a quick run reports into bench/results/quick/, which a fresh clone lacks', () => {
    const results_ = join(mkdtempSync(join(tmpdir(), 'sdc-report-')), 'results');
    const dir = join(results_, 'quick');
    renderReport(results(), dir, join(results_, 'quick.json'));
    expect(readdirSync(dir).sort()).toEqual(['REPORT.md', 'deletes-per-pod.svg', 'lateness.svg']);
  });
});
