/**
 * Traces (OpenTelemetry), configured by the standard `OTEL_*` environment variables and exported over
 * OTLP/HTTP (JSON). Tracing is **on** only when an OTLP endpoint is configured
 * (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or `OTEL_TRACES_EXPORTER=otlp`,
 * and `OTEL_SDK_DISABLED` is not `true`. Otherwise the tracer is OpenTelemetry's no-op one: no context
 * manager, no processor, no exporter, so a span costs an object allocation and nothing is sent.
 *
 * Variables read (OpenTelemetry specification, "SDK environment variables"):
 * `OTEL_SDK_DISABLED`, `OTEL_TRACES_EXPORTER` (`otlp` or `none`), `OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`,
 * `…_HEADERS`, `…_TIMEOUT`, `…_COMPRESSION`, `…_CERTIFICATE` (read by the exporter itself),
 * `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`,
 * `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_EXPORT_TIMEOUT`, `OTEL_BSP_MAX_QUEUE_SIZE`,
 * `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`. The 3.x SDK no longer reads the sampler and batch variables itself
 * (that moved to sdk-node, which would bring gRPC, logs and metrics exporters along), so they are parsed here.
 */
import {
  type Context,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';

/** Name of the tracer and default `service.name`. */
export const SERVICE_NAME = 'spark-driver-cleaner';

/** Options of {@link createTracing}. */
export interface TracingOptions {
  /**
   * Environment deciding on/off, the sampler and the batch settings (default `process.env`). The OTLP
   * exporter (endpoint, headers, timeout, certificates) and the resource detector (`OTEL_SERVICE_NAME`,
   * `OTEL_RESOURCE_ATTRIBUTES`) always read `process.env` themselves.
   */
  env?: Record<string, string | undefined>;
  /**
   * Export to this exporter instead of OTLP (tests: an `InMemorySpanExporter`). Turns tracing on whatever
   * the environment says, with a synchronous processor so that spans are visible as soon as they end.
   */
  exporter?: SpanExporter;
  /** `service.instance.id` of the resource: the replica id. */
  replicaId?: string;
}

/** The process's tracing. */
export interface Tracing {
  /** False when nothing is configured: the tracer is a no-op. */
  readonly enabled: boolean;
  readonly tracer: Tracer;
  /** Problems with the `OTEL_*` variables worth a warning line (tracing still starts when possible). */
  readonly warnings: readonly string[];
  /** Exports what is buffered; resolves when done (or at once when disabled). */
  forceFlush(): Promise<void>;
  /** Flushes and stops exporting. Idempotent. */
  shutdown(): Promise<void>;
}

const truthy = (v: string | undefined) => v?.trim().toLowerCase() === 'true';

/** Whether the environment asks for traces (see the module comment). Pure. */
export function tracingRequested(env: Record<string, string | undefined>): boolean {
  if (truthy(env.OTEL_SDK_DISABLED)) return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.includes('none')) return false;
  if (exporters.includes('otlp')) return true;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

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

/** Creates the process's tracing from the environment (or an injected exporter). Never throws. */
export function createTracing(opts: TracingOptions = {}): Tracing {
  const env = opts.env ?? process.env;
  if (!opts.exporter && !tracingRequested(env)) {
    return {
      enabled: false,
      tracer: new ProxyTracerProvider().getTracer(SERVICE_NAME),
      warnings: [],
      forceFlush: async () => {},
      shutdown: async () => {},
    };
  }
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

const propagator = new W3CTraceContextPropagator();

/** The W3C `traceparent` of a context's span, to store in a job; undefined when the span is not sampled/valid. */
export function traceparentOf(ctx: Context): string | undefined {
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, defaultTextMapSetter);
  return carrier.traceparent;
}

/** A context whose remote parent is the given `traceparent` (the root context when absent or malformed). */
export function contextFromTraceparent(traceparent: string | undefined): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
}
