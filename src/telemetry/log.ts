/**
 * Structured logs: one JSON line per event on stdout (pino). Cleanup events carry `context`,
 * `namespace`, `pod`, `uid` and `outcome`; accepted deletes log at info, no-ops at debug, real failures
 * at warn/error with the API Status reason, code and message.
 */
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
    },
    opts.destination ?? pino.destination({ fd: 1, sync: false }),
  );
}
