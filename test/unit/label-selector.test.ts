import { describe, expect, it } from 'vitest';
import { InvalidSelectorError, parseLabelSelector } from '../../src/config/label-selector.ts';

const labels = { 'spark-role': 'driver', 'kyuubi-unique-tag': 'abc', tier: 'gold' };

describe('parseLabelSelector', () => {
  const cases: [string, Record<string, string>, boolean][] = [
    ['', labels, true],
    ['spark-role=driver', labels, true],
    ['spark-role==driver', labels, true],
    ['spark-role=executor', labels, false],
    ['spark-role!=executor', labels, true],
    ['missing!=x', labels, true],
    ['tier in (gold, silver)', labels, true],
    ['tier in (bronze)', labels, false],
    ['tier notin (gold)', labels, false],
    ['missing notin (gold)', labels, true],
    ['kyuubi-unique-tag', labels, true],
    ['kyuubi-unique-tag', { 'spark-role': 'driver' }, false],
    ['!kyuubi-unique-tag', labels, false],
    ['spark-role=driver,kyuubi-unique-tag', { 'spark-role': 'driver' }, false],
    ['spark-role=driver, tier in (gold,silver), !x', labels, true],
    ['example.com/team=data', { 'example.com/team': 'data' }, true],
  ];
  for (const [text, l, want] of cases)
    it(`"${text}" on ${JSON.stringify(l)} → ${want}`, () =>
      expect(parseLabelSelector(text).matches(l)).toBe(want));

  it('undefined labels match only negative requirements', () => {
    expect(parseLabelSelector('!a').matches(undefined)).toBe(true);
    expect(parseLabelSelector('a').matches(undefined)).toBe(false);
  });

  for (const bad of ['a=b,', '=x', 'a b', 'a in (b', `a=${'x'.repeat(64)}`]) {
    it(`"${bad.slice(0, 20)}" is rejected`, () =>
      expect(() => parseLabelSelector(bad)).toThrow(InvalidSelectorError));
  }
});
