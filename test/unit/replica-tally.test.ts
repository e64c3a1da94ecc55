import { describe, expect, it } from 'vitest';
import { ReplicaTally } from '../../harness/demo/replica-tally.ts';

const at = { context: 'c', namespace: 'ns' };

describe('demo replica tally: failovers and handovers', () => {
  it('a term ended on purpose (balancing handover, resignation) is a handover, a lost one a failover', () => {
    const t = new ReplicaTally(() => 0);
    t.onLine('r1', { ...at, msg: 'elected leader' });
    t.onLine('r1', { ...at, msg: 'leadership ended', reason: 'stepped down: handing over to r2' });
    t.onLine('r2', { ...at, msg: 'elected leader' });
    expect([t.failovers(), t.handovers()]).toEqual([0, 1]);
    t.onLine('r2', { ...at, msg: 'leadership lost', reason: 'lease lost' });
    t.onLine('r3', { ...at, msg: 'elected leader' });
    expect([t.failovers(), t.handovers()]).toEqual([1, 1]);
  });

  it('a leader that died, or a term whose end the logs did not show, counts as a failover', () => {
    const t = new ReplicaTally(() => 0);
    t.onLine('r1', { ...at, msg: 'elected leader' });
    t.markDead('r1');
    t.onLine('r2', { ...at, msg: 'elected leader' });
    t.onLine('r3', { ...at, msg: 'elected leader' });
    expect([t.failovers(), t.handovers()]).toEqual([2, 0]);
  });
});
