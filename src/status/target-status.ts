/**
 * One target's status from Redis and etcd alone (no API server): who leads and since when, the cleanup
 * jobs by state, the next deadline, the overdue jobs and the last accepted DELETE. What `status` prints.
 *
 * Where each answer comes from:
 * - **leader**: etcd's election (src/leadership/etcd/election-read.ts); without etcd (single-server mode), the replica
 *   whose BullMQ worker consumes the queue;
 * - **since**: etcd keeps no time with a key, so it is when the leader's worker connected to Redis (CLIENT
 *   LIST `age`): the worker starts when its replica is elected, so this is "consuming since". A Redis
 *   reconnect restarts it, so it can be later than the election, never earlier;
 * - **overdue**: from the jobs' stored deadlines, not from pods: a job still delayed or waiting after
 *   `deadline + grace` (the self-check's grace, src/cleaner/self-check.ts). A job that ran is not counted,
 *   even when its pod is still there (a failed DELETE is in `failed`); the replicas' own self-check
 *   (`/api/v1/leaders`) counts pods from their informers;
 * - **last accepted DELETE**: the key the worker writes on each `accepted` outcome (src/queue/last-accepted.ts);
 * - **kept by the POD state source**: the key the leader writes when its count of driver pods whose driver
 *   container has ended while the pod runs on changes (src/queue/kept-pods.ts);
 * - **refused**: another cluster claims the target's cluster name in Redis (src/status/claims-read.ts);
 * - **previous release**: with etcd, release 0.1.0's live replicas and the leader of the target's 0.1.0
 *   election, while a rolling update from it runs (src/leadership/previous-release-gate.ts).
 */
import type { Job, Queue } from 'bullmq';
import type { ElectionReader, PreviousReleaseState } from '../leadership/election-reader.ts';
import type { StoredJobData } from '../queue/cleanup-queue.ts';
import { type TargetRef, targetKey, targetLabel } from '../queue/job-identity.ts';
import { type KeptPods, readKeptPods } from '../queue/kept-pods.ts';
import { type LastAccepted, readLastAccepted } from '../queue/last-accepted.ts';
import type { RedisClient } from '../queue/redis-client.ts';

/** One target's status. Times are epoch ms. */
export interface TargetStatus {
  /** `context:namespace`. */
  readonly target: string;
  /** The cluster's name (src/kube/cluster-identity.ts). */
  readonly cluster: string;
  /** `cluster/namespace`: the key the balance lists it by (src/queue/job-identity.ts `targetKey`). */
  readonly key: string;
  /** Why the target is refused (another cluster claims its cluster name), or null. */
  readonly refused: string | null;
  /** With etcd, while replicas of release 0.1.0 are alive: them, and who leads this target's 0.1.0 election. */
  readonly previousRelease: PreviousReleaseState | null;
  /** The leading replica, or null when no replica leads (no candidate in etcd, or no consuming worker without etcd). */
  readonly leader: string | null;
  /** Where `leader` was read: the etcd election, or the workers connected to Redis (single-server mode). */
  readonly leaderFrom: 'etcd' | 'zookeeper' | 'redis-workers';
  /** When the leader's worker connected to Redis (see the module comment); null when unknown. */
  readonly consumingSinceMs: number | null;
  /** Replicas whose worker consumes the queue now (the leader's, normally exactly one). */
  readonly consumers: readonly string[];
  /** The other candidates in etcd, next leader first. */
  readonly candidates: readonly string[];
  readonly jobs: {
    readonly delayed: number;
    readonly waiting: number;
    readonly active: number;
    readonly failed: number;
    readonly completed: number;
  };
  /** The earliest deadline of a delayed job; null when none is delayed. */
  readonly nextDeadlineMs: number | null;
  /** Jobs still delayed or waiting after `deadline + grace`. */
  readonly overdue: number;
  /** The grace used for `overdue`, ms. */
  readonly overdueGraceMs: number;
  readonly lastAccepted: LastAccepted | null;
  /**
   * The driver pods the leader last counted as kept by Kyuubi's `POD` state source although their driver
   * container has ended (src/queue/kept-pods.ts); null when no leader recorded any.
   */
  readonly keptByPodPhase: KeptPods | null;
}

/** What {@link readTargetStatus} reads with. */
export interface StatusSources {
  /** The target's BullMQ queue (a plain `Queue` on the same name and prefix as the replicas'). */
  readonly queue: Queue<StoredJobData>;
  readonly redis: RedisClient;
  /** The leadership backend; undefined: single-server mode, the leader is whoever consumes. */
  readonly elections: ElectionReader | undefined;
  readonly prefix: string;
  /** Epoch ms. */
  readonly nowMs: number;
  /** How long past its deadline a job may still wait before it counts as overdue, ms. */
  readonly overdueGraceMs: number;
  /** Why the target's cluster name is refused (src/status/claims-read.ts), read by the caller once per name. */
  readonly refusal?: string | undefined;
}

/** Job ids read per round trip when counting the overdue jobs. */
const PAGE = 1000;

const deadlineOf = (job: Job<StoredJobData> | undefined): number | undefined => {
  const d = job?.data?.deadlineMs;
  return typeof d === 'number' && Number.isFinite(d) ? d : undefined;
};

/** The deadline stored in a job hash's `data` field (JSON), if it is a finite number. */
const storedDeadline = (data: string | null): number | undefined => {
  if (data === null) return undefined;
  try {
    const d = (JSON.parse(data) as Partial<StoredJobData> | null)?.deadlineMs;
    return typeof d === 'number' && Number.isFinite(d) ? d : undefined;
  } catch {
    return undefined;
  }
};

/**
 * Counts the delayed and waiting jobs whose deadline is at or before `cutoffMs` — all of them. Delayed jobs
 * are ordered by when they run next, not by deadline: a job in retry backoff runs after jobs with later
 * deadlines, so no prefix of the delayed set can be trusted. Per page of {@link PAGE} ids, one ZRANGE or
 * LRANGE and one pipeline of HGETs of their `data` (10,000 jobs: 20 round trips).
 */
async function countOverdue(
  queue: Queue<StoredJobData>,
  redis: RedisClient,
  cutoffMs: number,
): Promise<number> {
  let n = 0;
  const pages: ((start: number) => Promise<string[]>)[] = [
    (start) => redis.zrange(queue.toKey('delayed'), String(start), String(start + PAGE - 1)),
    (start) => redis.lrange(queue.toKey('wait'), start, start + PAGE - 1),
  ];
  for (const page of pages)
    for (let start = 0; ; start += PAGE) {
      const ids = await page(start);
      if (ids.length === 0) break;
      const pipeline = redis.pipeline();
      for (const id of ids) pipeline.hget(queue.toKey(id), 'data');
      for (const [err, data] of (await pipeline.exec()) ?? []) {
        const d = err ? undefined : storedDeadline(data as string | null);
        if (d !== undefined && d <= cutoffMs) n += 1;
      }
      if (ids.length < PAGE) break;
    }
  return n;
}

/**
 * Reads one target's status.
 * @throws the Redis or etcd client's error when either cannot be reached.
 */
export async function readTargetStatus(target: TargetRef, src: StatusSources): Promise<TargetStatus> {
  const { queue } = src;
  const [counts, election, workers, firstDelayed, lastAccepted, kept, previous] = await Promise.all([
    queue.getJobCounts('delayed', 'waiting', 'active', 'failed', 'completed'),
    src.elections?.election(target),
    queue.getWorkers() as Promise<{ rawname?: string; age?: string }[]>,
    queue.getDelayed(0, 0),
    readLastAccepted(src.redis, src.prefix, target),
    readKeptPods(src.redis, src.prefix, target),
    src.elections?.previousRelease?.(target),
  ]);
  const connections = workers.map(({ rawname = '', age }) => {
    const at = rawname.indexOf(':w:');
    return { name: at < 0 ? rawname : rawname.slice(at + 3), ageSeconds: Number(age) };
  });
  const consumers = [...new Set(connections.map((c) => c.name))];
  const leader = election ? (election.leader ?? null) : (consumers[0] ?? null);
  // The most recent connection of the leader's worker: "consuming since at least then".
  const ages = connections
    .filter((c) => c.name === leader && Number.isFinite(c.ageSeconds))
    .map((c) => c.ageSeconds);
  const consumingSinceMs = ages.length > 0 ? src.nowMs - Math.min(...ages) * 1000 : null;
  const cutoffMs = src.nowMs - src.overdueGraceMs;
  const overdue = await countOverdue(queue, src.redis, cutoffMs);
  return {
    target: targetLabel(target),
    cluster: target.cluster,
    key: targetKey(target),
    refused: src.refusal ?? null,
    previousRelease: previous && previous.members.length > 0 ? previous : null,
    leader,
    leaderFrom: src.elections?.backend ?? 'redis-workers',
    consumingSinceMs,
    consumers,
    candidates: election?.candidates ?? [],
    jobs: {
      delayed: counts.delayed ?? 0,
      waiting: counts.waiting ?? 0,
      active: counts.active ?? 0,
      failed: counts.failed ?? 0,
      completed: counts.completed ?? 0,
    },
    nextDeadlineMs: deadlineOf(firstDelayed[0] as Job<StoredJobData> | undefined) ?? null,
    overdue,
    overdueGraceMs: src.overdueGraceMs,
    lastAccepted: lastAccepted ?? null,
    keptByPodPhase: kept ?? null,
  };
}

/** Why a target fails the check (the reasons `status` exits non-zero for); empty when healthy. */
export function statusProblems(s: TargetStatus): string[] {
  const problems: string[] = [];
  if (s.refused !== null) problems.push(`refused: ${s.refused}`);
  if (s.leader === null)
    problems.push(
      s.leaderFrom === 'redis-workers'
        ? 'no leader: no worker consumes'
        : `no leader: no replica campaigns in ${s.leaderFrom}`,
    );
  if (s.overdue > 0)
    problems.push(`${s.overdue} overdue job(s): past deadline + ${s.overdueGraceMs / 1000} s`);
  return problems;
}
