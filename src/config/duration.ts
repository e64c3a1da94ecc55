/**
 * Durations in configuration: ISO-8601 (`PT5M`, `P1D`, `PT0.5S`), a plain number of milliseconds
 * (`300000`), or a number with a unit (`500ms`, `2s`, `5m`, `24h`, `1d`). Kyuubi writes its retention as
 * ISO-8601 (`kyuubi.kubernetes.terminatedApplicationRetainPeriod=PT5M`), so that form is first-class.
 */

const ISO = /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/i;
const UNIT = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/i;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a duration into milliseconds, or returns `undefined` when the text is not a duration.
 * Numbers pass through as milliseconds. Negative values are not durations.
 */
export function parseDurationMs(input: string | number): number | undefined {
  if (typeof input === 'number') return Number.isFinite(input) && input >= 0 ? input : undefined;
  const text = input.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  const unit = UNIT.exec(text);
  if (unit) return Math.round(Number(unit[1]) * (UNIT_MS[(unit[2] ?? '').toLowerCase()] ?? Number.NaN));
  const iso = ISO.exec(text);
  if (!iso || text === 'P' || /T$/i.test(text)) return undefined;
  const [, d = '0', h = '0', m = '0', s = '0'] = iso;
  return Math.round(((Number(d) * 24 + Number(h)) * 60 + Number(m)) * 60_000 + Number(s) * 1000);
}

/** Formats milliseconds as a short human duration (`1500` → `1.5s`, `300000` → `5m`), for logs. */
export function formatDurationMs(ms: number): string {
  if (ms % 86_400_000 === 0 && ms > 0) return `${ms / 86_400_000}d`;
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`;
  if (ms >= 1000) return `${ms / 1000}s`;
  return `${ms}ms`;
}
