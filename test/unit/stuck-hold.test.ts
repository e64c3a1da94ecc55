import { describe, expect, it, vi } from 'vitest';
import { createStuckHold, HOLD_MAX_FACTOR } from '../../src/cleaner/stuck-hold.ts';
import { memoryLogger } from '../helpers/log.ts';

const MIN = 10_000;

/** A hold whose probe answers as `answer` says (true: resolves, false: rejects, 'hang': never settles). */
function setup() {
  const mono = { t: 0 };
  const state = { answer: true as boolean | 'hang', probes: 0 };
  const log = memoryLogger();
  const hold = createStuckHold({
    minHoldMs: MIN,
    probe: () => {
      state.probes += 1;
      if (state.answer === 'hang') return new Promise(() => {});
      return state.answer ? Promise.resolve() : Promise.reject(new Error('connection refused'));
    },
    probeTimeoutMs: 5000,
    log: log.log,
    monotonicNow: () => mono.t,
  });
  return { hold, mono, state, lines: log.lines };
}

describe('the hold after a self-check step-down', () => {
  it('not ready from the step-down until its minimum has passed and the probe answers; one info line then', async () => {
    const { hold, mono, state, lines } = setup();
    expect(hold.reason).toBeUndefined();
    expect(hold.begin('stuck: queue cannot be read')).toBe(MIN);
    expect(hold.reason).toBe('stuck: queue cannot be read');
    mono.t = MIN - 1;
    await hold.check();
    expect(state.probes).toBe(0); // not even asked before the minimum
    expect(hold.reason).toBeDefined();
    state.answer = false;
    mono.t = MIN;
    await hold.check();
    expect(hold.reason).toBeDefined();
    state.answer = true;
    await hold.check();
    expect(hold.reason).toBeUndefined();
    expect(lines.filter((l) => l.msg === 'ready again for this target')).toEqual([
      expect.objectContaining({ level: 'info', outMs: MIN, steppedDownFor: 'stuck: queue cannot be read' }),
    ]);
  });

  it('a probe that hangs (a wedged connection) times out and is not sent again while it hangs', async () => {
    vi.useFakeTimers();
    try {
      const { hold, mono, state } = setup();
      hold.begin('stuck');
      mono.t = MIN;
      state.answer = 'hang';
      const first = hold.check();
      await vi.advanceTimersByTimeAsync(5000);
      await first;
      const second = hold.check();
      await vi.advanceTimersByTimeAsync(5000);
      await second;
      expect(state.probes).toBe(1);
      expect(hold.reason).toBe('stuck');
    } finally {
      vi.useRealTimers();
    }
  });

  it('each step-down without progress in between doubles the hold, up to the cap; progress resets it', async () => {
    const { hold, mono } = setup();
    const holds: number[] = [];
    for (let i = 0; i < 7; i++) {
      const ms = hold.begin('stuck');
      holds.push(ms);
      mono.t += ms;
      await hold.check(); // the probe answers: ready again, until the next step-down
      expect(hold.reason).toBeUndefined();
    }
    expect(holds).toEqual([1, 2, 4, 8, 16, 16, 16].map((f) => f * MIN));
    expect(Math.max(...holds)).toBe(HOLD_MAX_FACTOR * MIN);
    hold.progressed();
    expect(hold.begin('stuck')).toBe(MIN);
  });

  it('a second step-down while held keeps the hold and its length, with the new reason', () => {
    const { hold } = setup();
    expect(hold.begin('first')).toBe(MIN);
    expect(hold.begin('second')).toBe(MIN);
    expect(hold.reason).toBe('second');
  });
});
