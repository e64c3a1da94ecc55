import { describe, expect, it } from 'vitest';
import { retryDelayMs } from '../../src/queue/queue-consumer.ts';

// Jitter U(0.5, 1): random() = 0 takes the lower bound (half the backoff), random() = 1 the whole backoff.
const LOW = () => 0;
const HIGH = () => 1;

describe('retryDelayMs (base 1000 ms, max 300 000 ms unless stated)', () => {
  const cases: {
    name: string;
    attempts: number;
    retryAfterMs?: number;
    baseMs?: number;
    maxMs?: number;
    random: () => number;
    expected: number;
  }[] = [
    { name: '1st retry, lowest jitter → base/2', attempts: 1, random: LOW, expected: 500 },
    { name: '1st retry, highest jitter → base', attempts: 1, random: HIGH, expected: 1000 },
    { name: '0 attempts made counts as the 1st', attempts: 0, random: HIGH, expected: 1000 },
    { name: '4th retry → base·2³', attempts: 4, random: HIGH, expected: 8000 },
    { name: '30th retry → capped at max', attempts: 30, random: HIGH, expected: 300_000 },
    { name: '30th retry, lowest jitter → max/2', attempts: 30, random: LOW, expected: 150_000 },
    {
      name: 'Retry-After 2 s above a 500 ms backoff → 2000',
      attempts: 1,
      retryAfterMs: 2000,
      random: LOW,
      expected: 2000,
    },
    {
      name: 'Retry-After 0 → the backoff',
      attempts: 2,
      retryAfterMs: 0,
      random: HIGH,
      expected: 2000,
    },
    {
      name: 'Retry-After below the backoff → the backoff',
      attempts: 4,
      retryAfterMs: 1000,
      random: HIGH,
      expected: 8000,
    },
    {
      name: 'Retry-After of a day → bounded by max (5 min)',
      attempts: 1,
      retryAfterMs: 86_400_000,
      random: LOW,
      expected: 300_000,
    },
    {
      name: 'Retry-After exactly max → max',
      attempts: 1,
      retryAfterMs: 300_000,
      random: LOW,
      expected: 300_000,
    },
    {
      name: 'Retry-After 10 s, max 2 s (the failure suite) → 2000',
      attempts: 1,
      retryAfterMs: 10_000,
      baseMs: 200,
      maxMs: 2000,
      random: HIGH,
      expected: 2000,
    },
    {
      name: 'Retry-After Infinity → max',
      attempts: 1,
      retryAfterMs: Number.POSITIVE_INFINITY,
      random: LOW,
      expected: 300_000,
    },
  ];
  it.each(cases)('$name', ({ attempts, retryAfterMs, baseMs = 1000, maxMs = 300_000, random, expected }) => {
    expect(retryDelayMs(attempts, retryAfterMs, baseMs, maxMs, random)).toBe(expected);
  });
});
