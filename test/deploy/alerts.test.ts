/**
 * The alerting rules (infra/monitoring/alerts.yaml), checked without Prometheus: the alerts the README
 * describes, each with its annotations and a runbook naming README troubleshooting rows that exist, and
 * covered by promtool cases both ways (test/deploy/alerts.promtool.yaml). scripts/check-deploy.sh runs
 * `promtool check rules` and `promtool test rules` themselves; monitoring-metrics.test.ts checks the metric
 * names against a running replica.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { type AlertRule, alertRules, alertTestCases } from './monitoring-files.ts';
import { REPO_ROOT } from './render.ts';

/** The first cells of the README's Troubleshooting table, backticks removed. */
function troubleshootingRows(): string[] {
  const readme = readFileSync(path.resolve(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Troubleshooting')) ?? '';
  return section
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| ---') && !l.startsWith('| symptom'))
    .map((l) => (l.slice(2).split(' | ')[0] ?? '').replaceAll('`', '').trim());
}

/** The quoted row names of a `runbook` annotation. */
const runbookRows = (runbook: string) => [...runbook.matchAll(/"([^"]+)"/g)].map((m) => m[1] as string);

describe('alerting rules (infra/monitoring/alerts.yaml)', () => {
  const rules = alertRules();

  it('has the alerts the README describes', () => {
    expect(rules.map((r) => r.alert).sort()).toEqual([
      'SparkDriverCleanerAbsent',
      'SparkDriverCleanerCleanupFailing',
      'SparkDriverCleanerEtcdUnreachable',
      'SparkDriverCleanerInformerNotSynced',
      'SparkDriverCleanerInformerRestarting',
      'SparkDriverCleanerLeaseKeepaliveLate',
      'SparkDriverCleanerNoLeader',
      'SparkDriverCleanerPodsOverdue',
      'SparkDriverCleanerRedisUnreachable',
      'SparkDriverCleanerSeveralLeaders',
    ]);
  });

  it.each(rules.map((r) => [r.alert, r] as const))(
    '%s has a severity, a summary, a description and a runbook naming README troubleshooting rows',
    (_name, rule: AlertRule) => {
      expect(rule.labels?.severity).toMatch(/^(warning|critical)$/);
      expect(rule.annotations?.summary?.length ?? 0).toBeGreaterThan(10);
      expect(rule.annotations?.description?.length ?? 0).toBeGreaterThan(40);
      const runbook = rule.annotations?.runbook ?? '';
      expect(runbook).toMatch(/^README\.md#troubleshooting, rows? "/);
      const rows = runbookRows(runbook);
      expect(rows.length).toBeGreaterThan(0);
      const known = troubleshootingRows();
      for (const row of rows) expect(known, `runbook row "${row}"`).toContain(row);
    },
  );

  it('every alert has a promtool case where it fires and one where it does not', () => {
    const cases = alertTestCases();
    const missing = rules.flatMap((r) => {
      const c = cases.get(r.alert);
      return [
        ...(c && c.fires > 0 ? [] : [`${r.alert}: no case where it fires`]),
        ...(c && c.silent > 0 ? [] : [`${r.alert}: no case where it does not fire`]),
      ];
    });
    expect(missing).toEqual([]);
    // A case for an alert that no longer exists tests nothing (promtool would only see it never fire).
    expect([...cases.keys()].filter((name) => !rules.some((r) => r.alert === name))).toEqual([]);
  });
});
