/**
 * The one place that turns the configured Redis shape (src/config/schema.ts `RedisConnection`: one server,
 * Sentinel or Cluster) into an ioredis client. Everything downstream takes a {@link RedisClient} and never asks
 * which shape it is: both answer the same commands, and a target's keys share a hash tag
 * (src/queue/job-identity.ts), so every multi-key command and script of a queue stays in one slot.
 *
 * - Sentinel: ioredis asks the Sentinels for the master of `masterName` and, with `failoverDetector`, listens
 *   to their `+switch-master` so it reconnects to a new master at once, also when the old one hangs (frozen,
 *   partitioned) instead of closing its connections.
 * - Cluster: ioredis follows MOVED/ASK redirections and refreshes the slot map after a failover; a command to
 *   a failed master is retried (`retryDelayOnFailover`) while the cluster promotes its replica.
 * - BullMQ's connections need `maxRetriesPerRequest: null` (a Worker's commands wait for Redis instead of
 *   failing); BullMQ opens each Worker's blocking connection with `duplicate()`, for a Cluster too.
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { RedisConnection } from '../config/schema.ts';

/** A connection to the queues' Redis, whatever its shape. */
export type RedisClient = Redis | Cluster;

/** Options of {@link createRedisClient}. */
export interface RedisClientOptions {
  /** The client name Redis shows in CLIENT LIST (`sdc:<replica>`). */
  connectionName: string;
  /** `null`: commands wait for the connection (BullMQ's requirement); a number: they fail after that many retries. */
  maxRetriesPerRequest: number | null;
  /** The delay before the `times`-th reconnect, ms; `null` gives up. */
  retryStrategy: (times: number) => number | null;
  /** How long a connection attempt may take, ms (default ioredis's 10 000). */
  connectTimeoutMs?: number;
  /** How long one command may wait for its answer, ms (default: no limit). `status` and `explain` set it. */
  commandTimeoutMs?: number;
  /** How long closing waits for the server to acknowledge, ms (default ioredis's 2 000). */
  disconnectTimeoutMs?: number;
}

/** Creates the client for `conn`; it connects at once (commands sent meanwhile wait in the offline queue). */
export function createRedisClient(conn: RedisConnection, opts: RedisClientOptions): RedisClient {
  const common: RedisOptions = {
    connectionName: opts.connectionName,
    maxRetriesPerRequest: opts.maxRetriesPerRequest,
    ...(opts.connectTimeoutMs === undefined ? {} : { connectTimeout: opts.connectTimeoutMs }),
    ...(opts.commandTimeoutMs === undefined ? {} : { commandTimeout: opts.commandTimeoutMs }),
    ...(opts.disconnectTimeoutMs === undefined ? {} : { disconnectTimeout: opts.disconnectTimeoutMs }),
  };
  switch (conn.mode) {
    case 'single':
      return new Redis(conn.url, { ...common, retryStrategy: opts.retryStrategy });
    case 'sentinel':
      return new Redis({
        ...common,
        sentinels: conn.sentinels.map(({ host, port }) => ({ host, port })),
        name: conn.masterName,
        role: 'master',
        ...(conn.username ? { username: conn.username } : {}),
        ...(conn.password ? { password: conn.password } : {}),
        ...(conn.sentinelPassword ? { sentinelPassword: conn.sentinelPassword } : {}),
        ...(conn.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
        failoverDetector: true,
        retryStrategy: opts.retryStrategy,
        sentinelRetryStrategy: opts.retryStrategy,
      });
    case 'cluster': {
      const options: ClusterOptions = {
        redisOptions: {
          ...common,
          ...(conn.username ? { username: conn.username } : {}),
          ...(conn.password ? { password: conn.password } : {}),
          ...(conn.tls ? { tls: {} } : {}),
        },
        clusterRetryStrategy: opts.retryStrategy,
        // A failed master's slots answer nothing until its replica is promoted (the cluster's node timeout):
        // commands retry meanwhile instead of failing after ioredis's 16 × 100 ms.
        retryDelayOnFailover: 500,
        retryDelayOnClusterDown: 500,
        // Managed clusters with TLS (ElastiCache, MemoryDB) sign certificates for the configuration endpoint's
        // name, not the node IPs the cluster announces: connect by the announced address as given.
        ...(conn.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
      };
      return new Cluster(
        conn.nodes.map(({ host, port }) => ({ host, port })),
        options,
      );
    }
  }
}

/** A second connection like `client` (same shape and options) under another client name (undefined: none). */
export function duplicateClient(client: RedisClient, connectionName: string | undefined): RedisClient {
  if (client instanceof Cluster) {
    return client.duplicate(undefined, {
      redisOptions: { ...client.options.redisOptions, connectionName },
    });
  }
  return client.duplicate({ connectionName });
}
