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
 * `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (the sampler and batch ones are parsed by tracing-sdk.ts, which this module
 * loads only when tracing is on, so that a replica without tracing does not load the SDK).
 */
import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { SpanExporter } from '@opentelemetry/sdk-trace';

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
 * Creates the process's tracing from the environment (or an injected exporter). The OpenTelemetry SDK and
 * the OTLP exporter (~6 MiB of code) are loaded only when tracing is on (tracing-sdk.ts). Never rejects.
 */
export async function createTracing(opts: TracingOptions = {}): Promise<Tracing> {
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
  const { startSdkTracing } = await import('./tracing-sdk.ts');
  return startSdkTracing(opts, env);
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
