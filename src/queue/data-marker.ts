/**
 * A target's data marker: one key in the queue's slot (src/queue/job-identity.ts `dataMarkerKey`) that holds
 * the run id of the Redis server that stores it. Redis replication is asynchronous, and a server restarted
 * without persistence starts empty, so the queue can lose jobs that `add()` acknowledged; the marker is how
 * the leader notices:
 *
 * - the marker is **gone**: the data was flushed, or the server restarted empty, or a replica that never
 *   received it was promoted;
 * - the marker names **another server** than the one answering now: a failover (or a restart) happened, and
 *   the new master may lag behind the old one by the writes it had not yet replicated.
 *
 * One read is one script (`INFO server` for the run id, `GET`, and a `SET` only when the value changes) on the
 * master of the queue's slot. A first read of a fresh install finds no marker and writes one: that is no loss,
 * the caller tells the two apart by whether it had read the marker before (src/cleaner/data-loss-watch.ts).
 * Where a managed Redis refuses `INFO` inside scripts, the marker holds a random token instead and only its
 * disappearance is seen.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from './redis-client.ts';

/**
 * Why a leader thinks its queue's data was lost: the marker is gone, or it names another server than the one
 * answering (a failover or a restart).
 */
export type DataLossReason = 'marker-missing' | 'master-changed';

/** What one read of the marker found. */
export interface MarkerReading {
  /** The marker's value before this read; undefined when there was none. */
  readonly seen: string | undefined;
  /** Its value now: the run id of the server holding it (or a token, see the module header). */
  readonly current: string;
}

/** A target's data marker. */
export interface DataMarker {
  /**
   * Reads the marker and sets it to the answering server's run id. Waits while Redis is unreachable (the
   * connection's `maxRetriesPerRequest: null`).
   * @throws the Redis error of the script (e.g. NOSCRIPT-free EVAL refused by an ACL).
   */
  read(): Promise<MarkerReading>;
  /**
   * Calls `listener` when the connection comes back or the Cluster's nodes change (a failover, a restart):
   * moments when a read is worth making at once. Returns the unsubscribe.
   */
  onTopologyChange(listener: () => void): () => void;
}

/**
 * KEYS[1] the marker, ARGV[1] a token used when INFO is refused. Returns `{seen or '', current}`. INFO inside a
 * script is allowed from Redis 5 on (scripts replicate their effects, not their text).
 */
const READ_MARKER = `
local info = redis.pcall('INFO', 'server')
local runId = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or false
local seen = redis.call('GET', KEYS[1])
local current = runId or seen or ARGV[1]
if seen ~= current then redis.call('SET', KEYS[1], current) end
return {seen or '', current}
`;

/** Events of ioredis's `Redis` (`ready`) and `Cluster` (`+node`, `-node`, `ready`) that follow a topology change. */
const TOPOLOGY_EVENTS = ['ready', '+node', '-node'] as const;

/**
 * Creates the marker of one target on `redis` (the queues' commands connection).
 * @param key the marker's key ({@link dataMarkerKey}).
 */
export function createDataMarker(redis: RedisClient, key: string): DataMarker {
  const token = randomUUID();
  return {
    async read() {
      const [seen, current] = (await redis.eval(READ_MARKER, 1, key, token)) as [string, string];
      return { seen: seen === '' ? undefined : seen, current };
    },
    onTopologyChange(listener) {
      // One listener per event per led target on the shared connection: raise the limit, not a warning.
      redis.setMaxListeners(redis.getMaxListeners() + 1);
      for (const e of TOPOLOGY_EVENTS) redis.on(e, listener);
      return () => {
        for (const e of TOPOLOGY_EVENTS) redis.off(e, listener);
        redis.setMaxListeners(Math.max(0, redis.getMaxListeners() - 1));
      };
    },
  };
}
