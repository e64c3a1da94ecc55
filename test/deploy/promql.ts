/**
 * The metric names a PromQL expression (or a Grafana `label_values(…)` query) selects, without a full
 * PromQL parser: what is left once strings, label matchers, ranges, grouping label lists, function
 * calls, keywords and numbers are taken out is the metric names. Enough for the rules and dashboard
 * this repository ships, whose metrics are all written as bare names (never `{__name__="…"}`).
 */

/** PromQL keywords and operators spelt as words (they are never metric names here). */
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'atan2',
  'inf',
  'nan',
]);

/**
 * The metric names in `expr`, in order of appearance, without duplicates.
 *
 * Grafana variables (`$context`, `${datasource}`, `$__rate_interval`) are ignored; `label_values(m, l)`
 * yields `m`, and `label_values(l)` nothing.
 */
export function metricNames(expr: string): string[] {
  const labelValues = /^\s*label_values\s*\((.*)\)\s*$/s.exec(expr);
  if (labelValues) {
    const args = labelValues[1] ?? '';
    // label_values(label) names no metric; label_values(metric{…}, label) names one.
    return args.includes(',') ? metricNames(args.slice(0, args.lastIndexOf(','))) : [];
  }
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ') // strings
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // label lists
    .replace(/\$\{[^}]*\}|\$\w+/g, ' '); // Grafana variables
  const names: string[] = [];
  for (const m of stripped.matchAll(/(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    const name = m[1] as string;
    if (m[2] !== undefined || KEYWORDS.has(name.toLowerCase())) continue; // a call, or a keyword
    if (!names.includes(name)) names.push(name);
  }
  return names;
}

/** The series names a metric family of a given type exposes (`# TYPE name histogram` → `_bucket`…). */
export function seriesNames(name: string, type: string): string[] {
  if (type === 'histogram') return [`${name}_bucket`, `${name}_sum`, `${name}_count`];
  if (type === 'summary') return [name, `${name}_sum`, `${name}_count`];
  return [name];
}

/** Every series name a Prometheus text exposition declares with `# TYPE` (present with or without samples). */
export function exposedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm))
    for (const n of seriesNames(m[1] as string, m[2] as string)) names.add(n);
  return names;
}
