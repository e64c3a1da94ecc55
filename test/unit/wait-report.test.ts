/**
 * The figures behind the tests' bounds (harness/wait-log.ts, harness/commands/wait-report.ts): waits grouped by
 * call site, the longest that ended in time against the bound, loosest bound first; and the bounds of the
 * end-to-end tests (test/helpers/bounds.ts): the margin times the figure, the floor, the configured part.
 */
import { describe, expect, it } from 'vitest';
import { waitSites } from '../../harness/commands/wait-report.ts';
import type { WaitRecord } from '../../harness/wait-log.ts';
import { boundMs, FLOOR_MS, MARGIN } from '../helpers/bounds.ts';

const rec = (at: string, elapsedMs: number, timeoutMs: number, ok = true): WaitRecord => ({
  at,
  what: 'x',
  elapsedMs,
  timeoutMs,
  ok,
});

describe('wait-report', () => {
  it('per call site: the longest wait in time, the bound, the waits that ran out; loosest first', () => {
    const sites = waitSites([
      rec('test/e2e/a.test.ts:10', 1000, 30_000),
      rec('test/e2e/a.test.ts:10', 3000, 30_000),
      rec('test/e2e/a.test.ts:10', 30_000, 30_000, false),
      rec('test/e2e/b.test.ts:5', 100, 60_000),
      rec('test/unit/c.test.ts:1', 10, 1000),
    ]);
    expect(sites.map((s) => s.at)).toEqual([
      'test/e2e/b.test.ts:5',
      'test/unit/c.test.ts:1',
      'test/e2e/a.test.ts:10',
    ]);
    expect(sites[2]).toEqual({
      at: 'test/e2e/a.test.ts:10',
      waits: 3,
      longestMs: 3000,
      boundMs: 30_000,
      ranOut: 1,
    });
  });

  it('keeps the call sites under a folder', () => {
    const sites = waitSites(
      [rec('test/e2e/a.test.ts:10', 1, 2), rec('test/unit/c.test.ts:1', 1, 2)],
      'test/e2e',
    );
    expect(sites.map((s) => s.at)).toEqual(['test/e2e/a.test.ts:10']);
  });
});

describe('end-to-end bounds', () => {
  it('the margin times the figure, rounded up to a second, at least the floor, plus the configured part', () => {
    expect(MARGIN).toBe(3);
    expect(boundMs(100)).toBe(FLOOR_MS);
    expect(boundMs(4_100)).toBe(13_000);
    expect(boundMs(4_100, 30_000)).toBe(43_000);
  });
});
