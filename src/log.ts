/**
 * Structured logs: one JSON line per event on stdout (pino). Cleanup events carry `context`,
 * `namespace`, `pod`, `uid` and `outcome`; accepted deletes log at info, no-ops at debug, real failures
 * at warn/error with the API Status reason, code and message. A line written inside a sampled span
 * carries its `trace_id` and `span_id`, so logs and traces join in the backend.
 */
import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import { pino } from 'pino';

/** The logger type used across the project (pino's). */
export type Logger = pino.Logger;

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  level?: string;
  /** Fields on every line, e.g. `{ replica: 'host-123' }`. */
  base?: Record<string, unknown>;
  /** Destination file descriptor or stream; default stdout. */
  destination?: pino.DestinationStream;
}

/** Creates the process logger: ISO timestamps, level names (not numbers), `err` serialized. */
export function createLogger(opts: LoggerOptions = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: opts.base ?? {},
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: pino.stdSerializers.err },
      mixin: traceFields,
    },
    opts.destination ?? pino.destination({ fd: 1, sync: false }),
  );
}

/**
 * `trace_id` and `span_id` of the active span, for every log line (pino mixin); `{}` outside a span or
 * with tracing off (the no-op context manager always answers the root context, so this costs a lookup).
 */
export function traceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const sc = span.spanContext();
  return isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}
