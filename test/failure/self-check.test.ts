/**
 * The self-check on real processes: a target that stops being cleaned is visible in `sdc_overdue_pods`, in
 * `/api/v1/leaders` and in an error line on every replica — leader and followers — without anyone counting
 * pods; and it is back to 0 once the pods are cleaned. The stop here is Redis frozen (SIGSTOP): the leader's
 * worker can neither promote nor process a job while the informers keep seeing the pods.
 */
import { describe, expect, it } from 'vitest';
import { deletesPer } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  httpUrl,
  replicaEnv,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();

/** The value of `sdc_overdue_pods` for the namespace in a replica's /metrics (undefined when absent). */
async function overdueOf(url: string, ns: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('sdc_overdue_pods{') && l.includes(`namespace="${ns}"`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('self-check', () => {
  it('Redis frozen → every replica counts the overdue pods, the leader steps down, a follower names it; back to 0 after', async () => {
    const ns = 'self-check';
    const env = replicaEnv(cluster(), ns, 'sc1', {
      SDC_RETENTION: '1s',
      SDC_OVERDUE_GRACE: '2s',
      SDC_RECONCILE_INTERVAL: '3s',
    });
    const replicas = [cluster().startReplica('s1', env), cluster().startReplica('s2', env)];
    try {
      const leader = await firstLeader(replicas, ns);
      const urls = await Promise.all(replicas.map(httpUrl));
      await waitFor('the gauge is exported at 0', async () =>
        (await Promise.all(urls.map((u) => overdueOf(u, ns)))).every((v) => v === 0),
      );

      cluster().redis.pause();
      const pods = createDrivers(cluster().server, ns, 5, 'stuck', 10_000); // finished 10 s ago: overdue
      const uids = pods.map(uidOf);
      await waitFor(
        'both replicas report 5 overdue pods',
        async () => (await Promise.all(urls.map((u) => overdueOf(u, ns)))).every((v) => v === 5),
        20_000,
      );
      const api = (await (await fetch(`${urls[0]}/api/v1/leaders`)).json()) as {
        targets: Record<string, { overdue: number; oldestOverdueSeconds: number; oldestOverdue: unknown[] }>;
      };
      const row = api.targets[`${cluster().context}:${ns}`];
      expect(row?.overdue).toBe(5);
      expect(row?.oldestOverdue).toHaveLength(5);
      expect(row?.oldestOverdueSeconds).toBeGreaterThanOrEqual(2);

      // The leader processed nothing while pods were overdue for the grace: it says so and steps down.
      await leader.waitForLine(
        (l) =>
          l.level === 'error' &&
          l.namespace === ns &&
          String(l.msg).startsWith('self-check: leader is stuck'),
        20_000,
      );
      // Followers name the leader of the moment (or say there is none) once pods are 2 × grace overdue.
      await Promise.any(
        replicas.map((r) =>
          r.waitForLine(
            (l) =>
              l.level === 'error' &&
              l.namespace === ns &&
              String(l.msg).startsWith('self-check: pods overdue'),
            20_000,
          ),
        ),
      );

      cluster().redis.resume();
      await waitGone(cluster().server, pods, 'pods deleted once Redis is back', 60_000);
      await waitFor('both replicas report 0 overdue pods again', async () =>
        (await Promise.all(urls.map((u) => overdueOf(u, ns)))).every((v) => v === 0),
      );
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
    } finally {
      cluster().redis.resume();
      await stopAll(replicas);
    }
  }, 150_000);

  it('DELETEs refused (403) for long past the grace → the leader keeps leading (failing, not stuck), failed outcomes counted with their Status; deleted once when the API accepts', async () => {
    const ns = 'self-check-403';
    const env = replicaEnv(cluster(), ns, 'sc2', {
      SDC_RETENTION: '1s',
      SDC_OVERDUE_GRACE: '2s', // the leader's stuck threshold too: 2 s
      // Retries 2–4, 4–8, 6–12, 6–12 s apart (jitter × 0.5–1): gaps far longer than the threshold, so a
      // self-check (every 5 s) sees a leader that has processed nothing for over 2 s.
      SDC_RETRY_BASE_DELAY: '4s',
      SDC_RETRY_MAX_DELAY: '12s',
    });
    const replicas = [cluster().startReplica('f1', env), cluster().startReplica('f2', env)];
    const server = cluster().server;
    const fault = server.faults.inject({ verb: 'delete', path: `/namespaces/${ns}/pods/`, status: 403 });
    try {
      const leader = await firstLeader(replicas, ns);
      const settled = Date.now();
      const url = await httpUrl(leader);
      // One pod: its retries are the leader's only work (several pods' retries would interleave).
      const pods = createDrivers(server, ns, 1, 'refused', 10_000); // overdue from the start
      const uids = pods.map(uidOf);
      // Five refused DELETEs: 18–36 s of failing, ten times the stuck threshold or more, several self-checks.
      await waitFor('five refused DELETEs', () => deletesPer(server, uids).every((n) => n >= 5), 90_000);
      const failedOutcomes = async () => {
        const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
        const line = text
          .split('\n')
          .find(
            (l) =>
              l.startsWith('sdc_cleanup_outcomes_total{') &&
              l.includes(`namespace="${ns}"`) &&
              l.includes('outcome="failed"'),
          );
        return Number(line?.split(' ').pop() ?? 0);
      };
      // No step-down: no stuck line, and its term never ended since leadership settled.
      const stuck = replicas.flatMap((r) =>
        r.lines.filter((l) => l.namespace === ns && String(l.msg).startsWith('self-check: leader is stuck')),
      );
      expect(stuck).toEqual([]);
      const ended = replicas.flatMap((r) =>
        r.lines
          .filter(
            (l) =>
              l.namespace === ns &&
              (l.msg === 'leadership ended' || l.msg === 'leadership lost') &&
              Date.parse(String(l.time)) >= settled,
          )
          .map((l) => `${r.id}: ${l.msg} (${l.reason})`),
      );
      expect(ended).toEqual([]);
      // Every refused DELETE is a failed outcome of the leader, with the API's Status.
      // The fifth answer can reach the sandbox's log before the leader's line about it reaches its stdout.
      const failedLines = () => leader.lines.filter((l) => l.namespace === ns && l.outcome === 'failed');
      await waitFor('five failed outcomes logged', () => failedLines().length >= 5, 15_000);
      const failed = failedLines();
      expect(failed[0]).toMatchObject({ level: 'warn', step: 'delete', code: 403, reason: 'Forbidden' });
      await waitFor('five failed outcomes counted', async () => (await failedOutcomes()) >= 5, 15_000);

      server.faults.clear(fault);
      await waitGone(server, pods, 'pods deleted once the API accepts', 30_000);
      const accepted = server.requests.deletesByUid();
      for (const uid of uids) expect(accepted.get(uid)?.filter((code) => code === 200)).toEqual([200]);
    } finally {
      server.faults.clear(fault);
      await stopAll(replicas);
    }
  }, 150_000);
});
