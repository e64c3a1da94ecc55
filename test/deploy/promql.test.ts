/** The metric-name extraction the monitoring checks rely on (test/deploy/promql.ts). */
import { describe, expect, it } from 'vitest';
import { exposedNames, metricNames } from './promql.ts';

describe('metricNames', () => {
  it.each<[string, string, string[]]>([
    ['a bare name', 'sdc_leader', ['sdc_leader']],
    ['a comparison with a number', 'sdc_leader == 0', ['sdc_leader']],
    [
      'label matchers with a metric-like value are not names',
      'sdc_cleanup_outcomes_total{outcome="failed", context=~"sdc_x|$context"}',
      ['sdc_cleanup_outcomes_total'],
    ],
    [
      'functions, ranges and aggregation with by (…) are not names',
      'sum by (context, namespace) (rate(sdc_cleanup_outcomes_total[5m])) > 0',
      ['sdc_cleanup_outcomes_total'],
    ],
    [
      'histogram_quantile over buckets, Grafana interval',
      'histogram_quantile(0.99, sum by (le) (rate(sdc_delete_lateness_seconds_bucket[$__rate_interval])))',
      ['sdc_delete_lateness_seconds_bucket'],
    ],
    [
      'both sides of and/unless with on (…), duplicates once',
      'count by (job, instance) (sdc_leader) unless on (job, instance) count by (job, instance) (sdc_queue_jobs) and sdc_leader',
      ['sdc_leader', 'sdc_queue_jobs'],
    ],
    ['offset with a bare duration, scientific number', 'sdc_leader offset 5m > 1e3', ['sdc_leader']],
    [
      'a subquery',
      'max_over_time(sdc_lease_keepalive_age_seconds[10m:1m])',
      ['sdc_lease_keepalive_age_seconds'],
    ],
    ['absent()', 'absent(sdc_leader)', ['sdc_leader']],
    ['a name that is not ours is reported too', 'up == 0 or sdc_leader', ['up', 'sdc_leader']],
    [
      'Grafana label_values(metric, label)',
      'label_values(sdc_leader{context=~"$context"}, namespace)',
      ['sdc_leader'],
    ],
    ['Grafana label_values(label) names no metric', 'label_values(context)', []],
    ['a number alone', '1', []],
  ])('%s: %s → %j', (_name, expr, names) => {
    expect(metricNames(expr)).toEqual(names);
  });
});

describe('exposedNames', () => {
  it('reads every # TYPE, with the series of histograms and summaries, samples or not', () => {
    const text = [
      '# HELP sdc_leader 1 when leader',
      '# TYPE sdc_leader gauge',
      'sdc_leader{context="a",namespace="b"} 1',
      '# TYPE sdc_delete_lateness_seconds histogram',
      '# TYPE sdc_gc summary',
      '# TYPE sdc_cleanup_outcomes_total counter',
    ].join('\n');
    expect([...exposedNames(text)].sort()).toEqual([
      'sdc_cleanup_outcomes_total',
      'sdc_delete_lateness_seconds_bucket',
      'sdc_delete_lateness_seconds_count',
      'sdc_delete_lateness_seconds_sum',
      'sdc_gc',
      'sdc_gc_count',
      'sdc_gc_sum',
      'sdc_leader',
    ]);
  });
});
