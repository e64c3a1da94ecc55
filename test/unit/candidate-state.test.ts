/**
 * The campaign loop both election backends share (src/leadership/candidate-state.ts), driven by a backend
 * whose every campaign fails: what each attempt leaves behind once it is over, counted with WeakRefs after a
 * forced garbage collection, on fake timers (the backoff between attempts is up to 5 s).
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCandidateState } from '../../src/leadership/candidate-state.ts';
import { memoryLogger } from '../helpers/log.ts';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

afterEach(() => {
  vi.useRealTimers();
});

describe('the campaign loop', () => {
  it('200 failed campaigns in a row → what each attempt handed the backend is released, not kept until the next wake-up', async () => {
    vi.useFakeTimers();
    const { log, lines } = memoryLogger('warn');
    const state = createCandidateState({ log });
    /** The signal each attempt gave `next` (its wake-up): held weakly, so that only the loop can keep it. */
    const handed: WeakRef<AbortSignal>[] = [];
    const never = new AbortController().signal;
    const election = state.election<number>({
      prefix: 'p/',
      campaign: {
        next: async (signal) => {
          handed.push(new WeakRef(signal));
          return 1;
        },
        closed: () => false,
        term: async () => {
          throw new Error('the backend refused the campaign');
        },
        lost: () => never,
        afterTerm: async () => undefined,
        backoffUntil: () => undefined,
      },
      onResign: () => async () => undefined,
      session: () => undefined,
      stillLeader: () => false,
      fence: async () => undefined,
      currentLeader: async () => undefined,
    });
    election.start();
    election.setWanted(true);
    // One attempt per step at least: the backoff is at most 5 s.
    for (let i = 0; i < 200; i++) await vi.advanceTimersByTimeAsync(5000);
    const failed = lines.filter((l) => l.msg === 'campaign failed; retrying').length;
    expect(failed).toBeGreaterThanOrEqual(200);
    expect(handed.length).toBe(failed);
    vi.useRealTimers();
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    // The attempts' signals still reachable: the current wake-up's at most (and one in flight).
    const alive = new Set(handed.map((r) => r.deref()).filter((s) => s !== undefined));
    expect(alive.size).toBeLessThanOrEqual(2);
    await election.resign();
  });
});

describe('the campaign loop decides again after the session answers', () => {
  it.each([
    ['withdrawn', 'setWanted(false)'],
    ['resigned', 'resign()'],
  ] as const)(
    '%s one microtask after setWanted(true), while next() answers → no term begins',
    async (_name, how) => {
      const state = createCandidateState({ log: memoryLogger('warn').log });
      let terms = 0;
      const never = new AbortController().signal;
      const election = state.election<number>({
        prefix: 'p/',
        campaign: {
          // A live session answers at once: the window between its answer and the term is one microtask.
          next: async () => 1,
          closed: () => false,
          term: async (_s, end) => {
            terms += 1;
            await new Promise<void>((resolve) =>
              end.addEventListener('abort', () => resolve(), { once: true }),
            );
          },
          lost: () => never,
          afterTerm: async () => undefined,
          backoffUntil: () => undefined,
        },
        onResign: () => async () => undefined,
        session: () => undefined,
        stillLeader: () => false,
        fence: async () => undefined,
        currentLeader: async () => undefined,
      });
      election.start();
      await new Promise((resolve) => setImmediate(resolve));
      election.setWanted(true);
      await Promise.resolve();
      if (how === 'resign()') void election.resign();
      else election.setWanted(false);
      await new Promise((resolve) => setImmediate(resolve));
      expect({ terms, idle: election.idle }).toEqual({ terms: 0, idle: true });
      await election.resign();
    },
  );
});
