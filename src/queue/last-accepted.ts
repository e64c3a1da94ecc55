/**
 * A target's last accepted DELETE, kept in one Redis key ({@link lastAcceptedKey}) so that `status` can say
 * when the target last deleted a pod without reading any replica's logs. One SET per accepted DELETE: a
 * write that fails is only a stale `status` line, never a lost cleanup, so it is not retried.
 */
import { lastAcceptedKey, type TargetRef } from './job-identity.ts';
import type { RedisClient } from './redis-client.ts';

/** The last accepted DELETE of a target. */
export interface LastAccepted {
  readonly pod: string;
  readonly uid: string;
  /** When the API server accepted it, epoch ms (the worker's wall clock). */
  readonly atMs: number;
  /** The replica that sent it. */
  readonly replica: string;
}

/** Records `last` as the target's last accepted DELETE; never rejects (a failure only leaves the key stale). */
export async function recordLastAccepted(
  redis: Pick<RedisClient, 'set'>,
  prefix: string,
  target: TargetRef,
  last: LastAccepted,
): Promise<void> {
  await redis.set(lastAcceptedKey(prefix, target), JSON.stringify(last)).catch(() => undefined);
}

/** Parses the stored value; undefined when absent or not the shape written by {@link recordLastAccepted}. */
export function parseLastAccepted(text: string | null | undefined): LastAccepted | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as Partial<LastAccepted>;
    if (
      typeof v.pod === 'string' &&
      typeof v.uid === 'string' &&
      typeof v.replica === 'string' &&
      typeof v.atMs === 'number' &&
      Number.isFinite(v.atMs)
    )
      return { pod: v.pod, uid: v.uid, atMs: v.atMs, replica: v.replica };
  } catch {
    // a hand-edited key: reported as unknown
  }
  return undefined;
}

/** Reads the target's last accepted DELETE (undefined when none was recorded). */
export async function readLastAccepted(
  redis: Pick<RedisClient, 'get'>,
  prefix: string,
  target: TargetRef,
): Promise<LastAccepted | undefined> {
  return parseLastAccepted(await redis.get(lastAcceptedKey(prefix, target)));
}
