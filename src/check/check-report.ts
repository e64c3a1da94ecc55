/**
 * How `check` prints its results: one line per check under its group, ✓ ‼ ✗ – as `linkerd check` does, the
 * fix under every line that needs one, and a last line with the counts and the exit code; or one JSON
 * document for scripts (`--output json`), whose shape docs/check-output.schema.json documents and
 * test/unit/check-report.test.ts validates.
 */

import { type CheckResult, type CheckStatus, checkExitCode } from '../check-result.ts';
import { VERSION } from '../version.ts';

/** The `apiVersion` of the JSON document: changes only when a field changes meaning or goes away. */
export const CHECK_REPORT_API_VERSION = 'spark-driver-cleaner.check/v1';

const SYMBOL: Readonly<Record<CheckStatus, string>> = {
  pass: '✓',
  warn: '‼',
  fail: '✗',
  unreachable: '✗',
  skip: '–',
};

/** The number of results per status. */
export function summarize(results: readonly CheckResult[]): Record<CheckStatus, number> {
  const counts: Record<CheckStatus, number> = { pass: 0, warn: 0, fail: 0, unreachable: 0, skip: 0 };
  for (const r of results) counts[r.status]++;
  return counts;
}

/** The text report: groups in the order they first appear, one line per check, the fix indented below. */
export function formatCheckText(results: readonly CheckResult[]): string {
  const groups = new Map<string, CheckResult[]>();
  for (const r of results) {
    const list = groups.get(r.group) ?? [];
    list.push(r);
    groups.set(r.group, list);
  }
  const lines: string[] = [];
  for (const [group, list] of groups) {
    lines.push(group);
    for (const r of list) {
      lines.push(`  ${SYMBOL[r.status]} ${r.message}`);
      if (r.fix && r.status !== 'pass' && r.status !== 'skip') lines.push(`      fix: ${r.fix}`);
    }
    lines.push('');
  }
  const c = summarize(results);
  lines.push(
    `${c.pass} passed, ${c.warn} warning${c.warn === 1 ? '' : 's'}, ${c.fail} failed, ${c.unreachable} not answering, ` +
      `${c.skip} skipped: exit ${checkExitCode(results)}`,
  );
  return `${lines.join('\n')}\n`;
}

/** The JSON report (docs/check-output.schema.json). `exitCode` defaults to the results' own. */
export function checkJson(
  results: readonly CheckResult[],
  exitCode: number = checkExitCode(results),
): Record<string, unknown> {
  return {
    apiVersion: CHECK_REPORT_API_VERSION,
    version: VERSION,
    exitCode,
    summary: summarize(results),
    checks: results,
  };
}
