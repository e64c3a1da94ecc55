/**
 * The checks of the running fleet, when replicas run: what etcd or ZooKeeper and Redis say of it, read as
 * `status` reads them (src/status/target-status.ts, src/status/balance-read.ts):
 *
 * - **one leader per target**: the election names a leader, and the replicas whose BullMQ worker consumes the
 *   target's queue (Redis CLIENT LIST) are that leader only;
 * - **no other cluster on the same queues**: a worker consuming a queue that is not a member of this fleet's
 *   election (another deployment — the same cluster name, Redis and `queuePrefix`, another etcd or ZooKeeper), live
 *   members serving another set of targets (another deployment sharing `etcdKeyPrefix`/`zookeeperRoot`), and
 *   delayed jobs, added over {@link FOREIGN_JOB_AGE_MS} ago, for pods this cluster does not have;
 * - **one job format**: the jobs' stored data (`v`, src/queue/cleanup-queue.ts `JOB_FORMAT`) read as the
 *   replicas read them (`cleanupJobDataOf`): a job this release refuses (another release's incompatible
 *   format) fails, a newer readable format warns (a rollout in progress).
 *
 * Without a running replica (no member and no worker) the fleet checks are skipped.
 */
import type { Job } from 'bullmq';
import { type CheckResult, resultsOf } from '../check-result.ts';
import {
  cleanupJobDataOf,
  InvalidJobDataError,
  JOB_FORMAT,
  type StoredJobData,
} from '../queue/cleanup-queue.ts';
import { membershipScope, type TargetRef, targetLabel } from '../queue/job-identity.ts';
import { balanceOf } from '../status/balance-read.ts';
import type { StateStore } from '../status/state-store.ts';
import { readTargetStatus, type TargetStatus } from '../status/target-status.ts';

/** Jobs sampled per target for the format and foreign-pod checks. */
export const JOBS_SAMPLED = 200;
/** A delayed job younger than this may be for a pod whose deletion the informers have not seen yet, ms. */
export const FOREIGN_JOB_AGE_MS = 120_000;

/** What {@link checkFleet} reads with. */
export interface FleetSources {
  readonly store: StateStore;
  readonly targets: readonly TargetRef[];
  /** The UIDs of the selected pods of a target in this cluster; undefined when they cannot be listed. */
  readonly podUids: (target: TargetRef) => Promise<ReadonlySet<string> | undefined>;
  /** Wall clock now, epoch ms. */
  readonly nowMs: number;
  /** The overdue grace `status` uses, ms. */
  readonly overdueGraceMs: number;
}

/**
 * Runs the fleet checks.
 * @throws the Redis or backend client's error when either stops answering (the caller reports it).
 */
export async function checkFleet(src: FleetSources): Promise<CheckResult[]> {
  const r = resultsOf('fleet');
  const { store, targets } = src;
  // The fleet's members, as its replicas register: the scope of the clusters of its targets.
  const scope = membershipScope(targets.map((t) => t.cluster));
  const members = store.elections ? await store.elections.members(scope) : undefined;
  const rows = await Promise.all(
    targets.map((t) =>
      readTargetStatus(t, {
        queue: store.queueOf(t),
        redis: store.redis,
        elections: store.elections,
        prefix: store.prefix,
        nowMs: src.nowMs,
        overdueGraceMs: src.overdueGraceMs,
      }),
    ),
  );
  const anyWorker = rows.some((row) => row.consumers.length > 0);
  if ((members?.size ?? 0) === 0 && !anyWorker)
    return [
      r.skip(
        'fleet.running',
        `fleet: no replica runs (no member in ${store.elections?.backend ?? 'Redis'}, no worker on the queues): deploy, then run check again`,
      ),
    ];
  const out: CheckResult[] = [];
  out.push(...leaderChecks(rows, members, r));
  if (members) {
    // Balanced by the targets' keys (cluster/namespace), as the replicas register them.
    const balance = balanceOf(
      rows.map((row) => row.key),
      members,
      rows.map((row) => row.leader),
    );
    out.push(
      balance.otherMembers.length === 0
        ? r.pass(
            'fleet.members',
            `members: ${balance.members.length} replica${balance.members.length === 1 ? '' : 's'} serve these targets (${balance.members.join(', ')})`,
            {
              details: { members: balance.members },
            },
          )
        : r.warn(
            'fleet.members',
            `members: ${balance.otherMembers.length} live replica(s) serve another set of targets (${balance.otherMembers.join(', ')}): a rollout changing the targets, or another deployment sharing this ${store.elections?.backend} prefix`,
            {
              fix: 'finish the rollout; give every other deployment its own etcdKeyPrefix (or zookeeperRoot) and queuePrefix',
              details: { members: balance.members, otherMembers: balance.otherMembers },
            },
          ),
    );
  }
  out.push(...(await jobChecks(src, r)));
  return out;
}

/** One leader per target, consuming alone; aggregated into one line when all is well. */
function leaderChecks(
  rows: readonly TargetStatus[],
  members: ReadonlyMap<string, string> | undefined,
  r: ReturnType<typeof resultsOf>,
): CheckResult[] {
  const out: CheckResult[] = [];
  let healthy = 0;
  for (const row of rows) {
    const strangers = row.consumers.filter((c) => c !== row.leader && (members ? !members.has(c) : true));
    const others = row.consumers.filter((c) => c !== row.leader && !strangers.includes(c));
    if (row.leader === null)
      out.push(
        r.fail(
          'fleet.leader',
          `${row.target}: no leader (${row.leaderFrom === 'redis-workers' ? 'no worker consumes its queue' : `no replica campaigns in ${row.leaderFrom}`})`,
          {
            fix: "no replica can clean this target: look at the replicas' logs (informer not ready, RBAC), or `status`",
            details: { target: row.target },
          },
        ),
      );
    else if (strangers.length > 0 && members)
      out.push(
        r.fail(
          'fleet.foreign-consumer',
          `${row.target}: ${strangers.join(', ')} consume${strangers.length === 1 ? 's' : ''} its queue but ${strangers.length === 1 ? 'is not a member' : 'are not members'} of this fleet: another deployment (the same cluster name, Redis and queuePrefix, another etcd or ZooKeeper) uses the same queue`,
          {
            fix: 'give each deployment its own queuePrefix (--queue-prefix, SDC_QUEUE_PREFIX) or its own Redis: its leader deletes only in its own cluster, and the other cluster’s pods are never cleaned',
            details: { target: row.target, leader: row.leader, consumers: row.consumers },
          },
        ),
      );
    else if (others.length > 0 || (!members && row.consumers.length > 1))
      out.push(
        r.fail(
          'fleet.leader',
          `${row.target}: ${row.consumers.length} replicas consume its queue (${row.consumers.join(', ')}), not only its leader ${row.leader}`,
          {
            fix: members
              ? 'a replica kept its worker after losing the leadership: restart it, and look at its log for "leadership lost"'
              : 'several replicas without etcd or ZooKeeper: set etcdEndpoints or zookeeper',
            details: { target: row.target, leader: row.leader, consumers: row.consumers },
          },
        ),
      );
    else if (row.consumers.length === 0)
      out.push(
        r.warn(
          'fleet.leader',
          `${row.target}: its leader ${row.leader} has no worker on the queue yet (its informer may still be listing)`,
          {
            fix: 'wait a minute and run check again; if it stays, look at the leader’s log',
            details: { target: row.target, leader: row.leader },
          },
        ),
      );
    else healthy += 1;
  }
  if (healthy > 0)
    out.unshift(
      r.pass(
        'fleet.leader',
        healthy === rows.length
          ? `leaders: each of the ${rows.length} target${rows.length === 1 ? '' : 's'} has one leader, and only it consumes the queue`
          : `leaders: ${healthy} of ${rows.length} targets have one leader, and only it consumes the queue`,
      ),
    );
  return out;
}

/** Job formats and delayed jobs of pods this cluster does not have, from a sample of each queue. */
async function jobChecks(src: FleetSources, r: ReturnType<typeof resultsOf>): Promise<CheckResult[]> {
  const formats = new Map<string, number>();
  const refused: { target: string; uid: string; why: string }[] = [];
  const foreign: { target: string; jobs: number; sampled: number }[] = [];
  let read = 0;
  for (const target of src.targets) {
    const jobs = (await src.store
      .queueOf(target)
      .getJobs(['delayed', 'waiting', 'active'], 0, JOBS_SAMPLED - 1)) as (Job<StoredJobData> | undefined)[];
    const old: string[] = [];
    for (const job of jobs) {
      if (!job) continue;
      read += 1;
      const v = (job.data as { v?: unknown } | undefined)?.v;
      const format = v === undefined ? '1 (no v)' : String(v);
      formats.set(format, (formats.get(format) ?? 0) + 1);
      try {
        const data = cleanupJobDataOf(target, job);
        if (src.nowMs - job.timestamp > FOREIGN_JOB_AGE_MS && data.deadlineMs > src.nowMs) old.push(data.uid);
      } catch (err) {
        if (!(err instanceof InvalidJobDataError)) throw err;
        refused.push({ target: targetLabel(target), uid: String(job.id), why: err.message });
      }
    }
    if (old.length > 0) {
      const uids = await src.podUids(target);
      const missing = uids ? old.filter((u) => !uids.has(u)).length : 0;
      if (missing > 0) foreign.push({ target: targetLabel(target), jobs: missing, sampled: old.length });
    }
  }
  const out: CheckResult[] = [];
  const list = [...formats.entries()].map(([f, n]) => `format ${f}: ${n}`).join(', ');
  const newer = [...formats.keys()].filter((f) => Number(f) > JOB_FORMAT);
  if (refused.length > 0)
    out.push(
      r.fail(
        'fleet.job-format',
        `job format: ${refused.length} of ${read} sampled jobs cannot be read by this release (${refused[0]?.why}): a replica of another release writes a format this one refuses`,
        {
          fix: 'run one release on a queuePrefix (finish or roll back the rollout: docs/deployment.md, "Upgrading"); refused jobs are removed and their pods enqueued again by the replicas that read them',
          details: { refused: refused.slice(0, 10), formats: Object.fromEntries(formats) },
        },
      ),
    );
  else if (newer.length > 0)
    out.push(
      r.warn(
        'fleet.job-format',
        `job format: ${list}; format ${newer.join(', ')} comes from a newer release (this one reads format ${JOB_FORMAT})`,
        {
          fix: 'a rollout is in progress: this release reads the fields it knows of a newer format; finish the rollout',
          details: { formats: Object.fromEntries(formats) },
        },
      ),
    );
  else
    out.push(
      r.pass(
        'fleet.job-format',
        read === 0 ? 'job format: no pending job to read' : `job format: ${read} pending jobs read, ${list}`,
        {
          details: { formats: Object.fromEntries(formats) },
        },
      ),
    );
  out.push(
    foreign.length === 0
      ? r.pass(
          'fleet.foreign-jobs',
          'queues: every pending job older than 2 min is for a pod of this cluster',
        )
      : r.warn(
          'fleet.foreign-jobs',
          `queues: ${foreign.map((f) => `${f.target} has ${f.jobs} pending job(s) for pods this cluster does not have`).join('; ')}: another cluster may use the same queues`,
          {
            fix: 'if another cluster runs the cleaner under the same cluster name, Redis and queuePrefix, give each its own cluster name (SDC_CLUSTER_NAME) or queuePrefix',
            details: { targets: foreign },
          },
        ),
  );
  return out;
}
