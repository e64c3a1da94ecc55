/**
 * Every metric name the shipped alerts (infra/monitoring/alerts.yaml) and Grafana dashboard query is one a
 * replica exports: read from the `# TYPE` lines of `/metrics` of a running replica (real Redis, the sandbox
 * API server), which prom-client writes for every registered metric, with samples or not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, type OpsEnv, startOpsEnv } from '../ops/ops-env.ts';
import { alertRules, dashboardQueries } from './monitoring-files.ts';
import { exposedNames, metricNames } from './promql.ts';

let env: OpsEnv;
let exported: Set<string>;
let exposition: string;

beforeAll(async () => {
  env = await startOpsEnv(['alpha']);
  const r = await env.startReplica('metrics-1', {
    SDC_TARGETS: 'alpha:metrics-a',
    SDC_QUEUE_PREFIX: 'metrics',
  });
  const res = await http(r.http.url, '/metrics');
  expect(res.status).toBe(200);
  exposition = res.text;
  exported = exposedNames(res.text);
}, 60_000);
afterAll(async () => {
  await env?.stop();
});

const used = [
  ...alertRules().map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
  ...dashboardQueries().map((q) => ({ where: `dashboard ${q.where}`, expr: q.expr })),
].flatMap((q) => metricNames(q.expr).map((name) => ({ ...q, name })));

describe('metric names of the alerts and the dashboard', () => {
  it('reads the names a replica exports, histogram series included', () => {
    expect(exported).toContain('sdc_leader');
    expect(exported).toContain('sdc_delete_lateness_seconds_bucket');
    expect(exported).toContain('sdc_process_resident_memory_bytes');
    expect(exported).toContain('sdc_build_info');
    expect(used.length).toBeGreaterThan(20);
  });

  it('exports the configured election TTL, which the keepalive alert halves (ops-env sets SDC_ELECTION_TTL_SECONDS=3)', () => {
    expect(exposition).toMatch(/^sdc_election_ttl_seconds 3$/m);
  });

  it('every name queried is exported by a replica', () => {
    const unknown = used.filter((u) => !exported.has(u.name)).map((u) => `${u.where}: ${u.name}`);
    expect(unknown).toEqual([]);
  });
});
