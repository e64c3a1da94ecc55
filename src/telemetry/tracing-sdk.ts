/**
 * The OpenTelemetry SDK side of tracing.ts, loaded only when tracing is on: sampler from `OTEL_TRACES_SAMPLER`,
 * batch span processor from `OTEL_BSP_*`, OTLP/HTTP (JSON) exporter, resource. The 3.x SDK no longer reads the
 * sampler and batch variables itself (that moved to sdk-node, which would bring gRPC, logs and metrics
 * exporters along), so they are parsed here.
 */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  SimpleSpanProcessor,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { SERVICE_NAME, type Tracing, type TracingOptions } from './tracing.ts';

/**
 * The sampler named by `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`; default `parentbased_always_on`.
 * Returns a warning text for an unknown name or a bad ratio (and then the default, or ratio 1).
 */
export function samplerFromEnv(env: Record<string, string | undefined>): {
  sampler: Sampler;
  warning?: string;
} {
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const argText = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  let warning: string | undefined;
  const ratio = () => {
    if (argText === undefined || argText === '') return 1;
    const r = Number(argText);
    if (Number.isFinite(r) && r >= 0 && r <= 1) return r;
    warning = `OTEL_TRACES_SAMPLER_ARG="${argText}" is not a ratio from 0 to 1; using 1`;
    return 1;
  };
  const parentBased = (root: Sampler) => new ParentBasedSampler({ root });
  let sampler: Sampler;
  switch (name) {
    case 'always_on':
      sampler = new AlwaysOnSampler();
      break;
    case 'always_off':
      sampler = new AlwaysOffSampler();
      break;
    case 'traceidratio':
      sampler = new TraceIdRatioBasedSampler(ratio());
      break;
    case 'parentbased_always_off':
      sampler = parentBased(new AlwaysOffSampler());
      break;
    case 'parentbased_traceidratio':
      sampler = parentBased(new TraceIdRatioBasedSampler(ratio()));
      break;
    case 'parentbased_always_on':
      sampler = parentBased(new AlwaysOnSampler());
      break;
    default:
      warning = `OTEL_TRACES_SAMPLER="${name}" is not supported; using parentbased_always_on`;
      sampler = parentBased(new AlwaysOnSampler());
  }
  return warning ? { sampler, warning } : { sampler };
}

function positiveInt(env: Record<string, string | undefined>, name: string): number | undefined {
  const n = Number(env[name]);
  return env[name] !== undefined && Number.isInteger(n) && n > 0 ? n : undefined;
}

/**
 * Starts the OpenTelemetry SDK: sampler and batch settings from `env`, OTLP/HTTP exporter (or
 * `opts.exporter` with a synchronous processor), resource with `service.name` and `service.instance.id`,
 * and the async-hooks context manager. Called by `createTracing` (tracing.ts) only when tracing is on.
 * Never throws.
 */
export function startSdkTracing(opts: TracingOptions, env: Record<string, string | undefined>): Tracing {
  const warnings: string[] = [];
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  if (!opts.exporter && protocol && protocol !== 'http/json') {
    warnings.push(
      `OTEL_EXPORTER_OTLP_PROTOCOL="${protocol}" is not supported; exporting OTLP over http/json`,
    );
  }
  const { sampler, warning } = samplerFromEnv(env);
  if (warning) warnings.push(warning);

  let processor: SpanProcessor;
  if (opts.exporter) {
    processor = new SimpleSpanProcessor({ exporter: opts.exporter });
  } else {
    processor = new BatchSpanProcessor({
      exporter: new OTLPTraceExporter(),
      scheduledDelayMillis: positiveInt(env, 'OTEL_BSP_SCHEDULE_DELAY'),
      exportTimeoutMillis: positiveInt(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
      maxQueueSize: positiveInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
      maxExportBatchSize: positiveInt(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
    });
  }
  // OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES (envDetector) win over our defaults.
  const resource = resourceFromAttributes({
    'service.name': SERVICE_NAME,
    ...(opts.replicaId ? { 'service.instance.id': opts.replicaId } : {}),
  }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new TracerProvider({ sampler, resource, spanProcessors: [processor] });
  // Spans nest through async calls only with a context manager; a second call (two replicas in one
  // process, in tests) finds it set and keeps it.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager());
  let stopping: Promise<void> | undefined;
  return {
    enabled: true,
    tracer: provider.getTracer(SERVICE_NAME),
    warnings,
    forceFlush: () => provider.forceFlush(),
    shutdown() {
      stopping ??= provider.shutdown().catch(() => {});
      return stopping;
    },
  };
}
