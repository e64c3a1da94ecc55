/**
 * The explain budget (src/http/request-budget.ts) on an injected monotonic clock: a burst, then the rate;
 * a bound on requests in flight; `Retry-After` in whole seconds, at least 1.
 */
import { describe, expect, it } from 'vitest';
import { createRequestBudget } from '../../src/http/request-budget.ts';

function budget(perSecond: number, burst: number, concurrency: number) {
  let now = 0;
  const b = createRequestBudget({ perSecond, burst, concurrency, monotonicNow: () => now });
  return {
    b,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('request budget', () => {
  it('burst 5, 1/s: 5 admitted at once, the 6th refused (Retry-After 1 s); one more after 1 s', () => {
    const { b, advance } = budget(1, 5, 100);
    const first = Array.from({ length: 6 }, () => b.tryAdmit());
    expect(first.map((a) => a.admitted)).toEqual([true, true, true, true, true, false]);
    expect(first[5]).toEqual({ admitted: false, retryAfterSeconds: 1 });
    advance(999);
    expect(b.tryAdmit().admitted).toBe(false);
    advance(1);
    expect(b.tryAdmit().admitted).toBe(true);
    expect(b.tryAdmit().admitted).toBe(false);
  });

  it('0.2/s, budget spent → Retry-After 5 s (whole seconds, rounded up)', () => {
    const { b, advance } = budget(0.2, 1, 10);
    expect(b.tryAdmit().admitted).toBe(true);
    advance(500);
    expect(b.tryAdmit()).toEqual({ admitted: false, retryAfterSeconds: 5 });
  });

  it('2 in flight: a third is refused while tokens remain; a release (once, however often called) admits one more', () => {
    const { b } = budget(1, 10, 2);
    const one = b.tryAdmit();
    const two = b.tryAdmit();
    expect(b.tryAdmit()).toEqual({ admitted: false, retryAfterSeconds: 1 });
    if (!one.admitted || !two.admitted) throw new Error('expected both admitted');
    one.release();
    one.release();
    expect(b.tryAdmit().admitted).toBe(true);
    expect(b.tryAdmit().admitted).toBe(false);
  });

  it('a quiet period refills up to the burst, not beyond', () => {
    const { b, advance } = budget(1, 3, 100);
    for (let i = 0; i < 3; i++) b.tryAdmit();
    advance(60_000);
    const after = Array.from({ length: 4 }, () => b.tryAdmit().admitted);
    expect(after).toEqual([true, true, true, false]);
  });
});
