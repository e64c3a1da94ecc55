/**
 * The PrometheusRule (monitoring.coreos.com/v1) of infra/monitoring/prometheus-operator, generated from
 * infra/monitoring/alerts.yaml so that the rules are written once: its `spec` is the rules file from
 * `groups:` on, indented (comments included). `npx node test/deploy/prometheus-rule.ts` rewrites it;
 * test/deploy/prometheus-rule.test.ts fails when it is out of date.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RULES_FILE } from './monitoring-files.ts';
import { REPO_ROOT } from './render.ts';

/** The generated PrometheusRule (relative to the repository root). */
export const PROMETHEUS_RULE_FILE = 'infra/monitoring/prometheus-operator/prometheusrule.yaml';

/** Thrown when the rules file has no top-level `groups:` line. */
export class RulesFileError extends Error {
  override name = 'RulesFileError';
}

const HEADER = `# GENERATED from ../alerts.yaml by \`npx node test/deploy/prometheus-rule.ts\`: edit that file, then
# run the command (test/deploy/prometheus-rule.test.ts fails while this copy differs).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: spark-driver-cleaner
  namespace: spark-driver-cleaner
  labels:
    app.kubernetes.io/name: spark-driver-cleaner
    app.kubernetes.io/part-of: spark-driver-cleaner
spec:
`;

/**
 * The PrometheusRule text for a rules file's text: the header above, then every line from the
 * top-level `groups:` on, indented by two spaces (uniform indentation keeps YAML, block scalars
 * included, meaning the same one level down).
 *
 * @throws {RulesFileError} when `rulesText` has no line `groups:` at column 0.
 */
export function prometheusRuleYaml(rulesText: string): string {
  const lines = rulesText.split('\n');
  const start = lines.findIndex((l) => /^groups:\s*$/.test(l));
  if (start < 0) throw new RulesFileError(`${RULES_FILE}: no top-level "groups:" line`);
  const body = lines
    .slice(start)
    .map((l) => (l === '' ? l : `  ${l}`))
    .join('\n');
  return `${HEADER}${body.replace(/\n*$/, '\n')}`;
}

const read = (file: string) => readFileSync(path.resolve(REPO_ROOT, file), 'utf8');

/** The PrometheusRule text generated from the rules file as it is on disk now. */
export function generatedPrometheusRule(): string {
  return prometheusRuleYaml(read(RULES_FILE));
}

if (import.meta.main) {
  writeFileSync(path.resolve(REPO_ROOT, PROMETHEUS_RULE_FILE), generatedPrometheusRule());
  process.stdout.write(`wrote ${PROMETHEUS_RULE_FILE} from ${RULES_FILE}\n`);
}
