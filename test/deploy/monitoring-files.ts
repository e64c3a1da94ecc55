/**
 * Reads what infra/monitoring ships, for the monitoring tests: the alerting rules (the cleaner's own, and the
 * optional ones on kube-state-metrics), the promtool unit tests of them, and the PromQL queries of the Grafana
 * dashboard.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, readYamlFile } from './render.ts';

/** The rules file on the cleaner's own series (Prometheus `rule_files:` format). */
export const RULES_FILE = 'infra/monitoring/alerts.yaml';
/** The optional rules file on kube-state-metrics' series (finished drivers in any namespace). */
export const KSM_RULES_FILE = 'infra/monitoring/kube-state-metrics-alerts.yaml';
/** Every shipped rules file. */
export const RULE_FILES = [RULES_FILE, KSM_RULES_FILE] as const;
/** The promtool unit tests of the rules. */
export const RULES_TESTS_FILE = 'test/deploy/alerts.promtool.yaml';
/** The Grafana dashboard. */
export const DASHBOARD_FILE = 'infra/monitoring/grafana-dashboard.json';
/**
 * The troubleshooting page's address every `runbook_url` of the rules file starts with (then `#` and a
 * row's anchor); an overlay replaces it with its own (docs/deployment.md, "Monitoring").
 */
export const RUNBOOK_PAGE_URL =
  'https://github.com/spark-driver-cleaner/spark-driver-cleaner/blob/main/docs/troubleshooting.md';
/** The page the runbook rows and their anchors are in (relative to the repository root). */
export const RUNBOOK_PAGE = 'docs/troubleshooting.md';

/** One alerting rule, as the tests read it. */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** A rules file: groups of rules. */
export interface RulesFile {
  groups: { name: string; rules: AlertRule[] }[];
}

/** One `alert_rule_test` of a promtool tests file. */
interface AlertRuleTest {
  eval_time: string;
  alertname: string;
  exp_alerts?: unknown[];
}

/** A promtool tests file (the fields the checks read). */
export interface RulesTestsFile {
  rule_files: string[];
  tests: { name?: string; alert_rule_test?: AlertRuleTest[] }[];
}

/** The alerting rules of a rules file (default {@link RULES_FILE}, the cleaner's own), every group. */
export function alertRules(file: string = RULES_FILE): AlertRule[] {
  return readYamlFile<RulesFile>(file).groups.flatMap((g) => g.rules);
}

/** The alerting rules of every shipped rules file ({@link RULE_FILES}). */
export function allAlertRules(): AlertRule[] {
  return RULE_FILES.flatMap((f) => alertRules(f));
}

/**
 * For each alert name: how many promtool cases expect it to fire, by the severity they expect (`fires`, keyed by
 * the expected `severity` label), and how many expect it not to fire at all (`silent`).
 */
export function alertTestCases(): Map<string, { fires: Map<string, number>; silent: number }> {
  const cases = new Map<string, { fires: Map<string, number>; silent: number }>();
  for (const t of readYamlFile<RulesTestsFile>(RULES_TESTS_FILE).tests) {
    for (const a of t.alert_rule_test ?? []) {
      const c = cases.get(a.alertname) ?? { fires: new Map<string, number>(), silent: 0 };
      const expected = (a.exp_alerts ?? []) as { exp_labels?: Record<string, string> }[];
      if (expected.length === 0) c.silent += 1;
      for (const e of expected) {
        const severity = e.exp_labels?.severity ?? '';
        c.fires.set(severity, (c.fires.get(severity) ?? 0) + 1);
      }
      cases.set(a.alertname, c);
    }
  }
  return cases;
}

/** One PromQL query of the dashboard: where it is (panel title and refId, or variable name) and its text. */
export interface DashboardQuery {
  where: string;
  expr: string;
}

interface GrafanaPanel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: { refId: string; expr: string; datasource?: { type: string; uid: string } }[];
  panels?: GrafanaPanel[];
}

/** The dashboard JSON (the fields the checks read). */
export interface GrafanaDashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: GrafanaPanel[];
  templating: { list: { name: string; type: string; query?: string | { query: string } }[] };
}

/** The dashboard, parsed. */
export function dashboard(): GrafanaDashboard {
  return JSON.parse(readFileSync(path.resolve(REPO_ROOT, DASHBOARD_FILE), 'utf8')) as GrafanaDashboard;
}

/** Every panel, those inside collapsed rows included. */
export function dashboardPanels(d: GrafanaDashboard = dashboard()): GrafanaPanel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Every PromQL query of the dashboard's panels, and the `query` variables' queries (`label_values(…)`). */
export function dashboardQueries(d: GrafanaDashboard = dashboard()): DashboardQuery[] {
  const panels = dashboardPanels(d).flatMap((p) =>
    (p.targets ?? []).map((t) => ({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr })),
  );
  const variables = d.templating.list
    .filter((v) => v.type === 'query')
    .map((v) => ({
      where: `variable $${v.name}`,
      expr: typeof v.query === 'string' ? v.query : (v.query?.query ?? ''),
    }));
  return [...panels, ...variables];
}
