/** The wait list both leadership sessions hand their next lease or connection through. */
import { describe, expect, it } from 'vitest';
import { createWaitList } from '../../src/leadership/wait-list.ts';

describe('createWaitList', () => {
  it('hands one value to every waiter, and only to those waiting then', async () => {
    const list = createWaitList<number>();
    const a = list.wait(new AbortController().signal);
    const b = list.wait(new AbortController().signal);
    list.resolveAll(1);
    const c = list.wait(new AbortController().signal);
    list.resolveAll(2);
    expect(await Promise.all([a, b, c])).toEqual([1, 1, 2]);
  });

  it('a waiter whose signal aborts rejects with its reason and gets nothing later', async () => {
    const list = createWaitList<number>();
    const stop = new AbortController();
    const aborted = list.wait(stop.signal);
    stop.abort(new Error('term ended'));
    await expect(aborted).rejects.toThrow('term ended');
    const already = new AbortController();
    already.abort(new Error('before'));
    await expect(list.wait(already.signal)).rejects.toThrow('before');
    const kept = list.wait(new AbortController().signal);
    list.resolveAll(3);
    expect(await kept).toBe(3);
  });

  it('rejectAll rejects every waiter with the error', async () => {
    const list = createWaitList<number>();
    const waits = [1, 2].map(() => list.wait(new AbortController().signal));
    list.rejectAll(new Error('resigned'));
    for (const w of waits) await expect(w).rejects.toThrow('resigned');
  });
});
