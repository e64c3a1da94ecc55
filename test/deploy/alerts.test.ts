/**
 * The alerting rules (infra/monitoring/alerts.yaml, and the optional kube-state-metrics-alerts.yaml), checked
 * with and without Prometheus: `promtool check rules` and `promtool test rules` (test/deploy/alerts.promtool.yaml,
 * a case where each alert fires at each of its severities and one where it does not); the alerts
 * docs/operations.md describes, each with its annotations, a runbook naming rows of docs/troubleshooting.md that
 * exist and a runbook_url to the anchor of the first of them in that page; severities that page only for pods
 * piling up and for no replica scraped, each page preceded by a ticket (docs/operations.md's table says the
 * same); labels that route to the cleaner's operators (docs/deployment.md's route matches them).
 * monitoring-metrics.test.ts checks the metric names against a running replica.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ensureTool } from '../ops/test-tools.ts';
import {
  type AlertRule,
  alertTestCases,
  allAlertRules,
  KSM_RULES_FILE,
  RULE_FILES,
  RULES_TESTS_FILE,
  RUNBOOK_PAGE,
  RUNBOOK_PAGE_URL,
} from './monitoring-files.ts';
import { REPO_ROOT, readYamlFile } from './render.ts';

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

/** The names of `rules`, each once, sorted. */
const namesOf = (rules: AlertRule[]) => [...new Set(rules.map((r) => r.alert))].sort();

const promtool = ensureTool('promtool');

describe('alerting rules under promtool', () => {
  it.skipIf(!promtool)('promtool check rules: every rules file is valid', () => {
    for (const file of RULE_FILES) {
      const r = spawnSync(promtool as string, ['check', 'rules', file], { cwd: REPO_ROOT, encoding: 'utf8' });
      expect(r.status, `${file}: ${r.stdout}${r.stderr}`).toBe(0);
    }
  });

  it.skipIf(!promtool)(`promtool test rules ${RULES_TESTS_FILE}: every case passes`, () => {
    const r = spawnSync(promtool as string, ['test', 'rules', RULES_TESTS_FILE], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    expect(`${r.stdout}${r.stderr}`).toContain('SUCCESS');
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    // The cases read both files.
    const tests = readYamlFile<{ rule_files: string[] }>(RULES_TESTS_FILE);
    expect(
      tests.rule_files.map((f) => path.relative(REPO_ROOT, path.resolve(REPO_ROOT, 'test/deploy', f))),
    ).toEqual([...RULE_FILES]);
  });
});

describe('alerting rules (infra/monitoring/alerts.yaml, kube-state-metrics-alerts.yaml)', () => {
  const rules = allAlertRules();

  it('has the alerts docs/operations.md describes', () => {
    expect(namesOf(rules)).toEqual([
      'SparkDriverCleanerAbsent',
      'SparkDriverCleanerAnotherDeleter',
      'SparkDriverCleanerCleanupFailing',
      'SparkDriverCleanerClusterNameConflict',
      'SparkDriverCleanerDryRunPodsOverdue',
      'SparkDriverCleanerFinishedDriversNotDeleted',
      'SparkDriverCleanerInformerNotSynced',
      'SparkDriverCleanerInformerRestarting',
      'SparkDriverCleanerLeadershipBackendConflict',
      'SparkDriverCleanerLeadershipBackendUnreachable',
      'SparkDriverCleanerLeadershipSessionAtRisk',
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
    for (const file of RULE_FILES) expect(read(file)).toContain(RUNBOOK_PAGE_URL);
    expect(section(OPERATIONS_PAGE, 'Alerts and dashboard')).toContain(RUNBOOK_PAGE_URL);
  });

  it('pages (critical) only for pods piling up and for no replica scraped; every other alert is a ticket', () => {
    const critical = namesOf(rules.filter((r) => r.labels?.severity === 'critical'));
    expect(critical).toEqual([
      'SparkDriverCleanerAbsent',
      'SparkDriverCleanerDryRunPodsOverdue',
      'SparkDriverCleanerFinishedDriversNotDeleted',
      'SparkDriverCleanerPodsOverdue',
    ]);
    // Every alert waits: one evaluation (a scrape blip, a rollout) never notifies.
    expect(rules.filter((r) => !r.for).map((r) => r.alert)).toEqual([]);
  });

  it('a page for pods piling up comes after a ticket of the same name: the same query with a lower age threshold', () => {
    // The age threshold: the last number compared with `>` in the query.
    const threshold = (r: AlertRule) => Number(/> (\d+)(?![\s\S]*> \d)/.exec(r.expr)?.[1]);
    const withoutThreshold = (r: AlertRule) => r.expr.replace(String(threshold(r)), 'N');
    for (const page of rules.filter(
      (r) => r.labels?.severity === 'critical' && r.alert !== 'SparkDriverCleanerAbsent',
    )) {
      const tickets = rules.filter((r) => r.alert === page.alert && r.labels?.severity === 'warning');
      expect(tickets, page.alert).toHaveLength(1);
      const ticket = tickets[0] as AlertRule;
      expect(withoutThreshold(ticket), page.alert).toBe(withoutThreshold(page));
      expect(threshold(ticket), page.alert).toBeLessThan(threshold(page));
      expect(ticket.for, page.alert).toBe(page.for);
    }
  });

  it("the operations page's alerts table gives each alert its severity (page = critical, ticket = warning)", () => {
    const table = new Map(
      tableRows(section(OPERATIONS_PAGE, 'Alerts and dashboard')).map(([alert = '', severity = '']) => [
        alert.replaceAll('`', ''),
        severity.replaceAll('*', ''),
      ]),
    );
    expect([...table.keys()].sort()).toEqual(namesOf(rules));
    for (const name of namesOf(rules)) {
      const severities = new Set(rules.filter((r) => r.alert === name).map((r) => r.labels?.severity));
      const expected = severities.has('critical')
        ? severities.has('warning')
          ? 'ticket, then page'
          : 'page'
        : 'ticket';
      expect(table.get(name), name).toBe(expected);
    }
  });

  it('the session threshold is half the TTL each replica exports, not a number, on either backend', () => {
    const session = rules.find((r) => r.alert === 'SparkDriverCleanerLeadershipSessionAtRisk');
    expect(session?.expr).toMatch(/sdc_election_ttl_seconds\) \/ 2$/);
    expect(session?.expr).toContain('sdc_lease_keepalive_age_seconds');
    expect(session?.expr).toContain('sdc_zookeeper_disconnected_seconds');
    expect(session?.for).toBe('10m');
  });

  it('absence is read from sdc_build_info, which every replica exports with or without targets', () => {
    expect(rules.find((r) => r.alert === 'SparkDriverCleanerAbsent')?.expr).toMatch(
      /^absent\(sdc_build_info\)/,
    );
  });

  it('every alert, at each of its severities, has a promtool case where it fires, and one where it does not', () => {
    const cases = alertTestCases();
    const missing = rules.flatMap((r) => {
      const c = cases.get(r.alert);
      const severity = r.labels?.severity ?? '';
      return [
        ...((c?.fires.get(severity) ?? 0) > 0 ? [] : [`${r.alert}: no case where it fires (${severity})`]),
        ...(c && c.silent > 0 ? [] : [`${r.alert}: no case where it does not fire`]),
      ];
    });
    expect(missing).toEqual([]);
    // A case for an alert that no longer exists tests nothing (promtool would only see it never fire).
    expect([...cases.keys()].filter((name) => !rules.some((r) => r.alert === name))).toEqual([]);
  });
});

describe('routing labels', () => {
  const rules = allAlertRules();
  /** The alerts whose query keeps the target namespace (`by (…, namespace)`): they name it in target_namespace. */
  const aboutATarget = (r: AlertRule) => /\bby \((?:\w+, )*namespace\)/.test(r.expr);

  it("every alert names the cleaner (service, namespace) for the operators' routes; one about a target names it in target_namespace", () => {
    for (const r of rules) {
      expect(r.labels?.service, r.alert).toBe('spark-driver-cleaner');
      expect(r.labels?.namespace, r.alert).toBe('spark-driver-cleaner');
      expect(r.labels?.target_namespace, r.alert).toBe(
        aboutATarget(r) ? '{{ $labels.namespace }}' : undefined,
      );
    }
    expect(rules.filter(aboutATarget).length).toBeGreaterThan(5);
  });

  it("docs/deployment.md's Alertmanager example routes on those labels and inhibits a ticket under its page", () => {
    const doc = read('docs/deployment.md');
    const after = doc.slice(doc.indexOf('**Routing.**'));
    const block = /```yaml\n([\s\S]*?)```/.exec(after)?.[1] ?? '';
    const config = parse(block) as {
      route: { routes: { matchers: string[]; receiver: string; routes?: { matchers: string[] }[] }[] };
      inhibit_rules: { source_matchers: string[]; target_matchers: string[]; equal: string[] }[];
    };
    const [route] = config.route.routes;
    expect(route?.matchers).toEqual(['service="spark-driver-cleaner"']);
    expect(route?.routes?.[0]?.matchers).toEqual(['severity="critical"']);
    const [inhibit] = config.inhibit_rules;
    expect(inhibit?.source_matchers).toContain('severity="critical"');
    expect(inhibit?.target_matchers).toContain('severity="warning"');
    expect(inhibit?.equal).toEqual(expect.arrayContaining(['alertname', 'target_namespace']));
  });
});

describe('the kube-state-metrics rules', () => {
  const rules = allAlertRules().filter((r) => /\bkube_/.test(r.expr));

  it('read kube-state-metrics only, and match the drivers by the labels of the base label selector', () => {
    expect(namesOf(rules)).toEqual(['SparkDriverCleanerFinishedDriversNotDeleted']);
    expect(
      readYamlFile<{ groups: { rules: AlertRule[] }[] }>(KSM_RULES_FILE).groups.flatMap((g) => g.rules),
    ).toEqual(rules);
    const base = read('infra/k8s/base/kustomization.yaml');
    const selector = /SDC_LABEL_SELECTOR=(\S+)/.exec(base)?.[1] ?? '';
    const keys = selector.split(',').map((term) => term.split('=')[0] as string);
    expect(keys).toEqual(['spark-role', 'kyuubi-unique-tag']);
    for (const r of rules) {
      expect(r.expr).not.toMatch(/\bsdc_/);
      // kube-state-metrics turns a label `spark-role` into `label_spark_role`.
      for (const key of keys) expect(r.expr, r.alert).toContain(`label_${key.replaceAll('-', '_')}`);
    }
    // The flag that exposes them, the same wherever it is documented.
    const flag = `--metric-labels-allowlist=pods=[${keys.join(',')}]`;
    for (const file of [
      KSM_RULES_FILE,
      'infra/monitoring/kube-state-metrics/kustomization.yaml',
      'docs/deployment.md',
    ])
      expect(read(file), file).toContain(flag);
  });
});
