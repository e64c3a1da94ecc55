/**
 * The alerting rules (infra/monitoring/alerts.yaml), checked without Prometheus: the alerts docs/operations.md
 * describes, each with its annotations, a runbook naming rows of docs/troubleshooting.md that exist and a
 * runbook_url to the anchor of the first of them in that page, severities that page only for what users feel
 * (docs/operations.md's table says the same), and covered by promtool cases both ways (test/deploy/alerts.promtool.yaml). scripts/check-deploy.sh runs
 * `promtool check rules` and `promtool test rules` themselves; monitoring-metrics.test.ts checks the metric
 * names against a running replica.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type AlertRule,
  alertRules,
  alertTestCases,
  RULES_FILE,
  RUNBOOK_PAGE,
  RUNBOOK_PAGE_URL,
} from './monitoring-files.ts';
import { REPO_ROOT } from './render.ts';

/** The operations page: the alerts table. */
const OPERATIONS_PAGE = 'docs/operations.md';
const read = (file: string) => readFileSync(path.resolve(REPO_ROOT, file), 'utf8');

/** A section of `file`'s text, from its `## `/`### ` heading to the next heading of any level. */
function section(file: string, title: string): string {
  return (
    read(file)
      .split(/^#{2,3} /m)
      .find((s) => s.startsWith(title)) ?? ''
  );
}

/** The cells of a Markdown table's body rows in `section` (header and separator left out). */
function tableRows(section: string): string[][] {
  const lines = section.split('\n').filter((l) => l.startsWith('| '));
  return lines.slice(2).map((l) => l.slice(2, l.endsWith(' |') ? -2 : undefined).split(' | '));
}

/** A row of the troubleshooting page's table: its first cell (backticks and anchor removed) and its anchor. */
interface TroubleshootingRow {
  name: string;
  anchor: string | undefined;
}

function troubleshootingRows(): TroubleshootingRow[] {
  return tableRows(read(RUNBOOK_PAGE)).map(([first = '']) => {
    const anchor = /^<a id="([^"]+)"><\/a>/.exec(first);
    return {
      name: first
        .replace(/^<a id="[^"]+"><\/a>/, '')
        .replaceAll('`', '')
        .trim(),
      anchor: anchor?.[1],
    };
  });
}

/** The quoted row names of a `runbook` annotation. */
const runbookRows = (runbook: string) => [...runbook.matchAll(/"([^"]+)"/g)].map((m) => m[1] as string);

describe('alerting rules (infra/monitoring/alerts.yaml)', () => {
  const rules = alertRules();

  it('has the alerts docs/operations.md describes', () => {
    expect(rules.map((r) => r.alert).sort()).toEqual([
      'SparkDriverCleanerAbsent',
      'SparkDriverCleanerCleanupFailing',
      'SparkDriverCleanerClusterNameConflict',
      'SparkDriverCleanerEtcdUnreachable',
      'SparkDriverCleanerInformerNotSynced',
      'SparkDriverCleanerInformerRestarting',
      'SparkDriverCleanerLeaseKeepaliveLate',
      'SparkDriverCleanerNoLeader',
      'SparkDriverCleanerPodsOverdue',
      'SparkDriverCleanerRedisUnreachable',
      'SparkDriverCleanerSeveralLeaders',
      'SparkDriverCleanerWaitingForPreviousRelease',
    ]);
  });

  it.each(rules.map((r) => [r.alert, r] as const))(
    '%s has a severity, a summary, a description and a runbook naming rows of docs/troubleshooting.md',
    (_name, rule: AlertRule) => {
      expect(rule.labels?.severity).toMatch(/^(warning|critical)$/);
      expect(rule.annotations?.summary?.length ?? 0).toBeGreaterThan(10);
      expect(rule.annotations?.description?.length ?? 0).toBeGreaterThan(40);
      const runbook = rule.annotations?.runbook ?? '';
      expect(runbook).toMatch(/^docs\/troubleshooting\.md, rows? "/);
      const rows = runbookRows(runbook);
      expect(rows.length).toBeGreaterThan(0);
      const known = troubleshootingRows();
      for (const row of rows)
        expect(
          known.map((r) => r.name),
          `runbook row "${row}"`,
        ).toContain(row);
    },
  );

  it.each(rules.map((r) => [r.alert, r] as const))(
    "%s has a runbook_url: the troubleshooting page's address, then the anchor of the first row its runbook names",
    (_name, rule: AlertRule) => {
      const url = rule.annotations?.runbook_url ?? '';
      expect(url.startsWith(`${RUNBOOK_PAGE_URL}#`), url).toBe(true);
      expect(RUNBOOK_PAGE_URL.endsWith(`/${RUNBOOK_PAGE}`)).toBe(true);
      const anchor = url.slice(RUNBOOK_PAGE_URL.length + 1);
      const row = troubleshootingRows().find((r) => r.anchor === anchor);
      expect(row, `a Troubleshooting row with <a id="${anchor}">`).toBeDefined();
      expect(row?.name).toBe(runbookRows(rule.annotations?.runbook ?? '')[0]);
    },
  );

  it('the runbook anchors are unique, and the rules file and the operations page name the same default address', () => {
    const anchors = [...read(RUNBOOK_PAGE).matchAll(/<a id="([^"]+)"><\/a>/g)].map((m) => m[1]);
    expect(new Set(anchors).size).toBe(anchors.length);
    expect(read(RULES_FILE)).toContain(RUNBOOK_PAGE_URL);
    expect(section(OPERATIONS_PAGE, 'Alerts and dashboard')).toContain(RUNBOOK_PAGE_URL);
  });

  it('pages (critical) only for pods piling up and for no replica scraped; every other alert is a ticket', () => {
    const critical = rules.filter((r) => r.labels?.severity === 'critical').map((r) => r.alert);
    expect(critical.sort()).toEqual(['SparkDriverCleanerAbsent', 'SparkDriverCleanerPodsOverdue']);
    // Every alert waits: one evaluation (a scrape blip, a rollout) never notifies.
    expect(rules.filter((r) => !r.for).map((r) => r.alert)).toEqual([]);
  });

  it("the operations page's alerts table gives each alert its severity (page = critical, ticket = warning)", () => {
    const table = new Map(
      tableRows(section(OPERATIONS_PAGE, 'Alerts and dashboard')).map(([alert = '', severity = '']) => [
        alert.replaceAll('`', ''),
        severity.replaceAll('*', ''),
      ]),
    );
    expect([...table.keys()].sort()).toEqual(rules.map((r) => r.alert).sort());
    for (const r of rules) {
      expect(table.get(r.alert), r.alert).toBe(r.labels?.severity === 'critical' ? 'page' : 'ticket');
    }
  });

  it('the keepalive threshold is half the TTL each replica exports, not a number', () => {
    const keepalive = rules.find((r) => r.alert === 'SparkDriverCleanerLeaseKeepaliveLate');
    expect(keepalive?.expr).toMatch(/sdc_election_ttl_seconds\) \/ 2$/);
    expect(keepalive?.for).toBe('10m');
  });

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
