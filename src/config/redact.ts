/**
 * Secrets out of what is logged or printed about the configuration: the effective-configuration line at
 * start, `run --check`, and configuration errors that quote a URL. A Redis URL carries its password either
 * as userinfo (`redis://:secret@host`, `redis://user:secret@host`) or, because ioredis turns every query
 * parameter into a connection option, in its query (`redis://host?password=secret`, `sentinelPassword`,
 * …): both are masked, and every query value but a few known harmless ones.
 */
import type { CleanerConfig, RedisConnection } from './schema.ts';

/** What a masked secret reads as. */
export const MASK = '***';

/** Query parameters whose values are never secret (ioredis options); every other value is masked. */
const PLAIN_QUERY_KEYS: ReadonlySet<string> = new Set(['db', 'family']);

/**
 * `url` with its userinfo password, its query values and its fragment masked (the user name and the harmless
 * `db` and `family` kept). Text that is not a URL is masked the same way by pattern, so a malformed URL quoted
 * in an error does not leak either: there everything up to the last `@` after the first `:` of the userinfo is
 * the password (an unencoded `#`, `/` or `?` in a password is what often makes such a URL malformed).
 */
export function maskUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    const userinfo = /^([a-z][a-z0-9+.-]*:\/\/)(.*)@/i.exec(url);
    const rest = userinfo ? url.slice(userinfo[0].length) : url;
    const colon = userinfo?.[2]?.indexOf(':') ?? -1;
    const head = userinfo
      ? `${userinfo[1]}${colon < 0 ? MASK : `${userinfo[2]?.slice(0, colon)}:${MASK}`}@`
      : '';
    return `${head}${rest}`
      .replace(/#.*$/, `#${MASK}`)
      .replace(/([?&])([^=&#]*)=([^&#]*)/g, (m, sep: string, key: string) =>
        PLAIN_QUERY_KEYS.has(key) ? m : `${sep}${key}=${MASK}`,
      );
  }
  if (parsed.password) parsed.password = MASK;
  for (const key of new Set(parsed.searchParams.keys()))
    if (!PLAIN_QUERY_KEYS.has(key)) parsed.searchParams.set(key, MASK);
  if (parsed.hash) parsed.hash = MASK;
  return parsed.toString();
}

/** The configuration as one log-safe object: URL credentials and query values masked, the dashboard password too. */
export function redactConfig(config: CleanerConfig): Record<string, unknown> {
  return {
    ...config,
    targets: [
      ...config.targets.map((t) => `${t.context ?? '(current)'}:${t.namespace}`),
      ...config.discover.map((d) => `${d.context ?? '(current)'}:*`),
    ],
    discover: undefined,
    redis: redactRedis(config.redis),
    etcdEndpoints: config.etcdEndpoints.map(maskUrl),
    etcdSecurity: { ...config.etcdSecurity, password: config.etcdSecurity.password ? MASK : undefined },
    zookeeper: config.zookeeper && {
      ...config.zookeeper,
      auth:
        config.zookeeper.auth === undefined ? undefined : `${config.zookeeper.auth.split(':')[0]}:${MASK}`,
    },
    dashboard: { ...config.dashboard, password: config.dashboard.password ? MASK : undefined },
  };
}

/** A {@link RedisConnection} as it may be logged: the URL masked ({@link maskUrl}), passwords as {@link MASK}. */
export function redactRedis(conn: RedisConnection): Record<string, unknown> {
  if (conn.mode === 'single') return { mode: conn.mode, url: maskUrl(conn.url) };
  return {
    ...conn,
    ...(conn.password ? { password: MASK } : {}),
    ...('sentinelPassword' in conn && conn.sentinelPassword ? { sentinelPassword: MASK } : {}),
  };
}

/**
 * Where Redis is, for an error message: the settings that name it and their values, secrets masked, e.g.
 * `redisUrl (--redis-url, SDC_REDIS_URL) redis://:***@redis:6379` or
 * `redisSentinels (--redis-sentinels, SDC_REDIS_SENTINELS) s1:26379,s2:26379, master mymaster`.
 */
export function describeRedis(conn: RedisConnection): string {
  const list = (nodes: readonly { host: string; port: number }[]) =>
    nodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(',');
  switch (conn.mode) {
    case 'single':
      return `redisUrl (--redis-url, SDC_REDIS_URL) ${maskUrl(conn.url)}`;
    case 'sentinel':
      return `redisSentinels (--redis-sentinels, SDC_REDIS_SENTINELS) ${list(conn.sentinels)}, master ${conn.masterName}`;
    case 'cluster':
      return `redisClusterNodes (--redis-cluster-nodes, SDC_REDIS_CLUSTER_NODES) ${list(conn.nodes)}`;
  }
}
