/**
 * The informer-down cache trust: the pure threshold rule (src/cleaner/cache-trust.ts), and the handler's
 * re-check falling back to a live GET while the cache is not trusted (workers/cleanup-driver-pod.ts).
 */
import { describe, expect, it } from 'vitest';
import { cacheTrusted } from '../../src/cleaner/cache-trust.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { RecheckMode } from '../../src/config/schema.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';
import type { PodApi } from '../../src/kube/pod-api.ts';
import type { CleanupDeps } from '../../src/rules/handler.ts';
import type { Outcome } from '../../src/rules/outcome.ts';
import { cleanupDriverPod } from '../../workers/cleanup-driver-pod.ts';

describe('cacheTrusted(downSinceMs, nowMs, staleAfterMs)', () => {
  const cases: [
    name: string,
    downSince: number | undefined,
    now: number,
    staleAfter: number,
    trusted: boolean,
  ][] = [
    ['informer up → trusted', undefined, 50_000, 10_000, true],
    ['down 0 ms → trusted', 50_000, 50_000, 10_000, true],
    ['down 9999 ms, threshold 10 s → trusted', 40_001, 50_000, 10_000, true],
    ['down exactly 10 s, threshold 10 s → trusted (longer than, not equal)', 40_000, 50_000, 10_000, true],
    ['down 10 001 ms, threshold 10 s → not trusted', 39_999, 50_000, 10_000, false],
    ['down 1 ms, threshold 0 → not trusted', 49_999, 50_000, 0, false],
    ['down an hour → not trusted', 0, 3_600_000, 10_000, false],
    ['down-since after now (another time base) → trusted', 60_000, 50_000, 10_000, true],
  ];
  it.each(cases)('%s', (_name, downSince, now, staleAfter, trusted) => {
    expect(cacheTrusted(downSince, now, staleAfter)).toBe(trusted);
  });
});

const NOW = Date.parse('2026-12-01T10:00:00Z');
const UID = '4720771f-8ca8-4811-a6d2-287672fdf202';
const job = { context: 'c', namespace: 'spark', pod: 'd1', uid: UID, deadlineMs: NOW - 1000 };

/** The cached copy: terminal and selected, but stale. */
const cachedCopy: DriverPod = {
  metadata: {
    name: 'd1',
    namespace: 'spark',
    uid: UID,
    resourceVersion: '41',
    labels: { 'spark-role': 'driver', 'kyuubi-unique-tag': 't' },
  },
  status: { phase: 'Succeeded' },
};
/** The live pod: relabelled out of the selector while the informer was down. */
const livePod: DriverPod = {
  ...cachedCopy,
  metadata: { ...cachedCopy.metadata, resourceVersion: '57', labels: { 'spark-role': 'driver' } },
};

async function recheckWith(
  recheck: RecheckMode,
  cacheUntrusted: boolean | undefined,
  cached: DriverPod | undefined,
): Promise<{ outcome: Outcome; calls: string[] }> {
  const calls: string[] = [];
  const pods: PodApi = {
    async get(ns, name) {
      calls.push(`get ${ns}/${name}`);
      return livePod;
    },
    async delete(ns, name, pre) {
      calls.push(`delete ${ns}/${name}${pre.resourceVersion ? ` rv ${pre.resourceVersion}` : ''}`);
      return pre.resourceVersion && pre.resourceVersion !== '57' ? 'conflict' : 'accepted';
    },
  };
  const deps: CleanupDeps = {
    pods,
    cached: () => cached,
    recheck,
    ...(cacheUntrusted === undefined ? {} : { cacheUntrusted: () => cacheUntrusted }),
    fence: async () => undefined,
    stillLeader: () => true,
    selector: parseLabelSelector('spark-role=driver,kyuubi-unique-tag'),
    policy: 'ALL',
    retentionMs: 0,
    dryRun: false,
    now: () => NOW,
  };
  const outcome = await cleanupDriverPod(job, deps, new AbortController().signal);
  return { outcome, calls };
}

describe('the re-check while the informer is down', () => {
  const skipped: Outcome = { outcome: 'skipped', reason: 'not-selected' };
  const cases: [
    name: string,
    recheck: RecheckMode,
    untrusted: boolean | undefined,
    cached: DriverPod | undefined,
    outcome: Outcome,
    calls: string[],
  ][] = [
    [
      'cache, trusted, stale copy → DELETE from the cache (what the threshold bounds)',
      'cache',
      false,
      cachedCopy,
      { outcome: 'accepted', latenessMs: 1000 },
      ['delete spark/d1'],
    ],
    [
      'cache, untrusted → live GET, relabelled → skipped, no DELETE',
      'cache',
      true,
      cachedCopy,
      skipped,
      ['get spark/d1'],
    ],
    [
      'cache, untrusted, not in the cache (created while down) → live GET, not absent',
      'cache',
      true,
      undefined,
      skipped,
      ['get spark/d1'],
    ],
    [
      'resource-version, trusted, stale copy → DELETE rv 41 → 409 → GET → skipped',
      'resource-version',
      false,
      cachedCopy,
      skipped,
      ['delete spark/d1 rv 41', 'get spark/d1'],
    ],
    [
      'resource-version, untrusted → live GET only, no DELETE',
      'resource-version',
      true,
      cachedCopy,
      skipped,
      ['get spark/d1'],
    ],
    ['live, untrusted → live GET as always', 'live', true, cachedCopy, skipped, ['get spark/d1']],
    [
      'cache, no cacheUntrusted dep (older callers) → the cache is trusted',
      'cache',
      undefined,
      cachedCopy,
      { outcome: 'accepted', latenessMs: 1000 },
      ['delete spark/d1'],
    ],
  ];
  it.each(cases)('%s', async (_name, recheck, untrusted, cached, outcome, calls) => {
    const r = await recheckWith(recheck, untrusted, cached);
    expect(r.outcome).toEqual(outcome);
    expect(r.calls).toEqual(calls);
  });
});
