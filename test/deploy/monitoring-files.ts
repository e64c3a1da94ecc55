/**
 * Reads what infra/monitoring ships, for the monitoring tests: the alerting rules and the promtool unit
 * tests of them.
 */
import { readYamlFile } from './render.ts';

/** The rules file (Prometheus `rule_files:` format). */
export const RULES_FILE = 'infra/monitoring/alerts.yaml';
/** The promtool unit tests of the rules. */
export const RULES_TESTS_FILE = 'test/deploy/alerts.promtool.yaml';

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

/** The alerting rules of {@link RULES_FILE}, every group. */
export function alertRules(): AlertRule[] {
  return readYamlFile<RulesFile>(RULES_FILE).groups.flatMap((g) => g.rules);
}

/** For each alert name: how many promtool cases expect it to fire, and how many expect it not to. */
export function alertTestCases(): Map<string, { fires: number; silent: number }> {
  const cases = new Map<string, { fires: number; silent: number }>();
  for (const t of readYamlFile<RulesTestsFile>(RULES_TESTS_FILE).tests) {
    for (const a of t.alert_rule_test ?? []) {
      const c = cases.get(a.alertname) ?? { fires: 0, silent: 0 };
      if ((a.exp_alerts ?? []).length > 0) c.fires += 1;
      else c.silent += 1;
      cases.set(a.alertname, c);
    }
  }
  return cases;
}
