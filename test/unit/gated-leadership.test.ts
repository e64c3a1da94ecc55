/**
 * A gated leadership (src/leadership/gated-leadership.ts): a term begins when the election has elected this
 * replica and every gate is open, ends when either stops; the wait is logged once per reason, at warn past the
 * gate's threshold; fencing asks the election, then each gate; the gates hear of the election's terms.
 */
import { describe, expect, it, vi } from 'vitest';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import { createGatedLeadership, type LeadershipGate } from '../../src/leadership/gated-leadership.ts';
import { type Leadership, leadershipSubscribers } from '../../src/leadership/leadership.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

/** An election driven by the test. */
function fakeInner() {
  const events = leadershipSubscribers();
  let leader = false;
  const fenced: string[] = [];
  const inner: Leadership & { elect(): void; lose(why: string): void } = {
    addEventHandler: (e) => events.add(e),
    readyWhen: () => undefined,
    start: () => undefined,
    resign: async () => undefined,
    stepDown: () => undefined,
    get isLeader() {
      return leader;
    },
    async fence() {
      fenced.push('inner');
      if (!leader) throw new FencedError('inner: not the leader');
    },
    stillLeader: () => leader,
    session: undefined,
    currentLeader: async () => (leader ? 'me' : undefined),
    elect() {
      leader = true;
      events.onElected();
    },
    lose(why) {
      leader = false;
      events.onLost(why);
    },
  };
  return { inner, fenced };
}

/** A gate driven by the test. */
function fakeGate(reason: string, fenced: string[], warnAfterMs?: number, quietMs?: number) {
  let why: string | undefined = `${reason} closed`;
  const listeners: (() => void)[] = [];
  const leading: boolean[] = [];
  const gate: LeadershipGate & { set(w: string | undefined): void; leading: boolean[] } = {
    reason,
    ...(warnAfterMs === undefined ? {} : { warnAfterMs }),
    ...(quietMs === undefined ? {} : { quietMs }),
    closed: () => why,
    onChange: (cb) => listeners.push(cb),
    innerLeading: (l) => leading.push(l),
    async fence() {
      fenced.push(reason);
      if (why) throw new FencedError(why);
    },
    set(w) {
      why = w;
      for (const cb of listeners) cb();
    },
    leading,
  };
  return gate;
}

function setup(warnAfterMs?: number, quietMs = 2000) {
  const { inner, fenced } = fakeInner();
  const a = fakeGate('a', fenced, warnAfterMs, quietMs);
  const b = fakeGate('b', fenced);
  const mem = memoryLogger('info');
  const led = createGatedLeadership({
    inner,
    gates: [a, b],
    log: mem.log,
    monotonicNow: () => performance.now(),
  });
  const events: string[] = [];
  led.addEventHandler({ onElected: () => events.push('elected'), onLost: (r) => events.push(`lost: ${r}`) });
  return { inner, a, b, led, events, fenced, lines: mem.lines };
}

describe('createGatedLeadership', () => {
  it('no gate: the election itself', () => {
    const { inner } = fakeInner();
    expect(createGatedLeadership({ inner, gates: [], log: memoryLogger().log, monotonicNow: () => 0 })).toBe(
      inner,
    );
  });

  it('elected with a gate closed: no term; the wait logged after 2 s, again when its reason changes; the last gate opening begins the term', async () => {
    const { inner, a, b, led, events, lines } = setup();
    inner.elect();
    expect(led.isLeader).toBe(false);
    expect(events).toEqual([]);
    expect(a.leading).toEqual([true]);
    expect(led.heldBy?.()).toEqual([
      { reason: 'a', why: 'a closed', elected: true },
      { reason: 'b', why: 'b closed', elected: true },
    ]);
    const waits = () =>
      lines.filter((l) => l.msg === 'elected, but not consuming: waiting').map((l) => l.why);
    // A brief wait (the first look every start has, its gate's quiet time) makes no line.
    expect(waits()).toEqual([]);
    await waitFor('the wait logged', () => waits().length > 0, 5000);
    expect(waits()).toEqual(['a closed']);
    a.set(undefined);
    expect(events).toEqual([]);
    expect(waits()).toEqual(['a closed', 'b closed']);
    b.set(undefined);
    expect(events).toEqual(['elected']);
    expect(led.isLeader).toBe(true);
    expect(led.stillLeader()).toBe(true);
  });

  it('a gate without a quiet time: its wait is logged at once', () => {
    const { inner, b, lines } = setup(undefined, 0);
    inner.elect();
    b.set(undefined);
    expect(lines.filter((l) => l.msg === 'elected, but not consuming: waiting').map((l) => l.why)).toEqual([
      'a closed',
    ]);
  });

  it('a wait that ends within its gate’s quiet time is not logged', () => {
    vi.useFakeTimers();
    try {
      const { inner, a, b, events, lines } = setup();
      b.set(undefined);
      inner.elect();
      a.set(undefined);
      expect(events).toEqual(['elected']);
      vi.advanceTimersByTime(10_000);
      expect(lines.filter((l) => String(l.msg).includes('waiting'))).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a gate closing during a term ends it, naming why; the election losing ends it once', () => {
    const { inner, a, b, led, events } = setup();
    a.set(undefined);
    b.set(undefined);
    inner.elect();
    b.set('a 0.1.0 leader appeared');
    expect(events).toEqual(['elected', 'lost: not consuming: a 0.1.0 leader appeared']);
    expect(led.stillLeader()).toBe(false);
    b.set(undefined);
    expect(events.at(-1)).toBe('elected');
    inner.lose('lease lost');
    expect(events).toEqual([
      'elected',
      'lost: not consuming: a 0.1.0 leader appeared',
      'elected',
      'lost: lease lost',
    ]);
    expect(a.leading).toEqual([true, false]);
    // Not elected: a gate opening begins nothing; heldBy says it is not elected.
    b.set('x');
    b.set(undefined);
    expect(events).toHaveLength(4);
    a.set('y');
    expect(led.heldBy?.()).toEqual([{ reason: 'a', why: 'y', elected: false }]);
  });

  it('fence: the election, then each gate; a closed gate refuses', async () => {
    const { inner, a, b, led, fenced } = setup();
    await expect(led.fence(AbortSignal.timeout(1000))).rejects.toBeInstanceOf(FencedError);
    a.set(undefined);
    b.set(undefined);
    inner.elect();
    fenced.length = 0;
    await led.fence(AbortSignal.timeout(1000));
    expect(fenced).toEqual(['inner', 'a', 'b']);
  });

  it('a wait past the gate’s threshold is logged once at warn', async () => {
    const { inner, b, lines } = setup(50);
    b.set(undefined);
    inner.elect();
    await waitFor('the warn line', () =>
      lines.some((l) => l.level === 'warn' && l.msg === 'elected, but still not consuming: waiting'),
    );
    expect(lines.filter((l) => l.msg === 'elected, but still not consuming: waiting')).toHaveLength(1);
  });
});
