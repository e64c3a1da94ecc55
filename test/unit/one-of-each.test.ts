/**
 * One of each (STYLE.md 16): one exponential backoff (src/backoff.ts), one sleep (src/sleep.ts), one
 * Status → error mapper (src/kube/api-status.ts). Variants are options of the one helper, not copies: this
 * scans src/ and workers/ for hand-written copies. Then the helpers themselves, table-driven.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { backoffMs } from '../../src/backoff.ts';
import { KubeApiError, statusError } from '../../src/kube/api-status.ts';
import { sleep } from '../../src/sleep.ts';
import { REPO_ROOT, tsFilesUnder } from '../helpers/imports.ts';

const sources = ['src', 'workers']
  .flatMap(tsFilesUnder)
  .map((file) => ({ file, text: readFileSync(path.join(REPO_ROOT, file), 'utf8') }));

/** Files other than `home` whose text matches `pattern`, with the matching line. */
function copies(pattern: RegExp, home: string): string[] {
  return sources
    .filter((s) => s.file !== home)
    .flatMap(({ file, text }) =>
      text
        .split('\n')
        .filter((line) => pattern.test(line) && !/^\s*(\*|\/\/)/.test(line))
        .map((line) => `${file}: ${line.trim()}`),
    );
}

describe('no hand-written copies', () => {
  it('exponential backoff (2 ** n) only in src/backoff.ts', () => {
    // `2 ** 31 - 1` (a constant) is not a backoff: only exponents that are not number literals count.
    expect(copies(/2 \*\* [^\d\s]/, 'src/backoff.ts')).toEqual([]);
  });
  it('sleep helpers only in src/sleep.ts', () => {
    expect(copies(/(function\s+sleep\w*\s*\(|const\s+sleep\w*\s*=)/, 'src/sleep.ts')).toEqual([]);
  });
  it('Status reasons become errors only in src/kube/api-status.ts', () => {
    // Error classes of other concepts are fine; one that carries an API Status `reason` is a second mapper.
    const errorsWithReason = sources
      .filter((s) => s.file !== 'src/kube/api-status.ts')
      .filter((s) => /class \w+ extends Error \{[^}]*readonly reason\b/s.test(s.text))
      .map((s) => `${s.file}: an Error class with a Status reason`);
    expect([...copies(/STATUS_REASONS\[/, 'src/kube/api-status.ts'), ...errorsWithReason]).toEqual([]);
  });
});

describe('backoffMs', () => {
  const cases: [string, number, Parameters<typeof backoffMs>[1], number][] = [
    ['attempt 1 → base', 1, { baseMs: 500, maxMs: 30_000 }, 500],
    ['attempt 3 → base · 4', 3, { baseMs: 500, maxMs: 30_000 }, 2000],
    ['attempt 0 counts as 1', 0, { baseMs: 1000, maxMs: 300_000 }, 1000],
    ['capped at max', 20, { baseMs: 1000, maxMs: 300_000 }, 300_000],
    ['attempt 5000 saturates at max, no Infinity or NaN', 5000, { baseMs: 100, maxMs: 5000 }, 5000],
    ['jitter, random 0 → half', 2, { baseMs: 200, maxMs: 5000, jitter: true, random: () => 0 }, 200],
    [
      'jitter, random 0.5 → three quarters',
      2,
      { baseMs: 200, maxMs: 5000, jitter: true, random: () => 0.5 },
      300,
    ],
    ['jitter applies after the cap', 30, { baseMs: 200, maxMs: 5000, jitter: true, random: () => 0 }, 2500],
    ['ioredis reconnect 1 (attempt 2) → 200 ms', 2, { baseMs: 100, maxMs: 5000 }, 200],
  ];
  for (const [name, attempt, opts, want] of cases)
    it(name, () => expect(backoffMs(attempt, opts)).toBe(want));
});

describe('sleep', () => {
  it('resolves true after the time', async () => expect(await sleep(1)).toBe(true));
  it('resolves false at once for a signal already aborted', async () =>
    expect(await sleep(60_000, AbortSignal.abort())).toBe(false));
  it('resolves false when the signal aborts meanwhile (long before the time)', async () => {
    const ac = new AbortController();
    const slept = sleep(60_000, ac.signal);
    ac.abort();
    expect(await slept).toBe(false);
  });
});

describe('statusError', () => {
  const cases: [
    string,
    Parameters<typeof statusError>,
    { code?: number; reason: string; message: string },
  ][] = [
    [
      'a Status body → its reason and message',
      [403, { kind: 'Status', code: 403, reason: 'Forbidden', message: 'pods is forbidden' }, {}, 0],
      { code: 403, reason: 'Forbidden', message: 'pods is forbidden' },
    ],
    [
      'no body → the code’s reason as both',
      [503, '', {}, 0],
      { code: 503, reason: 'ServiceUnavailable', message: 'ServiceUnavailable' },
    ],
    [
      'no body, a fallback message → the code’s reason and that message',
      [503, undefined, {}, 0, 'list answered HTTP 503'],
      { code: 503, reason: 'ServiceUnavailable', message: 'list answered HTTP 503' },
    ],
    [
      'an unknown code, no body → Unknown',
      [599, undefined, {}, 0],
      { code: 599, reason: 'Unknown', message: 'Unknown' },
    ],
    [
      'a watch ERROR event without a code → its Status',
      [undefined, { kind: 'Status', reason: 'InternalError', message: 'boom' }, {}, 0],
      { reason: 'InternalError', message: 'boom' },
    ],
  ];
  for (const [name, args, want] of cases)
    it(name, () => {
      const err = statusError(...args);
      expect(err).toBeInstanceOf(KubeApiError);
      expect({ code: err.code, reason: err.reason, message: err.message }).toEqual({
        code: undefined,
        ...want,
      });
    });
  it('Retry-After in seconds → ms', () =>
    expect(statusError(429, '', { 'retry-after': '3' }, 0).retryAfterMs).toBe(3000));
});
