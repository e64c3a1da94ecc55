/** Pure helpers: label/field selector parsing and the three patch flavours. */
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { jsonPatch, mergePatch, strategicMergePatch } from '../../harness/sandbox/apiserver/patch.ts';
import { parseFieldSelector, parseLabelSelector } from '../../harness/sandbox/apiserver/selectors.ts';
import { KubeStatusError } from '../../harness/sandbox/apiserver/status.ts';

const withLabels = (labels: Record<string, string>): V1Pod => ({ metadata: { labels } });

describe('parseLabelSelector', () => {
  const cases: [string, Record<string, string>, boolean][] = [
    ['', {}, true],
    ['a=1', { a: '1' }, true],
    ['a=1', { a: '2' }, false],
    ['a!=1', {}, true],
    ['a in (1, 2)', { a: '2' }, true],
    ['a in (1,2)', {}, false],
    ['a notin (1,2)', {}, true],
    ['a notin (1,2)', { a: '1' }, false],
    ['a', { a: '' }, true],
    ['!a', { a: '' }, false],
    ['example.com/role=driver,!b', { 'example.com/role': 'driver' }, true],
  ];
  for (const [sel, labels, want] of cases) {
    it(`"${sel}" on ${JSON.stringify(labels)} → ${want}`, () => {
      expect(parseLabelSelector(sel)(withLabels(labels))).toBe(want);
    });
  }
  it('rejects an invalid key with a 400 Status', () => {
    expect(() => parseLabelSelector('bad key=1')).toThrow(KubeStatusError);
  });
});

describe('parseFieldSelector', () => {
  it('matches status.phase and metadata.namespace', () => {
    const p: V1Pod = { metadata: { namespace: 'x' }, status: { phase: 'Failed' } };
    expect(parseFieldSelector('status.phase=Failed,metadata.namespace==x')(p)).toBe(true);
    expect(parseFieldSelector('status.phase!=Failed')(p)).toBe(false);
  });
});

describe('patches', () => {
  it('merge patch deletes with null and merges objects', () => {
    expect(mergePatch({ a: { b: 1, c: 2 }, d: [1] }, { a: { b: null }, d: [2] })).toEqual({
      a: { c: 2 },
      d: [2],
    });
  });
  it('strategic merge patch merges containers by name and finalizers as a set', () => {
    const out = strategicMergePatch(
      {
        spec: {
          containers: [
            { name: 'a', image: '1' },
            { name: 'b', image: '1' },
          ],
        },
        metadata: { finalizers: ['x'] },
      },
      {
        spec: { containers: [{ name: 'b', image: '2' }] },
        metadata: { finalizers: ['y'], '$deleteFromPrimitiveList/finalizers': ['x'] },
      },
    );
    expect(out).toEqual({
      spec: {
        containers: [
          { name: 'a', image: '1' },
          { name: 'b', image: '2' },
        ],
      },
      metadata: { finalizers: ['y'] },
    });
  });
  it('json patch applies add/replace/remove/test and rejects a failed test', () => {
    const doc = { metadata: { finalizers: ['x'], labels: { a: '1' } } };
    expect(
      jsonPatch(doc, [
        { op: 'test', path: '/metadata/labels/a', value: '1' },
        { op: 'replace', path: '/metadata/labels/a', value: '2' },
        { op: 'remove', path: '/metadata/finalizers/0' },
        { op: 'add', path: '/metadata/finalizers/-', value: 'y' },
      ]),
    ).toEqual({ metadata: { finalizers: ['y'], labels: { a: '2' } } });
    expect(() => jsonPatch(doc, [{ op: 'test', path: '/metadata/labels/a', value: 'nope' }])).toThrow(
      KubeStatusError,
    );
  });
});
