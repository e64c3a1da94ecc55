/**
 * Settings that are valid but probably not what the operator wants: logged at warn when a replica starts
 * (and printed by `run --check`), never refused. Each says what follows from the value and what to set.
 */
import { formatDurationMs } from './duration.ts';
import type { CleanerConfig } from './schema.ts';

/** One warning about the effective configuration. */
export interface ConfigWarning {
  /** The field (YAML key) it is about. */
  readonly field: string;
  /** The field's effective value, as the operator would write it. */
  readonly value: string;
  /** What follows from it, and what to set instead. */
  readonly message: string;
}

/**
 * The margin by which a tombstone should outlive the retention: a pod can be tombstoned (deleted by a
 * person, or seen with `deletionTimestamp`) as soon as it finishes, a full retention before the deadline
 * at which a job added again would run; the hour covers a replica whose informer was restarting (backoff up
 * to minutes) and a leader reconciling from a cache that went stale meanwhile. The default tombstone
 * (24 h) keeps it for a retention of up to 23 h.
 */
export const TOMBSTONE_MARGIN_MS = 3_600_000;

/** Below this a retention is effectively zero: the driver is deleted as soon as it finishes. */
export const SHORT_RETENTION_MS = 1000;

/** The warnings for `config`, in field order; empty for the defaults. */
export function configWarnings(
  config: Pick<CleanerConfig, 'retentionMs' | 'tombstoneTtlMs'>,
): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  if (config.retentionMs < SHORT_RETENTION_MS)
    warnings.push({
      field: 'retention',
      value: formatDurationMs(config.retentionMs),
      message:
        'drivers are deleted as soon as they finish: their logs (kubectl logs) and final status are gone at ' +
        'once, before anyone can read them; Kyuubi keeps PT5M by default (retention, --retention, SDC_RETENTION)',
    });
  if (config.tombstoneTtlMs < config.retentionMs + TOMBSTONE_MARGIN_MS)
    warnings.push({
      field: 'tombstoneTtl',
      value: formatDurationMs(config.tombstoneTtlMs),
      message:
        `shorter than the retention (${formatDurationMs(config.retentionMs)}) + 1h: a pod tombstoned early in ` +
        'its retention can be forgotten before its deadline, and a replica that still sees it enqueues it ' +
        `again (a second DELETE, answered 404); set tombstoneTtl (--tombstone-ttl, SDC_TOMBSTONE_TTL) to at ` +
        `least ${formatDurationMs(config.retentionMs + TOMBSTONE_MARGIN_MS)}`,
    });
  return warnings;
}
