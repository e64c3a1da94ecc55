/**
 * The API rate limiter's two priorities (src/kube/rate-limiter.ts): waiting cleanup requests (GET, DELETE)
 * are served before waiting informer requests (LIST, WATCH), at most CLEANUP_GRANTS_IN_A_ROW in a row while
 * an informer request waits; aborted waiters leave the queue. Asserts the order of grants, not their timing.
 */
import { describe, expect, it } from 'vitest';
import {
  CLEANUP_GRANTS_IN_A_ROW,
  createRateLimiter,
  type RequestPriority,
} from '../../src/kube/rate-limiter.ts';

/** A limiter of one token (qps 500: a grant every 2 ms), its token taken: every take below waits. */
async function drained() {
  const limiter = createRateLimiter({ qps: 500, burst: 1, monotonicNow: () => performance.now() });
  await limiter.take();
  const order: string[] = [];
  const take = (label: string, priority: RequestPriority, signal?: AbortSignal) =>
    limiter.take(signal, priority).then(
      () => void order.push(label),
      () => void order.push(`${label} aborted`),
    );
  return { limiter, order, take };
}

describe('rate limiter priorities', () => {
  it('a DELETE queued behind a relist storm is served next', async () => {
    const { order, take } = await drained();
    const waits = Array.from({ length: 20 }, (_, i) => take(`list${i}`, 'informer'));
    waits.push(take('delete', 'cleanup'));
    await Promise.all(waits);
    expect(order[0]).toBe('delete');
    // The informers' own order is kept.
    expect(order.slice(1)).toEqual(Array.from({ length: 20 }, (_, i) => `list${i}`));
  });

  it('a flood of DELETEs slows a waiting LIST, never stops it', async () => {
    const { order, take } = await drained();
    const waits = [take('list0', 'informer'), take('list1', 'informer')];
    for (let i = 0; i < 12; i++) waits.push(take(`delete${i}`, 'cleanup'));
    await Promise.all(waits);
    const n = CLEANUP_GRANTS_IN_A_ROW;
    expect(order.indexOf('list0')).toBe(n);
    expect(order.indexOf('list1')).toBe(2 * n + 1);
    expect(order.filter((l) => l.startsWith('delete'))).toEqual(
      Array.from({ length: 12 }, (_, i) => `delete${i}`),
    );
  });

  it('an aborted waiter leaves the queue and rejects with its reason; the others are served', async () => {
    const { order, take } = await drained();
    const abort = new AbortController();
    const waits = [take('a', 'informer'), take('b', 'informer', abort.signal), take('c', 'informer')];
    abort.abort(new Error('stopped'));
    await Promise.all(waits);
    // Whether b's rejection or a's grant comes first depends on the event loop; b never takes a grant.
    expect(order).toContain('b aborted');
    expect(order.filter((l) => l !== 'b aborted')).toEqual(['a', 'c']);
  });
});
