/** Coalesced reads never older than their call (src/leadership/fresh-read.ts), the fencing of both backends. */
import { describe, expect, it } from 'vitest';
import { createFreshRead } from '../../src/leadership/fresh-read.ts';

/** A read function whose reads are held until released, each numbered in start order. */
function heldReads() {
  const pending: PromiseWithResolvers<number>[] = [];
  return {
    readOnce: () => {
      const r = Promise.withResolvers<number>();
      pending.push(r);
      return r.promise;
    },
    get started() {
      return pending.length;
    },
    settle(n: number, ok = true) {
      const r = pending[n - 1];
      if (ok) r?.resolve(n);
      else r?.reject(new Error(`read ${n} failed`));
    },
  };
}
const live = () => new AbortController().signal;
const tick = () => new Promise((r) => setImmediate(r));

describe('createFreshRead', () => {
  it('calls during a read share the next one, never the one in flight', async () => {
    const reads = heldReads();
    const read = createFreshRead(reads.readOnce);
    const a = read(live());
    const b = read(live());
    const c = read(live());
    expect(reads.started).toBe(1);
    reads.settle(1);
    expect(await a).toBe(1);
    await tick();
    expect(reads.started).toBe(2);
    reads.settle(2);
    expect(await Promise.all([b, c])).toEqual([2, 2]);
  });

  it('a failed read fails its callers, and the next read still starts for those waiting', async () => {
    const reads = heldReads();
    const read = createFreshRead(reads.readOnce);
    const a = read(live());
    const b = read(live());
    reads.settle(1, false);
    await expect(a).rejects.toThrow('read 1 failed');
    await tick();
    reads.settle(2);
    expect(await b).toBe(2);
  });

  it('an aborted call rejects at once with its reason; the shared read goes on for the others', async () => {
    const reads = heldReads();
    const read = createFreshRead(reads.readOnce);
    const stop = new AbortController();
    const a = read(stop.signal);
    const b = read(live());
    const c = read(live());
    stop.abort(new Error('leadership lost'));
    await expect(a).rejects.toThrow('leadership lost');
    reads.settle(1);
    await tick();
    reads.settle(2);
    expect(await Promise.all([b, c])).toEqual([2, 2]);
    expect(reads.started).toBe(2);
  });
});
