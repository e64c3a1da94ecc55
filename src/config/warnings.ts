/**
 * Settings that are valid but probably not what the operator wants: logged at warn when a replica starts
 * (and printed by `run --check`), never refused. Each says what follows from the value and what to set.
 */
import { formatDurationMs } from './duration.ts';
import { isLoopbackHost } from './http-exposure.ts';
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

/**
 * The longest session timeout a ZooKeeper server grants by default, s: `maxSessionTimeout` is 20 ticks, 40 s
 * at the default `tickTime` of 2000 ms (ZooKeeper Administrator's Guide). A server grants at most that.
 */
export const ZOOKEEPER_DEFAULT_MAX_SESSION_SECONDS = 40;

/** The warnings for `config`, in field order; empty for the defaults. */
export function configWarnings(
  config: Pick<CleanerConfig, 'retentionMs' | 'tombstoneTtlMs'> &
    Partial<
      Pick<
        CleanerConfig,
        | 'electionTtlSeconds'
        | 'zookeeper'
        | 'httpHost'
        | 'httpPort'
        | 'httpAllowUnauthenticated'
        | 'dashboard'
      >
    >,
): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  if (
    config.zookeeper !== undefined &&
    config.electionTtlSeconds !== undefined &&
    config.electionTtlSeconds > ZOOKEEPER_DEFAULT_MAX_SESSION_SECONDS
  )
    warnings.push({
      field: 'electionTtlSeconds',
      value: String(config.electionTtlSeconds),
      message:
        `longer than the session timeout a ZooKeeper server grants by default (${ZOOKEEPER_DEFAULT_MAX_SESSION_SECONDS} s: ` +
        '20 ticks of 2000 ms): unless its maxSessionTimeout is raised, the server grants less, and the granted ' +
        'timeout is what a failover waits for (logged as timeoutMs in "zookeeper session connected"); set ' +
        `electionTtlSeconds (--election-ttl-seconds, SDC_ELECTION_TTL_SECONDS) to at most ${ZOOKEEPER_DEFAULT_MAX_SESSION_SECONDS}`,
    });
  if (config.retentionMs < SHORT_RETENTION_MS)
    warnings.push({
      field: 'retention',
      value: formatDurationMs(config.retentionMs),
      message:
        'drivers are deleted as soon as they finish: their logs (kubectl logs) and final status are gone at ' +
        'once, before anyone can read them (a number without a unit is milliseconds: write 30s, 5m or PT5M); ' +
        'Kyuubi keeps PT5M by default (retention, --retention, SDC_RETENTION)',
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
  const { httpHost, dashboard } = config;
  if (
    config.httpAllowUnauthenticated &&
    httpHost !== undefined &&
    !isLoopbackHost(httpHost) &&
    dashboard?.user === undefined
  )
    warnings.push({
      field: 'httpAllowUnauthenticated',
      value: 'true',
      message:
        `/ui and /api/v1/ answer anyone who reaches ${httpHost}:${config.httpPort ?? '?'} without credentials ` +
        '(the dashboard, pod data, explains with live GETs): make sure a NetworkPolicy or an authenticating ' +
        'sidecar guards the port, or set dashboardUser and dashboardPassword',
    });
  return warnings;
}
