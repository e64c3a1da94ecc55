/**
 * Every configuration field in one table: its key (YAML file and flag base), environment variable,
 * default and meaning. The loader, the `run --help` text and the README's configuration table all
 * come from here, so they cannot drift apart.
 */
import { parseDurationMs } from './duration.ts';

/**
 * Node's timers hold a signed 32-bit number of ms: a longer delay (~24.8 days) fires after 1 ms, with only
 * a TimeoutOverflowWarning. A field that ends up in a timer must stay at or below it.
 */
export const NODE_TIMER_MAX_MS = 2 ** 31 - 1;

/**
 * The accepted range of a duration field, both bounds included. `min` and `max` are written as the
 * field's values are: durations (`1s`, `PT24H`) for duration fields, a number of seconds for
 * `electionTtlSeconds`. Outside it the loader refuses the value (exit 2).
 */
export interface DurationRange {
  readonly min: string;
  readonly max: string;
  /** Why these bounds: shown in the error and the README. */
  readonly why: string;
  /** The value is put in a Node timer (setTimeout/setInterval/AbortSignal.timeout): max ≤ {@link NODE_TIMER_MAX_MS}. */
  readonly nodeTimer: boolean;
}

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
  /** Every duration field has one: the values accepted. */
  readonly range?: DurationRange;
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
    range: {
      min: '0',
      max: '365d',
      why: '0 deletes a driver as soon as it finishes (allowed, with a warning); it is a BullMQ delay (a Redis score), never a Node timer',
      nodeTimer: false,
    },
  },
  {
    key: 'redisUrl',
    default: 'redis://127.0.0.1:6379',
    help: 'Redis for the cleanup queues (`redis://` or `rediss://`); a password as userinfo (`redis://:secret@host`) or in the query (`?password=`), masked in logs.',
    secret: true,
    envAliases: ['REDIS_URL'],
  },
  {
    key: 'redisMode',
    default: 'single',
    help: 'How Redis is reached: `single` (one server at `redisUrl`), `sentinel` (the master that `redisSentinels` name for `redisMasterName`; followed across failovers) or `cluster` (a Redis Cluster found from `redisClusterNodes`). README “Redis: one server, Sentinel or Cluster”.',
  },
  {
    key: 'redisSentinels',
    help: 'Sentinel mode: comma-separated `host:port` of the Sentinels (port default 26379).',
  },
  {
    key: 'redisMasterName',
    help: 'Sentinel mode: the name of the master group the Sentinels monitor (e.g. `mymaster`).',
  },
  {
    key: 'redisClusterNodes',
    help: 'Cluster mode: comma-separated `host:port` startup nodes (some of the nodes, or the configuration endpoint of a managed cluster; port default 6379).',
  },
  {
    key: 'redisUsername',
    help: 'Sentinel and cluster modes: the Redis ACL user (single mode: in `redisUrl`).',
  },
  {
    key: 'redisPassword',
    help: 'Sentinel and cluster modes: the Redis password (single mode: in `redisUrl`).',
    secret: true,
  },
  {
    key: 'redisSentinelPassword',
    help: 'Sentinel mode: the password of the Sentinels themselves (their `requirepass`), when they have one.',
    secret: true,
  },
  {
    key: 'redisTls',
    default: 'false',
    help: 'Sentinel and cluster modes: TLS to Redis, and to the Sentinels (single mode: a `rediss://` URL). Certificates are checked against Node’s CAs plus `NODE_EXTRA_CA_CERTS`.',
    flag: true,
  },
  {
    key: 'etcdEndpoints',
    help: 'Comma-separated etcd URLs, `http(s)://host:port` only (no credentials, path or query); unset → single-server mode (local leadership).',
    envAliases: ['ETCD_ENDPOINTS'],
  },
  {
    key: 'zookeeper',
    help: 'Comma-separated ZooKeeper servers `host:port`, optionally followed by a chroot (`zk1:2181,zk2:2181/chroot`): leadership on ZooKeeper (e.g. the quorum of `kyuubi.ha.addresses`) instead of etcd. Set `etcdEndpoints` or `zookeeper`, not both; neither → single-server mode.',
  },
  {
    key: 'zookeeperRoot',
    default: '/spark-driver-cleaner',
    help: "With `zookeeper`: the path (inside the chroot) under which the cleaner creates its nodes; keep it outside Kyuubi's `kyuubi.ha.namespace` (Kyuubi reads every child there as a server address), so `/kyuubi…` is refused.",
  },
  {
    key: 'zookeeperAuth',
    help: 'With `zookeeper`: digest authentication `user:password`; every node the cleaner creates then gets `CREATOR_ALL_ACL`. Unset → no authentication, open ACLs.',
    secret: true,
  },
  {
    key: 'zookeeperAuthFile',
    help: 'With `zookeeper`: a file holding `user:password` (a mounted Secret), instead of `zookeeperAuth`.',
  },
  {
    key: 'electionTtlSeconds',
    default: '10',
    help: "TTL of the replica's etcd lease, or its ZooKeeper session timeout (one for all its targets), in seconds (integer). ZooKeeper bounds session timeouts to 2–20 ticks (4–40 s by default).",
    range: {
      min: '2',
      max: '3600',
      why: 'a leader fences itself (no DELETE) once TTL − 1 s have passed without a keepalive, so 2 s is the least that leaves it time to work; a failover waits up to one TTL',
      nodeTimer: true,
    },
  },
  {
    key: 'recheck',
    default: 'resource-version',
    help: 'How the pod is re-checked before its DELETE: `resource-version` (the informer’s copy, confirmed by the API server: DELETE with `preconditions.resourceVersion`; a 409 falls back to a GET — one request per pod), `live` (GET, then DELETE: two) or `cache` (the informer’s copy, DELETE with the UID precondition only).',
  },
  {
    key: 'apiQps',
    default: '20',
    help: 'API requests per second per context (as kube-controller-manager), every request counted: GET, DELETE, and the informers’ LIST pages and WATCHes; waiting GETs and DELETEs go first.',
  },
  { key: 'apiBurst', default: '30', help: 'API request burst per context.' },
  {
    key: 'informerScope',
    default: 'namespace',
    help: '`namespace`: one pod informer (list+watch) per target, needing list/watch on pods in each target namespace; `cluster`: one per context, watching pods of all namespaces and keeping those of its targets — one list+watch per context whatever the number of targets, but it needs list/watch on pods cluster-wide (a ClusterRole, README “Deployment”).',
  },
  {
    key: 'apiHttp2',
    default: 'off',
    help: '`off`: HTTP/1.1 to the API servers, one TCP connection per open watch (T per replica and context in namespace scope). `on`: offer HTTP/2 (ALPN, `https://` servers only; `http://` stays HTTP/1.1), so the watches of a context share one connection (up to 100 streams each; more open another). Off by default: one lost connection then drops every watch of the context at once, and `informerScope: cluster` already needs one watch per context.',
  },
  {
    key: 'apiTimeout',
    default: '10s',
    help: 'Client timeout of one GET or DELETE; a DELETE that times out is retried (the UID precondition makes it harmless).',
    range: {
      min: '1s',
      max: '5m',
      why: "below 1 s a loaded API server's ordinary answers are abandoned and retried; kube-apiserver ends a request after its --request-timeout (60 s by default), so waiting longer than 5 min only holds a job slot",
      nodeTimer: true,
    },
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
    range: {
      min: '100ms',
      max: '1h',
      why: 'below 100 ms a failing API is retried in a hot loop; at most retryMaxDelay. A BullMQ delay, never a Node timer',
      nodeTimer: false,
    },
  },
  {
    key: 'retryMaxDelay',
    default: '5m',
    help: 'Longest retry delay of a failed DELETE, a longer `Retry-After` included.',
    range: {
      min: '1s',
      max: '1h',
      why: 'the API server asks for a Retry-After in whole seconds, so a cap under 1 s is shorter than any it asks for; above an hour a pod whose DELETE keeps failing waits hours between attempts. A BullMQ delay, never a Node timer',
      nodeTimer: false,
    },
  },
  {
    key: 'dryRun',
    default: 'false',
    help: 'Log `would-delete` instead of sending DELETE. Switched off later, those pods are deleted (their finished jobs are replaced).',
    flag: true,
  },
  { key: 'replicaId', help: 'This replica’s identity in elections and logs; default `hostname-pid`.' },
  { key: 'httpHost', default: '127.0.0.1', help: 'Address of the HTTP server (health, metrics, dashboard).' },
  { key: 'httpPort', default: '9090', help: 'Port of the HTTP server; 0 picks a free one.' },
  {
    key: 'tombstoneTtl',
    default: 'PT24H',
    help: 'How long a cancelled or completed pod is remembered (a tombstone, and the finished job that makes a repeated enqueue a no-op).',
    range: {
      min: '1h',
      max: '365d',
      why: 'below an hour a replica whose informer was restarting, or a leader reconciling from a stale cache, can enqueue a pod already deleted again: a second DELETE. A Redis TTL and BullMQ job age, never a Node timer; each remembered pod holds Redis memory that long',
      nodeTimer: false,
    },
  },
  {
    key: 'reconcileInterval',
    default: 'PT10M',
    help: 'Period of the leader’s full reconcile (heals lost Redis data, retries exhausted jobs).',
    range: {
      min: '1s',
      max: '24h',
      why: 'each run checks every cached pod against Redis, so below 1 s it never rests; it is what heals lost Redis data, so over a day leaves such pods a day overdue. A Node timer (setInterval)',
      nodeTimer: true,
    },
  },
  {
    key: 'overdueGrace',
    help: 'Self-check: a terminated driver pod still present this long after its deadline counts as overdue (`sdc_overdue_pods`); a leader stuck this long steps down; a follower logs an error at twice it. Unset → 2 × `electionTtlSeconds` + 30 s (one failover never counts).',
    range: {
      min: '1s',
      max: '24h',
      why: 'compared with pod deadlines and intervals, never a Node timer; under a failover (up to 2 × TTL + a reconcile) a short grace reports healthy targets as overdue, and over a day hides a stopped target for a day',
      nodeTimer: false,
    },
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

/**
 * The range of a field in ms, or `undefined` for a field without one. `electionTtlSeconds` is written in
 * seconds; every other range is a duration (src/config/duration.ts).
 * @throws Error when a bound in {@link FIELDS} is not a duration (a programming error, caught by the tests).
 */
export function rangeMs(spec: FieldSpec): { minMs: number; maxMs: number } | undefined {
  if (!spec.range) return undefined;
  const toMs = (v: string) => (spec.key.endsWith('Seconds') ? Number(v) * 1000 : parseDurationMs(v));
  const minMs = toMs(spec.range.min);
  const maxMs = toMs(spec.range.max);
  if (minMs === undefined || maxMs === undefined || Number.isNaN(minMs) || Number.isNaN(maxMs))
    throw new Error(`${spec.key}: range ${spec.range.min}–${spec.range.max} is not a duration`);
  return { minMs, maxMs };
}

/** The field spec of `key`. @throws Error for a key not in {@link FIELDS} (a programming error). */
export function fieldSpec(key: string): FieldSpec {
  const spec = FIELDS.find((f) => f.key === key);
  if (!spec) throw new Error(`no configuration field ${key}`);
  return spec;
}
