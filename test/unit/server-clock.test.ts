import { describe, expect, it } from 'vitest';
import { createServerClock, parseDateHeader } from '../../src/kube/server-clock.ts';

const T = Date.parse('2026-12-01T14:00:00Z');

/** A server clock over hand-moved clocks: `wall` (epoch ms) and `mono` (monotonic ms). */
function clocks(wallMs: number) {
  const c = { wall: wallMs, mono: 1_000 };
  const server = createServerClock({ now: () => c.wall, monotonicNow: () => c.mono });
  /** Moves both clocks by `ms`, as real time passing does. */
  const pass = (ms: number) => {
    c.wall += ms;
    c.mono += ms;
  };
  return { c, server, pass };
}

const header = (ms: number) => new Date(ms).toUTCString();

describe('parseDateHeader', () => {
  it('parses an IMF-fixdate and floors it to the second; absent or garbage → undefined', () => {
    expect(parseDateHeader('Tue, 01 Dec 2026 14:00:00 GMT')).toBe(T);
    expect(parseDateHeader(['Tue, 01 Dec 2026 14:00:05 GMT'])).toBe(T + 5000);
    expect(parseDateHeader(undefined)).toBeUndefined();
    expect(parseDateHeader('')).toBeUndefined();
    expect(parseDateHeader('yesterday')).toBeUndefined();
  });
});

describe('server clock', () => {
  it('before any answer: no lower bound, the wall clock alone judges', () => {
    const { server, c } = clocks(T + 19_000);
    expect(server.lowerBoundMs()).toBeUndefined();
    expect(server.dueNow()).toBe(c.wall);
    server.observe(undefined);
    server.observe('not a date');
    expect(server.lowerBoundMs()).toBeUndefined();
  });

  it('the Date second is floored: 14:00:00.900 true time observes as 14:00:00.000', () => {
    const { server } = clocks(T + 900);
    server.observe(header(T + 900));
    expect(server.lowerBoundMs()).toBe(T);
  });

  it('carries the bound forward by monotonic time elapsed since receipt, not by the wall clock', () => {
    const { server, c, pass } = clocks(T);
    server.observe(header(T)); // received at mono 1000
    pass(4_000);
    expect(server.lowerBoundMs()).toBe(T + 4_000);
    c.wall += 60_000; // our wall clock steps ahead: the bound does not move
    expect(server.lowerBoundMs()).toBe(T + 4_000);
  });

  it('uses the receipt time given, and keeps the largest bound over answers', () => {
    const { server, c } = clocks(T);
    c.mono = 10_000;
    server.observe(header(T), 7_000); // received 3 s ago
    expect(server.lowerBoundMs()).toBe(T + 3_000);
    server.observe(header(T - 5_000)); // an older (slow, or from a lagging server) answer: ignored
    expect(server.lowerBoundMs()).toBe(T + 3_000);
    server.observe(header(T + 5_000)); // a later one raises the bound
    expect(server.lowerBoundMs()).toBe(T + 5_000);
  });

  it('due clock: min(wall clock, bound) — a wall clock ahead of the server is held back to the server', () => {
    const { server, c, pass } = clocks(T + 19_000); // our clock 19 s ahead
    server.observe(header(T));
    expect(server.dueNow()).toBe(T);
    pass(2_500);
    expect(server.dueNow()).toBe(T + 2_500);
    c.wall = T - 30_000; // our clock now 32.5 s behind: the wall clock is the earlier one
    expect(server.dueNow()).toBe(T - 30_000);
  });

  it('stamp clock: max(wall clock, bound) — a wall clock behind the server is brought up to it', () => {
    const { server, c } = clocks(T - 30_000); // our clock 30 s behind
    expect(server.notBehindNow()).toBe(T - 30_000); // no answer yet: the wall clock alone
    server.observe(header(T));
    expect(server.notBehindNow()).toBe(T);
    c.wall = T + 19_000; // ahead: the wall clock, the later one
    expect(server.notBehindNow()).toBe(T + 19_000);
  });
});
