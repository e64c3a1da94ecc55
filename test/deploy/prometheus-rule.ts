/**
 * The PrometheusRules (monitoring.coreos.com/v1) of infra/monitoring, generated from the rules files so that the
 * rules are written once: each one's `spec` is its rules file from `groups:` on, indented (comments included).
 * `npx node test/deploy/prometheus-rule.ts` rewrites them; test/deploy/prometheus-rule.test.ts fails when one is
 * out of date.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { KSM_RULES_FILE, RULES_FILE } from './monitoring-files.ts';
import { REPO_ROOT } from './render.ts';

/** One generated PrometheusRule: its rules file, its own file and its name (paths relative to the repository root). */
export interface GeneratedRule {
  readonly rulesFile: string;
  readonly file: string;
  readonly name: string;
}

/** The cleaner's own rules, in the component ./prometheus-operator. */
export const PROMETHEUS_RULE: GeneratedRule = {
  rulesFile: RULES_FILE,
  file: 'infra/monitoring/prometheus-operator/prometheusrule.yaml',
  name: 'spark-driver-cleaner',
};
/** The optional rules on kube-state-metrics, in the component ./kube-state-metrics. */
export const KSM_PROMETHEUS_RULE: GeneratedRule = {
  rulesFile: KSM_RULES_FILE,
  file: 'infra/monitoring/kube-state-metrics/prometheusrule.yaml',
  name: 'spark-driver-cleaner-kube-state-metrics',
};
/** Every generated PrometheusRule. */
export const GENERATED_RULES = [PROMETHEUS_RULE, KSM_PROMETHEUS_RULE] as const;
/** The generated PrometheusRule of the cleaner's own rules (relative to the repository root). */
export const PROMETHEUS_RULE_FILE = PROMETHEUS_RULE.file;

/** Thrown when the rules file has no top-level `groups:` line. */
export class RulesFileError extends Error {
  override name = 'RulesFileError';
}

/** The header of a generated PrometheusRule: where it comes from, its kind and metadata. */
function header(rule: GeneratedRule): string {
  const source = path.relative(path.dirname(rule.file), rule.rulesFile);
  return `# GENERATED from ${source} by \`npx node test/deploy/prometheus-rule.ts\`: edit that file, then
# run the command (test/deploy/prometheus-rule.test.ts fails while this copy differs).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: ${rule.name}
  namespace: spark-driver-cleaner
  labels:
    app.kubernetes.io/name: spark-driver-cleaner
    app.kubernetes.io/part-of: spark-driver-cleaner
spec:
`;
}

/**
 * The PrometheusRule text for a rules file's text: the header of `rule`, then every line from the top-level
 * `groups:` on, indented by two spaces (uniform indentation keeps YAML, block scalars included, meaning the same
 * one level down).
 *
 * @throws {RulesFileError} when `rulesText` has no line `groups:` at column 0.
 */
export function prometheusRuleYaml(rulesText: string, rule: GeneratedRule = PROMETHEUS_RULE): string {
  const lines = rulesText.split('\n');
  const start = lines.findIndex((l) => /^groups:\s*$/.test(l));
  if (start < 0) throw new RulesFileError(`${rule.rulesFile}: no top-level "groups:" line`);
  const body = lines
    .slice(start)
    .map((l) => (l === '' ? l : `  ${l}`))
    .join('\n');
  return `${header(rule)}${body.replace(/\n*$/, '\n')}`;
}

const read = (file: string) => readFileSync(path.resolve(REPO_ROOT, file), 'utf8');

/** A PrometheusRule's text generated from its rules file as it is on disk now. */
export function generatedPrometheusRule(rule: GeneratedRule = PROMETHEUS_RULE): string {
  return prometheusRuleYaml(read(rule.rulesFile), rule);
}

if (import.meta.main) {
  for (const rule of GENERATED_RULES) {
    writeFileSync(path.resolve(REPO_ROOT, rule.file), generatedPrometheusRule(rule));
    process.stdout.write(`wrote ${rule.file} from ${rule.rulesFile}\n`);
  }
}
