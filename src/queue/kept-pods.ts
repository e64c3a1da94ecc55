/**
 * A target's driver pods kept by Kyuubi's `POD` state source although their driver container has ended
 * (src/rules/kept-by-pod-phase.ts), as its leader last counted them from its informer, kept in one Redis key
 * ({@link keptPodsKey}) so that `status` (which reads Redis, not the API server) can show them. The leader
 * writes it when the count or the names change, and at least every few minutes so that its age says how
 * current it is; a write that fails is only a stale `status` line, so it is not retried.
 */
import { keptPodsKey, type TargetRef } from './job-identity.ts';
import type { RedisClient } from './redis-client.ts';

/** The kept pods of a target, as its leader counted them. */
export interface KeptPods {
  readonly count: number;
  /** The first few pod names, sorted. */
  readonly pods: readonly string[];
  /** The state container the count is about (`applicationStateContainer`). */
  readonly container: string;
  /** When the leader counted them, epoch ms (its wall clock). */
  readonly atMs: number;
  /** The leader that counted them. */
  readonly replica: string;
}

/** Records `kept` for the target; never rejects (a failure only leaves the key stale). */
export async function recordKeptPods(
  redis: Pick<RedisClient, 'set'>,
  prefix: string,
  target: TargetRef,
  kept: KeptPods,
): Promise<void> {
  await redis.set(keptPodsKey(prefix, target), JSON.stringify(kept)).catch(() => undefined);
}

/** Parses the stored value; undefined when absent or not the shape {@link recordKeptPods} writes. */
export function parseKeptPods(text: string | null | undefined): KeptPods | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as Partial<KeptPods>;
    if (
      typeof v.count === 'number' &&
      Number.isInteger(v.count) &&
      v.count >= 0 &&
      Array.isArray(v.pods) &&
      v.pods.every((p) => typeof p === 'string') &&
      typeof v.container === 'string' &&
      typeof v.replica === 'string' &&
      typeof v.atMs === 'number' &&
      Number.isFinite(v.atMs)
    )
      return { count: v.count, pods: v.pods, container: v.container, atMs: v.atMs, replica: v.replica };
  } catch {
    // a hand-edited key: reported as unknown
  }
  return undefined;
}

/** Reads the target's kept pods (undefined when no leader recorded them). */
export async function readKeptPods(
  redis: Pick<RedisClient, 'get'>,
  prefix: string,
  target: TargetRef,
): Promise<KeptPods | undefined> {
  return parseKeptPods(await redis.get(keptPodsKey(prefix, target)));
}
