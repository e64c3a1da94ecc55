/**
 * The rule that refuses a cluster name claimed by another cluster (src/cleaner/claim-conflict.ts), by table:
 * claims sharing a CA fingerprint — directly or through a chain, as a CA rotation's bundle phase links the old
 * CA to the new one — are one cluster; a live claim not linked to ours is another cluster; URL fingerprints
 * (no CA) prove nothing.
 */
import { describe, expect, it } from 'vitest';
import {
  type Claim,
  claimField,
  foreignClaims,
  otherBackendClaims,
  parseClaimField,
} from '../../src/cleaner/claim-conflict.ts';
import { refusalMessage } from '../../src/cleaner/cluster-claims.ts';

const live = (fps: string[], ageMs = 1000): Claim => ({
  fingerprints: fps,
  live: true,
  ageMs,
  from: 'redis',
});
const old = (fps: string[], ageMs = 86_400_000): Claim => ({
  fingerprints: fps,
  live: false,
  ageMs,
  from: 'redis',
});

describe('foreignClaims', () => {
  const cases: [string, string[], Claim[], string[][]][] = [
    ['nobody else → none', ['ca:a'], [live(['ca:a'])], []],
    ['another fleet of the same cluster (same CA) → none', ['ca:a'], [live(['ca:a']), live(['ca:a'], 5)], []],
    ['another cluster, live → it', ['ca:a'], [live(['ca:a']), live(['ca:b'])], [['ca:b']]],
    ['another cluster, no longer live (renamed, stopped) → none', ['ca:a'], [old(['ca:b'])], []],
    ['a CA bundle overlapping ours (rotation in progress) → none', ['ca:a'], [live(['ca:a', 'ca:n'])], []],
    [
      'old CA and new CA alone, linked by an older bundle claim (the bundle phase) → none',
      ['ca:a'],
      [live(['ca:n']), old(['ca:a', 'ca:n'])],
      [],
    ],
    [
      'linked through a chain of two rotations → none',
      ['ca:a'],
      [live(['ca:z']), old(['ca:a', 'ca:m']), old(['ca:m', 'ca:z'])],
      [],
    ],
    [
      'old CA and new CA alone with no bundle ever seen → the other is foreign',
      ['ca:a'],
      [live(['ca:n'])],
      [['ca:n']],
    ],
    ['our fingerprints without a CA → never refused', ['server:u1'], [live(['ca:b'])], []],
    ['a claim without a CA → neither links nor conflicts', ['ca:a'], [live(['server:u2'])], []],
    [
      'two foreign clusters → both, most recently seen first',
      ['ca:a'],
      [live(['ca:b'], 9000), live(['ca:c'], 10)],
      [['ca:c'], ['ca:b']],
    ],
  ];
  it.each(cases)('%s', (_name, ours, claims, want) => {
    expect(foreignClaims(ours, claims).map((c) => [...c.fingerprints])).toEqual(want);
  });

  it('a live member of the coordination store counts as a live claim', () => {
    const member: Claim = { fingerprints: ['ca:b'], live: true, ageMs: 0, from: 'member', replica: 'r7' };
    expect(foreignClaims(['ca:a'], [member])).toEqual([member]);
  });
});

describe('refusalMessage', () => {
  it('names both identities (name and fingerprints) and the setting to change', () => {
    const msg = refusalMessage(
      { name: 'prod', source: 'clusterName', fingerprints: ['ca:aaaaaaaaaaaa'] },
      ['ca:aaaaaaaaaaaa'],
      [live(['ca:bbbbbbbbbbbb'], 12_400)],
    );
    expect(msg).toBe(
      "cluster name prod is used by two clusters: this replica's (fingerprints ca:aaaaaaaaaaaa, name set by " +
        'clusterName) and the one of a replica seen 12 s ago in Redis (fingerprints ca:bbbbbbbbbbbb); they would ' +
        'share every queue and election of that name: not cleaning its targets until one of them is renamed: set ' +
        'a distinct clusterName (--cluster-name, SDC_CLUSTER_NAME) or clusterNames (--cluster-names, ' +
        'SDC_CLUSTER_NAMES) on one of the fleets',
    );
  });
});

describe('the leadership backend in a claim', () => {
  it('a claim field carries the fingerprints, the backend and the namespaces; older fields read as unknown', () => {
    const field = claimField(['ca:aa', 'ca:bb'], 'zookeeper /kyuubi-sdc', ['spark', 'etl', 'spark']);
    expect(field).toBe('ca:aa,ca:bb|zookeeper /kyuubi-sdc|etl,spark');
    expect(parseClaimField(field)).toEqual({
      fingerprints: ['ca:aa', 'ca:bb'],
      leadership: 'zookeeper /kyuubi-sdc',
      namespaces: ['etl', 'spark'],
    });
    expect(parseClaimField('ca:aa')).toEqual({
      fingerprints: ['ca:aa'],
      leadership: undefined,
      namespaces: undefined,
    });
    expect(parseClaimField('ca:aa|etcd x/')).toEqual({
      fingerprints: ['ca:aa'],
      leadership: 'etcd x/',
      namespaces: undefined,
    });
  });

  it.each([
    ['the same backend', 'etcd spark-driver-cleaner/', true, ['spark'], 0],
    ['another backend, live, the same namespace', 'zookeeper /sdc', true, ['spark'], 1],
    ['another backend, live, other namespaces', 'zookeeper /sdc', true, ['etl', 'ml'], 0],
    ['another backend, live, namespaces not said (all)', 'zookeeper /sdc', true, undefined, 1],
    ['another backend, no longer live', 'zookeeper /sdc', false, ['spark'], 0],
    ['another etcd prefix', 'etcd other/', true, ['spark', 'etl'], 1],
    ['no backend written', undefined, true, ['spark'], 0],
  ] as const)('%s → %i conflicting claim(s)', (_name, leadership, isLive, namespaces, n) => {
    const claim: Claim = {
      fingerprints: ['ca:aa'],
      live: isLive,
      ageMs: 1000,
      from: 'redis',
      ...(leadership === undefined ? {} : { leadership }),
      ...(namespaces === undefined ? {} : { namespaces }),
    };
    expect(otherBackendClaims('etcd spark-driver-cleaner/', [claim], ['spark', 'kyuubi'])).toHaveLength(n);
  });
});
