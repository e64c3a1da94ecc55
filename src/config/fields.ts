/**
 * Every configuration field in one table: its key (YAML file and flag base), environment variable,
 * default and meaning. The loader, the `run --help` text and the README's configuration table all
 * come from here, so they cannot drift apart.
 */

/** One configuration field. `key` is camelCase (YAML), the flag is its kebab-case, env is `SDC_` + SNAKE. */
export interface FieldSpec {
  readonly key: string;
  /** Default as the user would write it; `undefined` = no default (optional or required). */
  readonly default?: string;
  /** One line: what it is, its unit and accepted values. */
  readonly help: string;
  /** Masked in the effective-config log line. */
  readonly secret?: boolean;
  /** A boolean switch (`--dry-run`, `SDC_DRY_RUN=true`). */
  readonly flag?: boolean;
  /** Extra environment variables read when the SDC_ one is unset (lowest priority last). */
  readonly envAliases?: readonly string[];
}

export const FIELDS: readonly FieldSpec[] = [
  {
    key: 'targets',
    help: 'Comma-separated `context:namespace` pairs to clean (a bare `namespace` uses the current context, or in-cluster).',
  },
  {
    key: 'kubeconfig',
    help: 'Path to a kubeconfig; unset → $KUBECONFIG, ~/.kube/config, then in-cluster service account.',
    envAliases: ['KUBECONFIG'],
  },
  {
    key: 'labelSelector',
    default: 'spark-role=driver,kyuubi-unique-tag',
    help: 'Server-side label selector of driver pods. Every pod it selects is deleted once finished, so it must require at least one label (`key`, `key=value`, `key in (a,b)`); an empty selector or one of exclusions only (`!key`, `key!=value`, `key notin (…)`) is refused.',
  },
  {
    key: 'policy',
    default: 'ALL',
    help: "`ALL` or `COMPLETED` (Kyuubi's: COMPLETED keeps failed and killed drivers).",
  },
  {
    key: 'retention',
    default: 'PT5M',
    help: 'Retention period after the driver finished: ISO-8601, ms, or `30s`/`5m`.',
  },
  {
    key: 'redisUrl',
    default: 'redis://127.0.0.1:6379',
    help: 'Redis for the cleanup queues (`redis://` or `rediss://`).',
    secret: true,
    envAliases: ['REDIS_URL'],
  },
  {
    key: 'etcdEndpoints',
    help: 'Comma-separated etcd URLs; unset → single-server mode (local leadership).',
    envAliases: ['ETCD_ENDPOINTS'],
  },
  { key: 'electionTtlSeconds', default: '10', help: 'Leader lease TTL in seconds (integer, ≥ 2).' },
  {
    key: 'recheck',
    default: 'resource-version',
    help: 'How the pod is re-checked before its DELETE: `resource-version` (the informer’s copy, confirmed by the API server: DELETE with `preconditions.resourceVersion`; a 409 falls back to a GET — one request per pod), `live` (GET, then DELETE: two) or `cache` (the informer’s copy, DELETE with the UID precondition only).',
  },
  { key: 'apiQps', default: '20', help: 'API requests per second per context (as kube-controller-manager).' },
  { key: 'apiBurst', default: '30', help: 'API request burst per context.' },
  {
    key: 'apiTimeout',
    default: '10s',
    help: 'Client timeout of one GET or DELETE; a DELETE that times out is retried (the UID precondition makes it harmless).',
  },
  {
    key: 'concurrency',
    default: '100',
    help: 'Cleanup jobs in flight per target on its leader (waiting for the API rate limit counts): many in flight let one leader batch its Redis, etcd and API round trips in a burst (bench/README.md).',
  },
  {
    key: 'retryBaseDelay',
    default: '1s',
    help: 'First retry delay of a failed DELETE; doubles per attempt (jitter, ≥ Retry-After).',
  },
  { key: 'retryMaxDelay', default: '5m', help: 'Longest retry delay of a failed DELETE.' },
  { key: 'dryRun', default: 'false', help: 'Log `would-delete` instead of sending DELETE.', flag: true },
  { key: 'replicaId', help: 'This replica’s identity in elections and logs; default `hostname-pid`.' },
  { key: 'httpHost', default: '127.0.0.1', help: 'Address of the HTTP server (health, metrics, dashboard).' },
  { key: 'httpPort', default: '9090', help: 'Port of the HTTP server; 0 picks a free one.' },
  {
    key: 'tombstoneTtl',
    default: 'PT24H',
    help: 'How long a cancelled or completed pod is remembered (≥ 24 h advised).',
  },
  {
    key: 'reconcileInterval',
    default: 'PT10M',
    help: 'Period of the leader’s full reconcile (heals lost Redis data).',
  },
  { key: 'queuePrefix', default: 'sdc', help: 'Redis key prefix of the queues and tombstones.' },
  {
    key: 'logLevel',
    default: 'info',
    help: "`debug` shows no-op outcomes; `info`, `warn`, `error` (also pino's `trace`, `fatal`, `silent`).",
  },
  { key: 'dashboardReadOnly', default: 'true', help: 'Bull dashboard without retry/remove actions.' },
  { key: 'dashboardUser', help: 'Basic-auth user of the dashboard (set with the password).' },
  { key: 'dashboardPassword', help: 'Basic-auth password of the dashboard.', secret: true },
];

/** `retentionMs` → `SDC_RETENTION_MS`: the environment variable of a field key. */
export function envName(key: string): string {
  return `SDC_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** `labelSelector` → `--label-selector`: the command-line flag of a field key. */
export function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}
