/**
 * Redis refusing this replica — a wrong password (WRONGPASS, or `invalid password` before Redis 6), none where
 * one is required (NOAUTH), a database the server does not have — is a configuration error, not an outage:
 * ioredis would reconnect forever and every attempt would be refused the same way. So at start the first
 * answer of the queues' connection is awaited: a refusal stops the start (exit 2 naming the setting and the
 * fix, as src/leadership/etcd/access-check.ts does for etcd); Redis that does not answer is left to the replica,
 * which waits for it like any later outage. Later, a refusal (a password rotated on the server only) is named
 * in the replica's warn line by {@link redisRefusal}.
 */
import { describeRedis } from '../config/redact.ts';
import type { RedisConnection } from '../config/schema.ts';
import type { RedisClient } from './redis-client.ts';

/** How long the start waits for Redis's first answer before leaving it to the replica's retries, ms. */
export const REDIS_ACCESS_CHECK_TIMEOUT_MS = 5000;

/** Redis refused the configured credentials or database at start. */
export class RedisAccessError extends Error {
  override name = 'RedisAccessError';
}

/** A refusal: what Redis refused and what to change. */
export interface RedisRefusal {
  /** The setting to change (`redisUrl`, or `redisPassword` in Sentinel and Cluster modes). */
  readonly setting: string;
  /** What Redis refused, with its reply. */
  readonly why: string;
  /** What to change. */
  readonly fix: string;
}

/** The error Redis answered, or the one a Cluster's startup failed on (`lastNodeError`). */
function replyOf(err: unknown): string {
  const e = err as { message?: string; lastNodeError?: { message?: string } };
  return `${e?.lastNodeError?.message ?? ''} ${e?.message ?? ''}`.trim();
}

/**
 * The refusal `err` stands for, or undefined when it is something else (a network error: an outage).
 * @param conn where Redis is, to name the setting to change
 */
export function redisRefusal(err: unknown, conn: RedisConnection): RedisRefusal | undefined {
  const reply = replyOf(err);
  const setting = conn.mode === 'single' ? 'redisUrl' : 'redisPassword';
  const where =
    conn.mode === 'single'
      ? 'the password in redisUrl (redis://:PASSWORD@host, or redis://USER:PASSWORD@host for an ACL user; percent-encoded)'
      : 'redisPassword (and redisUsername for an ACL user)';
  const line = reply.split('\n')[0] ?? reply;
  if (/WRONGPASS|invalid password|invalid username-password/i.test(reply))
    return {
      setting,
      why: `Redis refused the credentials (${line})`,
      fix: `${where} must be the server's requirepass, or the ACL user's password (ACL SETUSER sets it)`,
    };
  if (/NOAUTH/i.test(reply))
    return {
      setting,
      why: `Redis requires a password and none is configured (${line})`,
      fix: `set ${where}`,
    };
  const db = /DB index is out of range|invalid DB index/i.test(reply);
  if (db && conn.mode === 'single') {
    const n = new URL(conn.url).pathname.replace(/^\//, '') || new URL(conn.url).searchParams.get('db');
    return {
      setting,
      why: `Redis has no database ${n} (${line})`,
      fix: 'redisUrl must name a database the server has: /0 to /15 unless its databases setting allows more',
    };
  }
  return undefined;
}

/**
 * Waits for the connection's first answer: resolves once it is ready, or at the first error that is no
 * refusal (Redis down: the replica's retries take over), or after {@link REDIS_ACCESS_CHECK_TIMEOUT_MS}.
 * @throws RedisAccessError naming the setting, the configured address (secrets masked) and the fix
 */
export async function checkRedisAccess(
  client: RedisClient,
  conn: RedisConnection,
  timeoutMs = REDIS_ACCESS_CHECK_TIMEOUT_MS,
): Promise<void> {
  if (client.status === 'ready') return;
  const refusal = await new Promise<RedisRefusal | undefined>((resolve) => {
    const done = (r: RedisRefusal | undefined) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
      resolve(r);
    };
    const onReady = () => done(undefined);
    const onError = (err: unknown) => done(redisRefusal(err, conn));
    const timer = setTimeout(() => done(undefined), timeoutMs);
    timer.unref();
    client.on('ready', onReady);
    client.on('error', onError);
  });
  if (refusal) throw new RedisAccessError(`${describeRedis(conn)}: ${refusal.why}. Fix: ${refusal.fix}`);
}
