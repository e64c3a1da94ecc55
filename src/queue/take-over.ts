/**
 * A new leader's takeover of the jobs a previous leader still holds.
 *
 * A leader that freezes (a GC pause, SIGSTOP, a stalled VM) keeps the BullMQ locks of every job it had fetched.
 * Its lease expires after one TTL and another replica is elected, but BullMQ hands those jobs to no one until
 * their locks lapse and two stalled-jobs checks have seen them (up to `lockDuration` plus two check intervals,
 * whatever the TTL), and each such return counts against `maxStalledCount`. The old
 * leader is fenced (its lease is gone, each DELETE is checked against the leader key and carries preconditions),
 * so its jobs are safe to take at once: at the start of a term, before its Worker runs, the new leader moves
 * every job of the target's active list that none of its own locks holds back to the wait list, in one script.
 *
 * Each job taken is marked `liveRecheck` (src/rules/job-data.ts): the old leader may have sent its DELETE
 * just before it froze, and the new leader's informer may not show that deletion yet, so the next run GETs the
 * pod. Taking a job is not a stall: its stalled counter and its attempts are left as they were.
 *
 * What the old leader does with a job it no longer holds, when it wakes: BullMQ checks the lock token in every
 * script that moves a job on (`moveToFinished`, `moveToDelayed`), so its completion or put-back fails with
 * "Missing lock" / "Lock mismatch" and changes nothing (src/queue/lock-loss-log.ts summarizes those errors); its
 * processors are fenced before any DELETE (`stillLeader()` right before the request leaves).
 *
 * Redis Cluster: every key the script touches is one of the queue's (the queue name is a hash tag), so they all
 * live in one slot.
 */
import type { Redis } from 'ioredis';

/**
 * KEYS: 1 active (list), 2 wait (list), 3 stalled (set), 4 meta (hash), 5 marker (zset), 6 events (stream).
 * ARGV: 1 the queue's key prefix (`<prefix>:<queue>:`), 2 the token prefix of the taking worker (`<worker id>:`,
 * BullMQ's tokens are `<worker id>:<n>`): jobs it locked itself are left alone; 3 the prefix of the closing
 * markers (`closingWorkerKeyPrefix`): jobs locked by a worker marked closing are left to it.
 * The queue's marker is always added (unless the queue is paused): a frozen worker still blocked on it (BZPOPMIN)
 * would otherwise be served the next wake-up meant for the new leader's worker, since Redis serves blocked
 * clients in the order they blocked; that worker would then wait out its whole block (a minute) for jobs
 * already in the wait list. Served now, the frozen worker is no longer in line.
 * Returns the ids taken. Jobs go to the head of the wait list (RPUSH, as BullMQ's stalled-jobs check does):
 * they were due before anything waiting behind them. Our queues use no priorities. A job whose hash is gone is
 * only dropped from the active list. The data is re-encoded by Redis's cjson (integers up to 14 digits are
 * exact: a deadline in epoch ms has 13).
 */
const TAKE_OVER_SCRIPT = `
local rcall = redis.call
local prefix = ARGV[1]
local own = ARGV[2]
local closing = ARGV[3]
local taken = {}
local maxEvents = tonumber(rcall("HGET", KEYS[4], "opts.maxLenEvents")) or 10000
for _, jobId in ipairs(rcall("LRANGE", KEYS[1], 0, -1)) do
  local jobKey = prefix .. jobId
  local lockKey = jobKey .. ":lock"
  local token = rcall("GET", lockKey)
  local holder = token and string.match(token, "^(.*):[^:]*$")
  local mine = token and string.sub(token, 1, #own) == own
  local leaving = holder and rcall("EXISTS", closing .. holder) == 1
  if not mine and not leaving then
    rcall("DEL", lockKey)
    rcall("SREM", KEYS[3], jobId)
    rcall("LREM", KEYS[1], 1, jobId)
    if rcall("EXISTS", jobKey) == 1 then
      local ok, data = pcall(cjson.decode, rcall("HGET", jobKey, "data") or "")
      if ok and type(data) == "table" then
        data["liveRecheck"] = true
        rcall("HSET", jobKey, "data", cjson.encode(data))
      end
      rcall("RPUSH", KEYS[2], jobId)
      rcall("XADD", KEYS[6], "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId, "prev", "active")
      taken[#taken + 1] = jobId
    end
  end
end
if rcall("HEXISTS", KEYS[4], "paused") == 0 then
  rcall("ZADD", KEYS[5], 0, "0")
end
return taken
`;

/** The queue a takeover works on: a BullMQ Worker (or Queue) of the target, for its key names. */
export interface TakeOverQueue {
  /** BullMQ's key names of the queue (`active`, `wait`, `stalled`, `meta`, `marker`, `events`). */
  readonly keys: Readonly<Record<string, string>>;
  /** BullMQ's `toKey`: `toKey('')` is the prefix of the queue's job keys. */
  toKey(type: string): string;
}

/**
 * Moves every job of the queue's active list whose lock is not one of `ownTokenPrefix`'s (held by another
 * worker, or by none: a crashed holder's lapsed lock) back to the wait list, marked for a live re-check, in one
 * atomic script. Call it when this replica has just been elected, before its own Worker runs, and only under an
 * election that fences the previous leader.
 *
 * Jobs of a worker that marked itself closing (`closingKeyPrefix` + its id, see {@link markWorkerClosing}) are
 * left to it: a leader that hands over or shuts down puts its jobs back within its close, and a DELETE it has
 * already sent is awaited there; taken from it, the job could be re-checked before that DELETE is applied and
 * DELETEd a second time.
 * @param ownTokenPrefix `<worker id>:` of the taking worker, whose own jobs are left alone (the script may run
 *   late, after the worker has started, when a call timed out)
 * @param closingKeyPrefix `closingWorkerKeyPrefix(prefix, target)` (src/queue/job-identity.ts)
 * @returns the ids of the jobs taken over (empty when none)
 * @throws the Redis error when the script cannot run
 */
export async function takeOverActiveJobs(
  redis: Pick<Redis, 'eval'>,
  queue: TakeOverQueue,
  ownTokenPrefix: string,
  closingKeyPrefix: string,
): Promise<string[]> {
  const k = (name: string) => {
    const key = queue.keys[name];
    if (!key) throw new Error(`BullMQ queue key "${name}" is unknown`);
    return key;
  };
  const keys = [k('active'), k('wait'), k('stalled'), k('meta'), k('marker'), k('events')];
  const taken = await redis.eval(
    TAKE_OVER_SCRIPT,
    keys.length,
    ...keys,
    queue.toKey(''),
    ownTokenPrefix,
    closingKeyPrefix,
  );
  return Array.isArray(taken) ? taken.map(String) : [];
}

/**
 * Marks a worker as closing for `ttlMs` (its close's bound and a margin), so that the next leader's takeover
 * leaves its jobs to it (see {@link takeOverActiveJobs}). Sent at once, not awaited by the close: it must reach
 * Redis before the next leader is elected, and a failure only lets the next leader take the jobs.
 * @param closingKeyPrefix `closingWorkerKeyPrefix(prefix, target)`
 * @param workerId the BullMQ Worker's `id` (the part of its lock tokens before the last `:`)
 */
export function markWorkerClosing(
  redis: Pick<Redis, 'set'>,
  closingKeyPrefix: string,
  workerId: string,
  ttlMs: number,
): void {
  void redis.set(`${closingKeyPrefix}${workerId}`, '1', 'PX', ttlMs).catch(() => undefined);
}
