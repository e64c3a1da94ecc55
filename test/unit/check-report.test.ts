/**
 * `check`'s report (src/check/check-report.ts, src/check-result.ts): the exit code of a set of results,
 * the text lines (✓ ‼ ✗ – and the fix below), and the JSON document validated against its documented schema
 * (docs/check-output.schema.json) — and the schema refusing what it must refuse.
 */
import { describe, expect, it } from 'vitest';
import { checkJson, formatCheckText } from '../../src/check/check-report.ts';
import { type CheckResult, checkExitCode, resultsOf } from '../../src/check-result.ts';
import { VERSION } from '../../src/version.ts';
import { checkOutputErrors } from '../helpers/check-schema.ts';

const ctx = resultsOf('context prod');
const redis = resultsOf('redis');
const pass = ctx.pass('context.reachable', 'reachable: https://k:6443 answered GET /version in 12 ms', {
  details: { elapsedMs: 12 },
});
const warn = ctx.warn('context.tls', 'TLS: none (http://)', { fix: 'use https://' });
const fail = ctx.fail('context.permissions', 'permissions in spark-a: delete on pods refused', {
  fix: 'grant delete',
  details: { namespace: 'spark-a', refused: ['delete'] },
});
const silent = redis.unreachable('redis.reachable', 'reachable: redis://r:6379 does not answer', {
  fix: 'check Redis',
});
const skipped = redis.skip('redis.settings', 'settings: skipped: Redis did not answer');

describe('checkExitCode', () => {
  const cases: [string, CheckResult[], number][] = [
    ['nothing checked → 0', [], 0],
    ['passes and a warning → 0 (a warning does not fail)', [pass, warn], 0],
    ['a skipped check alone → 0', [pass, skipped], 0],
    ['a server that does not answer → 3', [pass, silent, skipped], 3],
    ['a failure → 1', [pass, fail], 1],
    ['a failure and a server that does not answer → 1 (the definite problem wins)', [silent, fail], 1],
  ];
  for (const [name, results, code] of cases) it(name, () => expect(checkExitCode(results)).toBe(code));
});

describe('formatCheckText', () => {
  it('groups lines in order of appearance, one symbol per status, the fix under failures and warnings only', () => {
    expect(formatCheckText([pass, warn, silent, fail, skipped]).split('\n')).toEqual([
      'context prod',
      '  ✓ reachable: https://k:6443 answered GET /version in 12 ms',
      '  ‼ TLS: none (http://)',
      '      fix: use https://',
      '  ✗ permissions in spark-a: delete on pods refused',
      '      fix: grant delete',
      '',
      'redis',
      '  ✗ reachable: redis://r:6379 does not answer',
      '      fix: check Redis',
      '  – settings: skipped: Redis did not answer',
      '',
      '1 passed, 1 warning, 1 failed, 1 not answering, 1 skipped: exit 1',
      '',
    ]);
  });
});

describe('the JSON document and its schema (docs/check-output.schema.json)', () => {
  it('a report with every status is valid, with its counts and exit code', () => {
    const doc = checkJson([pass, warn, fail, silent, skipped]);
    expect(checkOutputErrors(doc)).toEqual([]);
    expect(doc).toMatchObject({
      apiVersion: 'spark-driver-cleaner.check/v1',
      version: VERSION,
      exitCode: 1,
      summary: { pass: 1, warn: 1, fail: 1, unreachable: 1, skip: 1 },
    });
  });

  it('a configuration error (exit 2) is valid too', () => {
    const bad = resultsOf('configuration').fail(
      'configuration.invalid',
      'SDC_RETENTION: "x" is not a duration',
      {
        fix: 'the line names the field',
      },
    );
    expect(checkOutputErrors(checkJson([bad], 2))).toEqual([]);
  });

  const broken: [string, (d: Record<string, unknown>) => void][] = [
    ['a failure without its fix', (d) => delete (d.checks as Record<string, unknown>[])[2]?.fix],
    ['an unknown status', (d) => ((d.checks as Record<string, unknown>[])[0] = { ...pass, status: 'ok' })],
    ['an exit code outside 0–3', (d) => (d.exitCode = 4)],
    [
      'an unknown group',
      (d) => ((d.checks as Record<string, unknown>[])[0] = { ...pass, group: 'database' }),
    ],
    ['a field the schema does not know', (d) => (d.extra = true)],
    ['a missing summary count', (d) => delete (d.summary as Record<string, unknown>).skip],
  ];
  for (const [name, breakIt] of broken)
    it(`the schema refuses ${name}`, () => {
      const doc = structuredClone(checkJson([pass, warn, fail, silent, skipped])) as Record<string, unknown>;
      breakIt(doc);
      expect(checkOutputErrors(doc)).not.toEqual([]);
    });
});
