/**
 * The leadership session's freshness, one gauge per backend (`sdc_lease_keepalive_age_seconds` on etcd,
 * `sdc_zookeeper_disconnected_seconds` on ZooKeeper), each absent while the replica holds no session; and
 * `sdc_dry_run`. Both session gauges are always declared (`# TYPE`), so the shipped rules can name both.
 */
import { describe, expect, it } from 'vitest';
import type { SessionHealth } from '../../src/leadership/leadership.ts';
import { createMetrics, type MetricsSource } from '../../src/telemetry/metrics.ts';

function source(namespace: string, session: SessionHealth | undefined): MetricsSource {
  return {
    target: { cluster: 'c1', context: 'c', namespace },
    isLeader: false,
    ready: true,
    informer: { restarts: 0, synced: true },
    leadership: { session },
    queue: { bullQueue: { getJobCounts: async () => ({}) } },
    overdue: () => ({ count: 0, oldestAgeMs: 0 }),
  };
}

async function scrape(cleaners: MetricsSource[], dryRun?: boolean): Promise<string> {
  const metrics = createMetrics({ processMetrics: false, ...(dryRun === undefined ? {} : { dryRun }) });
  metrics.watch({ cleaners, redis: { status: 'ready' } });
  return (await metrics.scrape()).text;
}

/** The sample lines of one metric (no `# HELP`/`# TYPE`). */
const samples = (text: string, name: string) => text.split('\n').filter((l) => l.startsWith(`${name}{`));

describe('leadership session gauges, one per backend', () => {
  it('etcd: the keepalive age in seconds, under the etcd name only', async () => {
    const text = await scrape([source('a', { backend: 'etcd', keepaliveAgeMs: 2500 })]);
    expect(samples(text, 'sdc_lease_keepalive_age_seconds')).toEqual([
      'sdc_lease_keepalive_age_seconds{cluster="c1",context="c",namespace="a"} 2.5',
    ]);
    expect(samples(text, 'sdc_zookeeper_disconnected_seconds')).toEqual([]);
  });

  it('ZooKeeper: the time disconnected (0 while connected), under the ZooKeeper name only', async () => {
    const text = await scrape([
      source('a', { backend: 'zookeeper', disconnectedMs: 0 }),
      source('b', { backend: 'zookeeper', disconnectedMs: 4000 }),
    ]);
    expect(samples(text, 'sdc_zookeeper_disconnected_seconds')).toEqual([
      'sdc_zookeeper_disconnected_seconds{cluster="c1",context="c",namespace="a"} 0',
      'sdc_zookeeper_disconnected_seconds{cluster="c1",context="c",namespace="b"} 4',
    ]);
    expect(samples(text, 'sdc_lease_keepalive_age_seconds')).toEqual([]);
  });

  it('no session (no lease, a session given up, local leadership): no sample, both names still declared', async () => {
    const text = await scrape([source('a', undefined)]);
    expect(samples(text, 'sdc_lease_keepalive_age_seconds')).toEqual([]);
    expect(samples(text, 'sdc_zookeeper_disconnected_seconds')).toEqual([]);
    expect(text).toMatch(/^# TYPE sdc_lease_keepalive_age_seconds gauge$/m);
    expect(text).toMatch(/^# TYPE sdc_zookeeper_disconnected_seconds gauge$/m);
  });
});

describe('sdc_dry_run', () => {
  it.each([
    [true, 'sdc_dry_run 1'],
    [false, 'sdc_dry_run 0'],
  ])('dryRun %s → %s (no target labels)', async (dryRun, line) => {
    expect((await scrape([], dryRun)).split('\n')).toContain(line);
  });

  it('not exported when the setting is not given', async () => {
    expect(await scrape([])).not.toMatch(/^(# TYPE )?sdc_dry_run /m);
  });
});
