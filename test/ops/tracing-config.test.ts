/**
 * Tracing configuration from OTEL_* variables: when it turns on, which sampler, and that with nothing
 * configured nothing is recorded or sent; with an endpoint, spans reach an OTLP/HTTP collector (a small
 * in-test HTTP server) with the service name and the job's traceparent.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { traceFields } from '../../src/log.ts';
import type { CleanupJobData } from '../../src/rules/job-data.ts';
import { createTelemetry } from '../../src/telemetry/telemetry.ts';
import { createTracing, tracingRequested } from '../../src/telemetry/tracing.ts';
import { samplerFromEnv } from '../../src/telemetry/tracing-sdk.ts';
import { waitFor } from '../helpers/wait.ts';

const job: CleanupJobData = {
  context: 'alpha',
  namespace: 'ns',
  pod: 'app-driver',
  uid: '0b9d2a5e-5b51-4c0b-9a55-1f0c3b1c2d3e',
  deadlineMs: 0,
  finishedAtMs: 0,
  enqueuedBy: 'r1',
};

describe('tracingRequested', () => {
  it.each([
    ['nothing set → off', {}, false],
    ['OTEL_EXPORTER_OTLP_ENDPOINT set → on', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, true],
    ['traces endpoint set → on', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }, true],
    ['OTEL_TRACES_EXPORTER=otlp alone → on (default endpoint)', { OTEL_TRACES_EXPORTER: 'otlp' }, true],
    [
      'endpoint set but OTEL_TRACES_EXPORTER=none → off',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' },
      false,
    ],
    [
      'endpoint set but OTEL_SDK_DISABLED=true → off',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'TRUE' },
      false,
    ],
    ['blank endpoint → off', { OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }, false],
  ])('%s', (_name, env, expected) => {
    expect(tracingRequested(env)).toBe(expected);
  });
});

describe('samplerFromEnv', () => {
  it.each([
    ['unset → parent-based always on', {}, /^ParentBased\{root=AlwaysOnSampler/, undefined],
    ['always_off', { OTEL_TRACES_SAMPLER: 'always_off' }, /^AlwaysOffSampler$/, undefined],
    [
      'traceidratio 0.25',
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' },
      /^TraceIdRatioBased\{0\.25\}$/,
      undefined,
    ],
    [
      'parentbased_traceidratio with ratio 2 → ratio 1 and a warning',
      { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' },
      /^ParentBased\{root=TraceIdRatioBased\{1\}/,
      /not a ratio/,
    ],
    [
      'unknown name → default and a warning',
      { OTEL_TRACES_SAMPLER: 'jaeger_remote' },
      /^ParentBased/,
      /jaeger_remote/,
    ],
  ])('%s', (_name, env, sampler, warning) => {
    const s = samplerFromEnv(env);
    expect(s.sampler.toString()).toMatch(sampler);
    if (warning) expect(s.warning).toMatch(warning);
    else expect(s.warning).toBeUndefined();
  });
});

describe('with no OTEL_* configured', () => {
  it('records nothing: no traceparent on the job, no trace fields on log lines', async () => {
    const telemetry = await createTelemetry({ env: {}, processMetrics: false });
    expect(telemetry.tracing.enabled).toBe(false);
    let sent: CleanupJobData | undefined;
    let fields: ReturnType<typeof traceFields> | undefined;
    await telemetry
      .forTarget({ cluster: 'c1', context: 'alpha', namespace: 'ns' })
      .enqueue('added', job, async (d) => {
        sent = d;
        fields = traceFields();
        return 'added';
      });
    expect(sent).toEqual(job);
    expect(fields).toEqual({});
  });
});

describe('OTLP/HTTP export', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('sends spans to OTEL_EXPORTER_OTLP_ENDPOINT with OTEL_SERVICE_NAME, joined through the traceparent', async () => {
    const bodies: { path: string; body: string }[] = [];
    const collector = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        bodies.push({ path: req.url ?? '', body });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
    try {
      const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
      // The exporter and the resource detector read process.env themselves.
      Object.assign(process.env, {
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        OTEL_SERVICE_NAME: 'sdc-under-test',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      });
      const tracing = await createTracing({ replicaId: 'r1' });
      expect(tracing.enabled).toBe(true);
      expect(tracing.warnings).toEqual([]);
      const telemetry = await createTelemetry({ replicaId: 'r1', processMetrics: false });
      const target = telemetry.forTarget({ cluster: 'c1', context: 'alpha', namespace: 'ns' });
      let stamped: CleanupJobData | undefined;
      await target.enqueue('added', job, async (d) => {
        stamped = d;
        return 'added';
      });
      expect(stamped?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      await target.process(stamped ?? job, async () => ({ outcome: 'already-absent' }));
      await telemetry.tracing.forceFlush();
      const traceId = stamped?.traceparent?.split('-')[1];
      const received = await waitFor('the collector got the spans', () => {
        const all = bodies.map((b) => b.body).join('\n');
        return all.includes('process cleanup job') && all.includes('enqueue cleanup job') ? all : undefined;
      });
      expect(bodies.every((b) => b.path === '/v1/traces')).toBe(true);
      expect(received).toContain('"sdc-under-test"');
      expect(received).toContain('informer event');
      // Every span of the exchange is in the job's trace (OTLP/JSON carries ids as hex).
      const ids = [...received.matchAll(/"traceId":"([0-9a-f]{32})"/g)].map((m) => m[1]);
      expect(new Set(ids)).toEqual(new Set([traceId]));
      await Promise.all([tracing.shutdown(), telemetry.shutdown()]);
    } finally {
      await new Promise((r) => collector.close(r));
    }
  });
});
