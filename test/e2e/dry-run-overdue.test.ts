/**
 * Dry run left on after Kyuubi's cleanup was switched off, end to end: a replica process (`run`, real Redis, real
 * etcd, a sandbox API server) in dry run with driver pods past their deadline. Nothing deletes them; `/metrics`
 * says dry run is on (`sdc_dry_run 1`) and counts them as would-be overdue (`sdc_overdue_pods`,
 * `sdc_overdue_oldest_age_seconds`), the series SparkDriverCleanerDryRunPodsOverdue reads; the leader warns once
 * and does not step down. Then dry run off (the same replica restarted with SDC_DRY_RUN=false): each pod deleted
 * once, and the count back to 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpUrl } from '../failure/helpers.ts';
import { boundMs, E2E_BOUNDS } from '../helpers/bounds.ts';
import {
  createTerminatedDrivers,
  deletesPer,
  startTestCluster,
  type TestCluster,
} from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startTestCluster(['kube']);
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

const kube = () => cluster.servers.kube as NonNullable<TestCluster['servers'][string]>;
const NS = 'dry';
const env = (dryRun: boolean) => ({
  SDC_TARGETS: `kube:${NS}`,
  SDC_QUEUE_PREFIX: 'dry',
  SDC_RETENTION: '1s',
  // A pod counts as would-be overdue 1 s past its would-delete deadline; the leader warns at 2 s (2 × grace).
  SDC_OVERDUE_GRACE: '1s',
  SDC_ELECTION_TTL_SECONDS: '3',
  SDC_DRY_RUN: String(dryRun),
});

/**
 * The value of the one sample of `/metrics` whose line starts with `prefix`, read without its `cluster` label
 * (the sandbox cluster's derived name; undefined: none).
 */
async function sample(url: string, prefix: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const lines = text
    .split('\n')
    .map((l) => l.replace(/\{cluster="[^"]*",/, '{'))
    .filter((l) => l.startsWith(prefix));
  if (lines.length > 1) throw new Error(`${lines.length} samples start with ${prefix}`);
  const line = lines[0];
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const target = `{context="kube",namespace="${NS}"}`;

describe('dry run left on', () => {
  it('due pods stay, /metrics reports dry run and counts them as would-be overdue; dry run off deletes each once', async () => {
    const pods = createTerminatedDrivers(kube(), NS, 3, 'dry').map((p) => p.metadata?.uid as string);
    const dry = cluster.startReplica('dry-1', env(true));
    const url = await httpUrl(dry, E2E_BOUNDS.elected);

    expect(await sample(url, 'sdc_dry_run ')).toBe(1);
    // Each pod's job runs at its deadline and ends `would-delete`; the pods stay.
    await waitFor(
      'the three jobs ended would-delete',
      async () =>
        (await sample(
          url,
          `sdc_cleanup_outcomes_total{context="kube",namespace="${NS}",outcome="would-delete"}`,
        )) === 3,
      E2E_BOUNDS.cleaned,
      200,
    );
    await waitFor(
      'the three pods counted as would-be overdue',
      async () => (await sample(url, `sdc_overdue_pods${target}`)) === 3,
      E2E_BOUNDS.follows,
      200,
    );
    expect(await sample(url, `sdc_overdue_oldest_age_seconds${target}`)).toBeGreaterThanOrEqual(1);
    const warning = await dry.waitForLine(
      (l) =>
        l.msg ===
        'self-check: dry run is on and pods are past their would-delete deadline: nothing deletes them',
      // At most 2 × overdueGrace (2 s) and a self-check interval (5 s) past the deadline; measured ≤ 3.8 s.
      boundMs(3_800),
    );
    expect(warning).toMatchObject({ level: 'warn', overdue: 3, dryRun: true });
    expect(deletesPer(kube(), pods)).toEqual([0, 0, 0]);
    expect(dry.lines.filter((l) => l.msg === 'self-check: leader is stuck; stepping down')).toEqual([]);
    dry.kill('SIGTERM');
    expect(await dry.exited).toBe(0);

    // Dry run off: the pods it logged as would-delete are deleted at once, each once, and nothing is overdue.
    const live = cluster.startReplica('dry-1', env(false));
    const liveUrl = await httpUrl(live, E2E_BOUNDS.elected);
    expect(await sample(liveUrl, 'sdc_dry_run ')).toBe(0);
    await waitFor(
      'the three pods deleted',
      () =>
        pods.every(
          (uid) =>
            !kube()
              .pods.list(NS)
              .some((p) => p.metadata?.uid === uid),
        ),
      E2E_BOUNDS.cleaned,
    );
    expect(deletesPer(kube(), pods)).toEqual([1, 1, 1]);
    await waitFor(
      'nothing overdue',
      async () => (await sample(liveUrl, `sdc_overdue_pods${target}`)) === 0,
      E2E_BOUNDS.follows,
      200,
    );
    live.kill('SIGTERM');
    expect(await live.exited).toBe(0);
  }, 120_000);
});
