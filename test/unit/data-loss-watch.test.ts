/**
 * The data-loss watch's judgement (src/cleaner/data-loss-watch.ts) over a marker double: what a term's
 * baseline and each later read report, and when it reads at all.
 */
import { describe, expect, it } from 'vitest';
import { createDataLossWatch } from '../../src/cleaner/data-loss-watch.ts';
import type { DataLossReason, DataMarker, MarkerReading } from '../../src/queue/data-marker.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

/** A marker whose stored value and answering server the test sets; counts reads. */
function fakeMarker() {
  const state = { value: undefined as string | undefined, server: 'run-a', reads: 0 };
  let listener: (() => void) | undefined;
  const marker: DataMarker = {
    async read(): Promise<MarkerReading> {
      state.reads += 1;
      const seen = state.value;
      state.value = state.server;
      return { seen, current: state.server };
    },
    onTopologyChange(l) {
      listener = l;
      return () => {
        listener = undefined;
      };
    },
  };
  return { marker, state, topologyChanged: () => listener?.() };
}

function watchOf(fake: ReturnType<typeof fakeMarker>, dueSoon = () => true) {
  const losses: DataLossReason[] = [];
  const watch = createDataLossWatch({
    marker: fake.marker,
    dueSoon,
    onLoss: async (reason) => {
      losses.push(reason);
    },
    log: memoryLogger().log,
    monotonicNow: () => performance.now(),
    intervalMs: 20,
    idleIntervalMs: 60_000,
    burstMs: 200,
    burstIntervalMs: 10,
  });
  return { watch, losses };
}

describe('data-loss watch', () => {
  it('fresh install: the baseline writes the marker and reports nothing; later reads of the same server nothing', async () => {
    const fake = fakeMarker();
    const { watch, losses } = watchOf(fake);
    await watch.baseline();
    const end = new AbortController();
    const running = watch.run(end.signal);
    await waitFor('three reads', () => fake.state.reads >= 3, 5000, 5);
    end.abort();
    await running;
    expect(losses).toEqual([]);
  });

  it('marker gone after the baseline (FLUSHALL, restart empty) → marker-missing, once', async () => {
    const fake = fakeMarker();
    const { watch, losses } = watchOf(fake);
    await watch.baseline();
    const end = new AbortController();
    const running = watch.run(end.signal);
    fake.state.value = undefined;
    await waitFor('the loss seen', () => losses.length > 0, 5000, 5);
    const reads = fake.state.reads;
    await waitFor('two more reads', () => fake.state.reads >= reads + 2, 5000, 5);
    end.abort();
    await running;
    expect(losses).toEqual(['marker-missing']);
  });

  it('another server answers with the old marker (failover to a replica that had it) → master-changed', async () => {
    const fake = fakeMarker();
    const { watch, losses } = watchOf(fake);
    await watch.baseline();
    const end = new AbortController();
    const running = watch.run(end.signal);
    fake.state.server = 'run-b';
    await waitFor('the loss seen', () => losses.length > 0, 5000, 5);
    end.abort();
    await running;
    expect(losses).toEqual(['master-changed']);
  });

  it('a term whose baseline finds no marker (lost before the term) reports nothing: its own reconcile heals it', async () => {
    const fake = fakeMarker();
    const { watch, losses } = watchOf(fake);
    await watch.baseline();
    fake.state.value = undefined;
    fake.state.server = 'run-c';
    await watch.baseline(); // the next term
    const end = new AbortController();
    const running = watch.run(end.signal);
    await waitFor('two reads', () => fake.state.reads >= 4, 5000, 5);
    end.abort();
    await running;
    expect(losses).toEqual([]);
  });

  it('no pod due soon → no read until the idle interval; a topology change reads at once', async () => {
    const fake = fakeMarker();
    const { watch, losses } = watchOf(fake, () => false);
    await watch.baseline();
    const end = new AbortController();
    const running = watch.run(end.signal);
    await new Promise((r) => setTimeout(r, 100)); // five intervals: no pod due, nothing read
    expect(fake.state.reads).toBe(1);
    fake.state.value = undefined;
    fake.topologyChanged();
    await waitFor('the loss seen after the topology change', () => losses.length > 0, 5000, 5);
    end.abort();
    await running;
    expect(losses).toEqual(['marker-missing']);
  });
});
