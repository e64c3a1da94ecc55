/**
 * The Grafana dashboard (infra/monitoring/grafana-dashboard.json), checked without Grafana: its panels'
 * layout and data source, the topics it must show, and every query parsed by promtool.
 * monitoring-metrics.test.ts checks the metric names against a running replica.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureTool } from '../ops/test-tools.ts';
import { dashboard, dashboardPanels, dashboardQueries } from './monitoring-files.ts';
import { metricNames } from './promql.ts';

/** Grafana's reference to the dashboard's `datasource` variable. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template literal.
const DATASOURCE_VARIABLE = '${datasource}';

describe('Grafana dashboard (infra/monitoring/grafana-dashboard.json)', () => {
  const d = dashboard();
  const panels = dashboardPanels(d).filter((p) => p.type !== 'row');
  const queries = dashboardQueries(d);

  it('every panel has a title, a unique id and queries through the datasource variable', () => {
    expect(d.uid).toBe('spark-driver-cleaner');
    expect(d.templating.list.map((v) => v.name)).toEqual(['datasource', 'cluster', 'context', 'namespace']);
    const ids = dashboardPanels(d).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels) {
      expect(p.title.length, `panel ${p.id}`).toBeGreaterThan(0);
      expect(p.datasource?.uid, p.title).toBe(DATASOURCE_VARIABLE);
      expect(p.targets?.length ?? 0, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? [])
        expect(t.datasource?.uid, `${p.title} ${t.refId}`).toBe(DATASOURCE_VARIABLE);
    }
  });

  it('panels do not overlap on the 24-column grid', () => {
    const boxes = dashboardPanels(d).map((p) => ({ title: p.title, ...p.gridPos }));
    for (const [i, a] of boxes.entries()) {
      expect(a.x + a.w, a.title).toBeLessThanOrEqual(24);
      for (const b of boxes.slice(i + 1)) {
        const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        expect(overlap, `${a.title} / ${b.title}`).toBe(false);
      }
    }
  });

  it('shows outcomes, lateness, leaders, the leadership session on either backend, queue depth, informer health and overdue pods', () => {
    const used = new Set(queries.flatMap((q) => metricNames(q.expr)));
    for (const name of [
      'sdc_cleanup_outcomes_total',
      'sdc_delete_lateness_seconds_bucket',
      'sdc_leader',
      'sdc_lease_keepalive_age_seconds',
      'sdc_zookeeper_disconnected_seconds',
      'sdc_queue_jobs',
      'sdc_informer_synced',
      'sdc_informer_restarts_total',
      'sdc_overdue_pods',
      'sdc_overdue_oldest_age_seconds',
    ])
      expect(used, name).toContain(name);
  });

  const promtool = ensureTool('promtool');
  it.skipIf(!promtool)('every panel query parses (promtool check rules, as recording rules)', () => {
    // Grafana's variables replaced by values of their kind: a range, a regex.
    const exprs = queries
      .filter((q) => !q.expr.startsWith('label_values('))
      .map((q) => q.expr.replaceAll('$__rate_interval', '5m').replace(/\$\w+/g, '.*'));
    const dir = mkdtempSync(path.join(tmpdir(), 'sdc-dashboard-'));
    try {
      const file = path.join(dir, 'queries.yaml');
      const rules = exprs.map(
        (expr, i) => `      - record: dashboard:query_${i}\n        expr: ${JSON.stringify(expr)}`,
      );
      writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`);
      const r = spawnSync(promtool as string, ['check', 'rules', file], { encoding: 'utf8' });
      expect(`${r.stdout}${r.stderr}`).toContain(`SUCCESS: ${exprs.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
