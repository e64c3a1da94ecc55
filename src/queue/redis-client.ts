/**
 * The Redis client type every module of the queue takes: one server or Sentinel (ioredis `Redis`, which
 * follows the master a Sentinel names) or a Redis Cluster (ioredis `Cluster`). Both answer the same
 * commands; the queues' keys of one target share a hash tag (src/queue/job-identity.ts), so every multi-key
 * command and script stays in one slot.
 */
import type { Cluster, Redis } from 'ioredis';

/** A connection to the queues' Redis, whatever its shape. */
export type RedisClient = Redis | Cluster;
