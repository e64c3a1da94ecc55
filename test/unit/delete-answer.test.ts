import { describe, expect, it } from 'vitest';
import { isDeleteAnswer } from '../../src/kube/pod-api.ts';

describe('isDeleteAnswer: what a 2xx DELETE answer must be to count as accepted', () => {
  it.each([
    { name: 'the pod being deleted', body: { kind: 'Pod', apiVersion: 'v1', metadata: {} }, ok: true },
    { name: 'a Success Status', body: { kind: 'Status', apiVersion: 'v1', status: 'Success' }, ok: true },
    { name: 'a Failure Status', body: { kind: 'Status', apiVersion: 'v1', status: 'Failure' }, ok: false },
    { name: 'an HTML page (a string: not JSON)', body: '<html>login</html>', ok: false },
    { name: 'an empty body', body: '', ok: false },
    { name: 'JSON without kind', body: { ok: true }, ok: false },
    { name: 'another kind', body: { kind: 'Secret' }, ok: false },
    { name: 'null', body: null, ok: false },
  ])('isDeleteAnswer: $name → $ok', ({ body, ok }) => {
    expect(isDeleteAnswer(body)).toBe(ok);
  });
});
