/**
 * The failover timers (src/failover-timers.ts) and their table in docs/how-it-works.md ("Failover timers")
 * agree: every timer has its row, every fixed value is the one the row states, and the lease-derived timers
 * follow the formulas the rows give.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { selfCheckSettings } from '../../src/cleaner/self-check.ts';
import { FAILOVER_TIMERS, leaseTimers, sessionValidMs } from '../../src/failover-timers.ts';

/** The rows of the docs' table: timer name (without `Ms`) → stated value. */
function documentedRows(): Map<string, string> {
  const doc = readFileSync(new URL('../../docs/how-it-works.md', import.meta.url), 'utf8');
  const section = doc.split('## Failover timers')[1]?.split('\n## ')[0] ?? '';
  const rows = new Map<string, string>();
  for (const line of section.split('\n')) {
    const m = /^\| `(\w+)` \| ([^|]+) \|/.exec(line);
    if (m?.[1] && m[2]) rows.set(m[1], m[2].trim());
  }
  return rows;
}

/** A duration as the docs write it: `500 ms`, `10 s`. */
const asDoc = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

describe('failover timers', () => {
  const rows = documentedRows();

  it('the docs list every fixed timer with the value the code uses', () => {
    const stated = Object.keys(FAILOVER_TIMERS).map((k) => [
      k.replace(/Ms$/, ''),
      rows.get(k.replace(/Ms$/, '')),
    ]);
    const expected = Object.entries(FAILOVER_TIMERS).map(([k, ms]) => [k.replace(/Ms$/, ''), asDoc(ms)]);
    expect(stated).toEqual(expected);
  });

  it('the docs list every lease-derived timer', () => {
    const names = Object.keys(leaseTimers(10)).map((k) => k.replace(/Ms$/, ''));
    expect(names.filter((n) => !rows.has(n))).toEqual([]);
    expect(rows.get('fenceAfter')).toBe('TTL − min(1 s, TTL/5)');
    expect(rows.get('overdueGrace')).toBe('2 × TTL + 30 s');
  });

  it('lease-derived timers follow their formulas', () => {
    expect(leaseTimers(10)).toEqual({
      ttlMs: 10_000,
      fenceAfterMs: 9_000,
      fallbackMs: 10_000,
      overdueGraceMs: 50_000,
      leaderStuckMs: 50_000,
      followerAlarmMs: 100_000,
    });
    // A short session keeps a fifth of itself as the margin, not 1 s.
    expect(sessionValidMs(2_000)).toBe(1_600);
    expect(leaseTimers(3, 4_000)).toMatchObject({ overdueGraceMs: 4_000, followerAlarmMs: 8_000 });
  });

  it('the self-check takes its thresholds from the table', () => {
    expect(selfCheckSettings(10)).toEqual({
      graceMs: 50_000,
      leaderStuckMs: 50_000,
      followerAlarmMs: 100_000,
      intervalMs: FAILOVER_TIMERS.selfCheckIntervalMs,
    });
  });

  it('an informer that has not listed is warned about before a 30 s wait', () => {
    expect(FAILOVER_TIMERS.informerSyncWarnMs).toBeLessThan(30_000);
  });
});
