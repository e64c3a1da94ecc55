/**
 * Gathers what each part knows about one pod for {@link explain}: the API server (an optional live GET),
 * the job and the tombstone in Redis, the leader in etcd. Read-only. Shared by the `explain` command
 * (its own connections) and the `/api/v1/explain` route (the replica's).
 */
import type { Job, Queue } from 'bullmq';
import type { DriverPod } from '../kube/driver-pod.ts';
import type { ElectionReader } from '../leadership/election-reader.ts';
import type { StoredJobData } from '../queue/cleanup-queue.ts';
import { isCleanupJobId, type TargetRef, tombstoneKey } from '../queue/job-identity.ts';
import { readLastAccepted } from '../queue/last-accepted.ts';
import type { RedisClient } from '../queue/redis-client.ts';
import type { ExplainFacts, JobFacts } from './explain.ts';

/** Where {@link gatherFacts} reads. */
export interface FactSources {
  readonly target: TargetRef;
  /** The target's queue; its `opts.prefix` is the replicas' `queuePrefix`. */
  readonly queue: Queue<StoredJobData>;
  readonly redis: RedisClient;
  /** The leadership backend; undefined: single-server mode (the leader is the consuming worker). */
  readonly elections: ElectionReader | undefined;
  /** A live GET of the pod (undefined when absent); undefined: do not ask the API server. */
  readonly getPod: ((namespace: string, name: string) => Promise<DriverPod | undefined>) | undefined;
}

/** How many of the newest finished jobs are searched for a pod known by name only (a deleted pod). */
const NAME_SEARCH_LIMIT = 500;

/** The pod's job in Redis, with its state. */
async function jobFacts(queue: Queue<StoredJobData>, uid: string): Promise<JobFacts | undefined> {
  const job = (await queue.getJob(uid)) as Job<StoredJobData, unknown> | undefined;
  if (!job) return undefined;
  const state = await job.getState();
  const d = job.data?.deadlineMs;
  const rv = job.returnvalue as { outcome?: string; reason?: string } | null | undefined;
  return {
    state,
    pod: job.name,
    deadlineMs: typeof d === 'number' && Number.isFinite(d) ? d : undefined,
    attemptsMade: job.attemptsMade,
    outcome: rv && typeof rv === 'object' ? rv : undefined,
    failedReason: job.failedReason || undefined,
    finishedOnMs: job.finishedOn,
    processedBy: job.processedBy,
    nextRunMs: state === 'delayed' ? job.timestamp + job.delay : undefined,
  };
}

/**
 * The UID of a pod known by name only, from Redis: the target's last accepted DELETE, else the newest
 * finished and failed jobs (bounded: a pod deleted long ago is not found; give its UID then).
 */
async function uidByName(src: FactSources, prefix: string, name: string): Promise<string | undefined> {
  const last = await readLastAccepted(src.redis, prefix, src.target);
  if (last?.pod === name) return last.uid;
  for (const state of ['completed', 'failed', 'delayed'] as const) {
    const jobs = await src.queue.getJobs([state], 0, NAME_SEARCH_LIMIT - 1, state === 'delayed');
    const hit = jobs.find((j) => j?.name === name);
    if (hit?.id) return hit.id;
  }
  return undefined;
}

/** The target's leader: etcd's election, or without etcd the replica whose worker consumes the queue. */
async function leaderOf(src: FactSources): Promise<string | undefined> {
  if (src.elections) return (await src.elections.election(src.target)).leader;
  const workers = (await src.queue.getWorkers()) as { rawname?: string }[];
  const raw = workers[0]?.rawname ?? '';
  const at = raw.indexOf(':w:');
  return raw ? (at < 0 ? raw : raw.slice(at + 3)) : undefined;
}

/**
 * Gathers the facts about a pod given by name, by UID, or both. A GET that fails leaves the pod `unread`
 * with the error; Redis and etcd errors reject (nothing to explain without them).
 */
export async function gatherFacts(
  src: FactSources,
  ask: { readonly name?: string; readonly uid?: string },
): Promise<ExplainFacts> {
  const prefix = src.queue.opts.prefix ?? 'bull';
  let uid = ask.uid;
  let job = uid ? await jobFacts(src.queue, uid) : undefined;
  const name = ask.name ?? job?.pod;
  let pod: ExplainFacts['pod'];
  if (!name) pod = { read: 'unread', why: 'no pod name known: no job for this UID' };
  else if (!src.getPod) pod = { read: 'unread', why: 'not asked (--offline)' };
  else {
    try {
      const got = await src.getPod(src.target.namespace, name);
      const gotUid = got?.metadata?.uid;
      if (!got) pod = { read: 'absent' };
      else if (uid && gotUid !== uid) pod = { read: 'absent', ...(gotUid ? { otherUid: gotUid } : {}) };
      else pod = { read: 'present', object: got };
    } catch (err) {
      pod = { read: 'unread', why: `the GET failed: ${(err as Error).message}` };
    }
  }
  if (!uid && pod.read === 'present') uid = pod.object.metadata?.uid;
  if (!uid && name) uid = await uidByName(src, prefix, name);
  if (uid && !job) job = await jobFacts(src.queue, uid);
  const ttl = isCleanupJobId(uid) ? await src.redis.pttl(tombstoneKey(prefix, src.target, uid)) : -2;
  const leader = await leaderOf(src);
  return {
    target: src.target,
    name,
    uid,
    pod,
    job,
    tombstoneTtlMs: ttl > 0 ? ttl : undefined,
    leader,
    leaderFrom: src.elections?.backend ?? 'redis-workers',
  };
}
