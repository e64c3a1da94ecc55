/** A logger that keeps its JSON lines in memory, for asserting on log output. */
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/log.ts';

export interface MemoryLog {
  log: Logger;
  lines: Record<string, unknown>[];
  /** The lines as written (JSON.parse keeps only the last of a repeated key). */
  raw: string[];
}

export function memoryLogger(level = 'debug'): MemoryLog {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n'))
        if (line.trim()) {
          raw.push(line);
          lines.push(JSON.parse(line));
        }
      cb();
    },
  });
  return { log: createLogger({ level, destination }), lines, raw };
}
