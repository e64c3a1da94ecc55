/**
 * The cleanup queue of one target: enqueue a pod's delayed cleanup job (one per UID, whatever the number
 * of replicas adding it), cancel it with a tombstone, and the reconcile helpers.
 *
 * Races between replicas are closed by ordering, not locks: `cancel` writes the tombstone *then* removes
 * the job; `enqueue` adds the job *then* checks the tombstone and removes what it added. Whatever the
 * interleaving, a tombstoned pod ends with no pending job. The handler's re-check covers the rest.
 *
 * One file, long, because the enqueue, cancel, unschedule and tombstone operations are one protocol whose
 * race-freedom is argued across them: split, no file would show why any interleaving is safe.
 */
import { Job, type JobJson, type JobProgress, type JobsOptions, Queue } from 'bullmq';
import type { DriverPod } from '../kube/driver-pod.ts';
import type { Logger } from '../log.ts';
import type { CleanupJobData } from '../rules/job-data.ts';
import {
  cleanupJobId,
  isCleanupJobId,
  jobKey,
  queueName,
  type TargetRef,
  tombstoneKey,
} from './job-identity.ts';
import { duplicateClient, type RedisClient } from './redis-client.ts';

/**
 * The format of the job data this version writes, stored as `v`. Readers take every format they know and
 * the fields they know of a later one, ignoring the rest, so that replicas of two adjacent releases can share
 * one Redis during a rolling update (docs/deployment.md, "Upgrading"). A change an older reader could misread
 * gets a new field name, never a new meaning for an old one: the older reader then refuses the job (warned,
 * removed, its pod enqueued again from its informer in its own format) instead of acting on it.
 *
 * - format 1: `{ v: 1, deadlineMs, traceparent?, liveRecheck? }`; release 0.1.0 wrote `deadlineMs` and
 *   `traceparent` without `v`, and ignores `liveRecheck` (its own re-check of such a job is the one its
 *   `recheck` setting asks for, and the DELETE's preconditions still hold).
 */
export const JOB_FORMAT = 1;

/**
 * The `data` a job stores in Redis. The rest of {@link CleanupJobData} is elsewhere: the UID is the job
 * id, the pod name is the job name, context and namespace are the queue's target. Every field of the job
 * hash then stays within Redis's `hash-max-listpack-value` (64 bytes) for pod names of up to 64
 * characters, so Redis keeps the hash as a listpack: about half the memory of a hashtable. (With tracing
 * on, the traceparent makes `data` longer: the hash is then a hashtable, as before.)
 */
export interface StoredJobData {
  /** The format ({@link JOB_FORMAT}); absent in jobs written by release 0.1.0 (format 1). */
  readonly v?: number;
  /** finishedAt + retention, epoch ms. */
  readonly deadlineMs: number;
  readonly traceparent?: string;
  /**
   * Set on a job whose DELETE may have left unanswered (see {@link CleanupJobData.liveRecheck}): by the worker
   * when it gives up a sent DELETE's answer, by a new leader's takeover (src/queue/take-over.ts).
   */
  readonly liveRecheck?: true;
}

/** The part of {@link CleanupJobData} stored as the job's `data`, in format {@link JOB_FORMAT}. */
export function storedJobData(data: CleanupJobData): StoredJobData {
  return data.traceparent
    ? { v: JOB_FORMAT, deadlineMs: data.deadlineMs, traceparent: data.traceparent }
    : { v: JOB_FORMAT, deadlineMs: data.deadlineMs };
}

/** A job's stored data cannot be trusted: it is refused (removed, never acted on). `field` names the culprit. */
export class InvalidJobDataError extends Error {
  override name = 'InvalidJobDataError';
  readonly field: 'uid' | 'pod' | 'deadlineMs' | 'v';
  constructor(field: InvalidJobDataError['field'], message: string) {
    super(message);
    this.field = field;
  }
}

/**
 * The handler's view of a stored job, checked field by field: nothing read from Redis is trusted. The UID is
 * the job id, the pod name the job name, context and namespace the queue's target ({@link StoredJobData}). A
 * job hash lost or edited by hand comes back from BullMQ with no name and `{}` as data; acted on, it would GET
 * `/pods/undefined` and complete as a no-op while its pod leaks.
 * Any format ({@link JOB_FORMAT}) is read by the fields this version knows; unknown fields are ignored.
 * @throws InvalidJobDataError when the uid (job id) is not a Kubernetes UID, the pod name is missing, the
 *   deadline is not a finite number, or the format `v` is present but not a positive integer.
 */
export function cleanupJobDataOf(
  target: TargetRef,
  job: { readonly id?: string; readonly name?: string; readonly data?: StoredJobData },
): CleanupJobData {
  const d: Partial<Record<keyof StoredJobData, unknown>> =
    typeof job.data === 'object' && job.data !== null ? job.data : {};
  const uid = job.id;
  if (!isCleanupJobId(uid)) {
    throw new InvalidJobDataError('uid', `job id ${JSON.stringify(uid)} is not a pod's Kubernetes UID`);
  }
  const pod = job.name;
  if (typeof pod !== 'string' || pod === '') {
    throw new InvalidJobDataError('pod', `job ${uid} has no pod name (its stored hash was lost or edited)`);
  }
  if (d.v !== undefined && !(Number.isSafeInteger(d.v) && (d.v as number) >= 1)) {
    throw new InvalidJobDataError('v', `job ${uid} has no valid format version (${JSON.stringify(d.v)})`);
  }
  const deadline = d.deadlineMs;
  if (typeof deadline !== 'number' || !Number.isFinite(deadline)) {
    throw new InvalidJobDataError(
      'deadlineMs',
      `job ${uid} has no finite deadline (${JSON.stringify(deadline)})`,
    );
  }
  const traceparent = typeof d.traceparent === 'string' && d.traceparent ? d.traceparent : undefined;
  return {
    context: target.context,
    namespace: target.namespace,
    pod,
    uid,
    deadlineMs: deadline,
    ...(traceparent ? { traceparent } : {}),
    ...(d.liveRecheck === true ? { liveRecheck: true } : {}),
  };
}

/**
 * BullMQ keeps the custom job id in the stored options too (`"jobId":"<uid>"`, 46 bytes), which alone
 * would push `opts` over the 64-byte listpack limit; the id is already the key, and BullMQ never reads it
 * back from the options. This Job leaves it out of what is stored.
 */
class CompactJob<
  DataType = unknown,
  ReturnType = unknown,
  NameType extends string = string,
  ProgressType extends JobProgress = JobProgress,
> extends Job<DataType, ReturnType, NameType, ProgressType> {
  override asJSON(): JobJson {
    const json = super.asJSON();
    const { jobId: _id, ...opts } = json.opts;
    return { ...json, opts };
  }
}

/** A Queue whose added jobs are {@link CompactJob}s. */
class CompactQueue extends Queue<StoredJobData> {
  protected override get Job(): typeof Job {
    return CompactJob;
  }
}

/**
 * What `enqueue` did: added the job, found one (any state), or refused because the pod is tombstoned.
 * `replaced`: it found a job that had finished without deleting the pod nor seeing it go (see
 * {@link finishedWithoutDeleting}) and added a new one in its place.
 */
export type EnqueueResult = 'added' | 'replaced' | 'exists' | 'earlier' | 'tombstoned';

/** Options of one `enqueue`. */
export interface EnqueueOptions {
  /** This replica's dry-run setting: in dry run a job that completed as `would-delete` stays (default false). */
  dryRun?: boolean;
  /**
   * Bring a delayed job whose stored deadline is later than `data.deadlineMs` (by more than
   * {@link EARLIER_MIN_MS}) forward to it: the job's delay and stored deadline (`earlier`). The leader's
   * reconcile asks it, so that a lowered retention takes effect then (default false: the job is left as it is).
   */
  earlier?: boolean;
}

/** A stored deadline later than the enqueue's by less than this is left alone (`EnqueueOptions.earlier`), ms. */
export const EARLIER_MIN_MS = 1000;

/**
 * Whether a finished job's return value (BullMQ's stored `returnvalue`, a JSON outcome) leaves the pod for a
 * new job: `would-delete` outside dry run (the job ran in dry run: nothing was deleted), and `skipped` (the pod
 * was not eligible when the job ran: relabelled, not terminal, outside the policy; it is again, or the enqueue
 * would not ask). Every other outcome says the UID is deleted or going, and the finished job is kept as long
 * as a tombstone. Unreadable values count as final: a job is never replaced on a guess.
 */
export function finishedWithoutDeleting(returnvalue: string | null | undefined, dryRun: boolean): boolean {
  if (!returnvalue) return false;
  let outcome: unknown;
  try {
    outcome = (JSON.parse(returnvalue) as { outcome?: unknown } | null)?.outcome;
  } catch {
    return false;
  }
  return outcome === 'skipped' || (outcome === 'would-delete' && !dryRun);
}

/** Options of {@link createCleanupQueue}. */
export interface CleanupQueueOptions {
  target: TargetRef;
  /**
   * BullMQ's connection, with `maxRetriesPerRequest: null` (BullMQ requirement). A Queue given an ioredis
   * instance uses it as is (BullMQ `createRedisBackend`: `shared`), so every queue of a replica shares it.
   */
  connection: RedisClient;
  /**
   * The connection for this module's own commands (tombstones, job probes), without BullMQ's Lua scripts
   * defined on it (see {@link createCleanupQueue}). A replica passes one for all its queues; without it the
   * queue opens a duplicate of `connection` of its own and closes it on `close()` (tests, one-off tools).
   */
  commands?: RedisClient;
  /** Redis key prefix (no `:`). */
  prefix: string;
  /** How long tombstones are kept, ms; finished jobs are kept as long (by the worker: `keepFinishedMs`). */
  tombstoneTtlMs: number;
  /** Retries of a failed DELETE before the job is failed (the periodic reconcile retries failed jobs). */
  attempts?: number;
  log: Logger;
  now: () => number;
}

/** A target's cleanup queue. */
export interface CleanupQueue {
  /** The BullMQ queue underneath (the dashboard, the metrics and the tests read it). */
  readonly bullQueue: Queue<StoredJobData>;
  readonly name: string;
  /**
   * How long the worker keeps finished jobs, ms: as long as tombstones, so that re-adding a completed UID
   * is a no-op. (BullMQ's removeOnComplete/removeOnFail are worker options, not stored on each job.)
   */
  readonly keepFinishedMs: number;
  /**
   * Adds the pod's delayed job, unless the UID is tombstoned or has a job already; a job that finished without
   * deleting (see {@link finishedWithoutDeleting}) is replaced. One round trip when a job exists.
   * @throws InvalidJobIdError when the uid is not a Kubernetes UID
   */
  enqueue(data: CleanupJobData, options?: EnqueueOptions): Promise<EnqueueResult>;
  /**
   * Tombstones the UID (it is being or has been deleted: no replica may enqueue it again), then removes its
   * job if it is still pending (delayed, waiting or prioritized): one round trip (tombstone and state probe,
   * pipelined), two when there is a job to remove. `removed` only for the first cancel of the UID (the one that
   * wrote its tombstone): replicas cancel the same deletion at once, and no more than one answers `removed`.
   * `removed-retrying`: the job removed had failed before (it waited out a retry backoff), so an earlier run's
   * DELETE may have been applied without its answer.
   */
  cancel(uid: string): Promise<CancelResult>;
  /**
   * Removes the UID's job if it is still pending, without a tombstone: the pod left the watch without evidence
   * of its deletion (relabelled out of the selector) and may come back. Round trips as `cancel`.
   */
  unschedule(uid: string): Promise<CancelResult>;
  isTombstoned(uid: string): Promise<boolean>;
  /** Re-queues failed jobs whose pod `stillEligible` says should still be cleaned; returns how many. */
  retryFailed(stillEligible: (uid: string) => boolean): Promise<number>;
  /**
   * The names (`Worker` option `name`: the replica id) of the workers connected to this queue, one entry per
   * Redis connection, from Redis's CLIENT LIST. BullMQ's `getWorkers()` puts the queue's name in each entry's
   * `name` and the client name `<prefix>:<queue, base64>:w:<worker name>` in `rawname`.
   */
  workerNames(): Promise<string[]>;
  close(): Promise<void>;
}

/** What `cancel` and `unschedule` did: removed a pending job (one that had failed before: `removed-retrying`), or none. */
export type CancelResult = 'removed' | 'removed-retrying' | 'none';

/** The states in which `cancel` removes a job. */
const PENDING_STATES: ReadonlySet<string> = new Set(['delayed', 'prioritized', 'waiting']);

/** Creates the queue of one target. */
export function createCleanupQueue(opts: CleanupQueueOptions): CleanupQueue {
  const name = queueName(opts.target);
  const queue = new CompactQueue(name, {
    connection: opts.connection,
    prefix: opts.prefix,
    // BullMQ's event stream keeps 10,000 entries by default, a few hundred bytes each: with thousands of
    // pending jobs it costs more than the jobs. Nothing here reads old events (no QueueEvents consumer).
    streams: { events: { maxLen: 1000 } },
  });
  // Without a listener BullMQ prints every connection error to stderr; the replica logs Redis outages once.
  queue.on('error', () => undefined);
  // Our own commands go over a second connection without BullMQ's ~100 Lua scripts defined on it: ioredis
  // copies every defined script onto each pipeline it creates (~16 KB per pipeline), which made the 10,000
  // enqueues of an initial list allocate ~160 MB and left the replica's RSS ~180 MiB higher (bench/README.md).
  // Ordering between the two connections is causal: each step awaits the previous one. The replica shares that
  // connection between all its queues: one per target per replica would be R × T clients.
  const ownsCommands = opts.commands === undefined;
  const redis = opts.commands ?? duplicateClient(opts.connection, undefined);
  if (ownsCommands) redis.on('error', () => undefined); // the shared connection's listener reports outages

  /**
   * Removes the UID's job if it is pending; with `tombstone`, writes the tombstone first (same round trip), and
   * answers `removed…` only to the first cancel of the UID (the one that wrote the tombstone): replicas cancel the
   * same deletion at once, and BullMQ's remove answers 1 for a job already removed.
   */
  const removePending = async (uid: string, tombstone: boolean): Promise<CancelResult> => {
    const id = cleanupJobId(uid);
    const key = (type: string) => queue.toKey(type);
    const tomb = tombstoneKey(opts.prefix, opts.target, id);
    // One round trip: the tombstone first (a connection runs its commands in order: NX tells the first writer,
    // PEXPIRE renews it for the others), then whether the job is pending, probed as BullMQ's getState does:
    // delayed, prioritized, or waiting (wait or paused).
    const pipeline = redis.pipeline();
    if (tombstone)
      pipeline.set(tomb, '1', 'PX', opts.tombstoneTtlMs, 'NX').pexpire(tomb, opts.tombstoneTtlMs);
    pipeline
      .zscore(key('delayed'), id)
      .zscore(key('prioritized'), id)
      .lpos(key('wait'), id)
      .lpos(key('paused'), id)
      // BullMQ's attemptsMade: > 0 once a run failed (a DELETE of that run may have been applied).
      .hget(jobKey(opts.prefix, opts.target, id), 'atm');
    const replies = (await pipeline.exec()) ?? [];
    const attempts = Number(replies.pop()?.[1] ?? 0);
    let first = true;
    if (tombstone) {
      const [created, renewed] = replies.splice(0, 2);
      if (!created || created[0]) throw created?.[0] ?? new Error('tombstone not written');
      if (renewed?.[0]) throw renewed[0];
      first = created[1] === 'OK';
    }
    // LPOS needs Redis ≥ 6.0.6 (BullMQ accepts 5): ask BullMQ when a probe failed.
    const pending = replies.some(([err]) => err)
      ? PENDING_STATES.has(await queue.getJobState(id))
      : replies.some(([, found]) => found !== null);
    if (!pending) return 'none';
    // remove() refuses a job that became active meanwhile (locked): the handler's re-check then sees the change.
    const removed = await queue.remove(id).catch(() => 0);
    if (removed !== 1 || !first) return 'none';
    return attempts > 0 ? 'removed-retrying' : 'removed';
  };

  /**
   * Moves a delayed job whose stored deadline (`stored`: its data as JSON) is later than `deadlineMs` by at
   * least {@link EARLIER_MIN_MS} to that deadline: its stored deadline, then its delay. False when there is
   * nothing to move, or the job is not delayed (BullMQ's changeDelay refuses it: running, or finished; its
   * stored deadline is then the earlier one, which is this replica's retention anyway).
   */
  const bringForward = async (id: string, stored: string | null | undefined, deadlineMs: number) => {
    let storedDeadline: unknown;
    try {
      storedDeadline = (JSON.parse(stored ?? 'null') as StoredJobData | null)?.deadlineMs;
    } catch {
      return false;
    }
    if (typeof storedDeadline !== 'number' || storedDeadline - deadlineMs < EARLIER_MIN_MS) return false;
    const job = await Job.fromId<StoredJobData>(queue, id);
    if (!job) return false;
    // The stored deadline first, then the delay: once its delay is changed, a worker may take the job at once,
    // and with the old deadline still stored it would put the job back for the old delay.
    try {
      await job.updateData({ ...job.data, deadlineMs });
      await job.changeDelay(Math.max(0, deadlineMs - opts.now()));
    } catch {
      return false;
    }
    return true;
  };

  const isTombstoned = async (uid: string) =>
    (await redis.exists(tombstoneKey(opts.prefix, opts.target, uid))) === 1;

  return {
    bullQueue: queue,
    name,
    keepFinishedMs: opts.tombstoneTtlMs,
    isTombstoned,
    async enqueue(data, options = {}) {
      const id = cleanupJobId(data.uid);
      // One round trip answers most calls: N-1 replicas find the job, tombstoned pods stop here; a finished
      // job's return value comes along, to tell a job that deleted from one that must be replaced (and its
      // stored data, for `earlier`).
      const [tomb, job, [, fields]] = (await redis
        .pipeline()
        .exists(tombstoneKey(opts.prefix, opts.target, id))
        .exists(jobKey(opts.prefix, opts.target, id))
        .hmget(jobKey(opts.prefix, opts.target, id), 'returnvalue', ...(options.earlier ? ['data'] : []))
        .exec()) as [[Error | null, number], [Error | null, number], [Error | null, (string | null)[]]];
      if (tomb?.[1] === 1) return 'tombstoned';
      let replaced = false;
      if (job?.[1] === 1) {
        const [returnvalue, stored] = fields ?? [];
        if (!finishedWithoutDeleting(returnvalue, options.dryRun ?? false)) {
          return options.earlier && (await bringForward(id, stored, data.deadlineMs)) ? 'earlier' : 'exists';
        }
        // A completed job is not locked: remove() takes it. Two replicas replacing at once end with one job
        // (the second add is a no-op, or its remove takes the first one's still pending copy first).
        replaced = (await queue.remove(id).catch(() => 0)) === 1;
        if (!replaced) return 'exists';
      }
      // Stored as `{"attempts":15,"backoff":{"type":"cleanup"},"delay":…}` (≤ 64 bytes: see StoredJobData).
      // How long finished jobs stay is a worker option (keepFinishedMs), not stored on each job.
      const jobOpts: JobsOptions = {
        jobId: id,
        delay: Math.max(0, data.deadlineMs - opts.now()),
        attempts: opts.attempts ?? 15,
        backoff: { type: 'cleanup' },
      };
      // The job name is the pod name (see StoredJobData); the bull-board lists jobs by it.
      await queue.add(data.pod, storedJobData(data), jobOpts);
      if (await isTombstoned(id)) {
        // A cancel raced with us; it may have run before our add: remove what we added.
        await queue.remove(id).catch(() => 0);
        return 'tombstoned';
      }
      return replaced ? 'replaced' : 'added';
    },
    cancel: (uid) => removePending(uid, true),
    unschedule: (uid) => removePending(uid, false),
    async retryFailed(stillEligible) {
      let n = 0;
      for (const job of await queue.getFailed(0, -1)) {
        if (job?.id && stillEligible(job.id)) {
          await job.retry('failed', { resetAttemptsMade: true }).catch((err: unknown) => {
            opts.log.debug({ err, uid: job.id }, 'retry of a failed job refused');
          });
          n += 1;
        }
      }
      return n;
    },
    async workerNames() {
      const clients = (await queue.getWorkers()) as { rawname?: string }[];
      return clients.map(({ rawname = '' }) => {
        const at = rawname.indexOf(':w:');
        return at < 0 ? rawname : rawname.slice(at + 3);
      });
    },
    async close() {
      await queue.close();
      if (ownsCommands) redis.disconnect();
    },
  };
}

/** Fields of a job's data from a pod and its deadline. */
export function jobDataFor(
  pod: DriverPod,
  target: TargetRef,
  times: { deadlineMs: number; finishedAtMs: number },
  enqueuedBy: string,
): CleanupJobData {
  return {
    context: target.context,
    namespace: target.namespace,
    pod: pod.metadata?.name ?? '',
    uid: cleanupJobId(pod.metadata?.uid),
    deadlineMs: times.deadlineMs,
    finishedAtMs: times.finishedAtMs,
    enqueuedBy,
  };
}
