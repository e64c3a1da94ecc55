/**
 * Discovered namespaces end to end: replica processes (`run` with `kube:*` and `namespaceSelector`) against
 * real Redis, real etcd and a sandbox API server serving namespaces. A namespace that gains the label is
 * cleaned (each pod deleted once, by the sandbox's request log); one that loses it, or is deleted, is no
 * longer led (no election key in etcd, absent from every replica's /api/v1/leaders) and its later pods are
 * left alone; with no namespace matched a replica runs and is ready, and exports sdc_build_info but no per-target
 * series (what the absence alert relies on).
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_PATH } from '../../harness/sandbox/replica-process.ts';
import { httpUrl } from '../failure/helpers.ts';
import { boundMs, E2E_BOUNDS } from '../helpers/bounds.ts';
import {
  createTerminatedDrivers,
  deletesPer,
  serviceEnv,
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
const SELECTOR = 'spark-cleanup=on';
const env = (targets: string, prefix: string) => ({
  SDC_TARGETS: targets,
  SDC_NAMESPACE_SELECTOR: SELECTOR,
  SDC_QUEUE_PREFIX: prefix,
  SDC_RETENTION: '1s',
  SDC_ELECTION_TTL_SECONDS: '3',
  SDC_RETRY_BASE_DELAY: '200ms',
  SDC_RETRY_MAX_DELAY: '2s',
});
/**
 * How long a namespace labelled, unlabelled or deleted waits for the replicas to follow (and its pods for their
 * cleanup): the replica's debounce (2 s, src/replica-supervisor.ts), its restart, an election and the retention
 * (1 s); measured ≤ 2.3 s, the debounce added once more for a change that comes during one.
 */
const BOUND_MS = boundMs(2_300, 2_000);
const gone = (ns: string, uids: string[]) =>
  uids.every(
    (uid) =>
      !kube()
        .pods.list(ns)
        .some((p) => p.metadata?.uid === uid),
  );
const leaders = async (url: string) =>
  (await (await fetch(`${url}/api/v1/leaders`)).json()) as {
    targets: Record<string, unknown>;
    discovery: { context: string; namespaces: string[] }[];
  };

/** `spark-driver-cleaner status --json` with this configuration and the test services. */
function status(
  extra: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_PATH, 'status', '--json'],
      {
        env: {
          ...process.env,
          ...serviceEnv(cluster.kubeconfig, cluster.redis, cluster.etcd),
          ...extra,
          SDC_LOG_LEVEL: 'silent',
        },
        timeout: E2E_BOUNDS.cli,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
    );
  });
}

describe('namespace discovery', () => {
  it('two replicas: a labelled namespace is cleaned (each pod once); unlabelled or deleted, it is dropped', async () => {
    const replicas = ['r1', 'r2'].map((id) => cluster.startReplica(id, env('fixed,kube:*', 'd1')));
    const urls = await Promise.all(replicas.map((r) => httpUrl(r, E2E_BOUNDS.elected)));
    for (const r of replicas)
      await r.waitForLine((l) => l.msg === 'targets of this replica', E2E_BOUNDS.follows);

    // Pods first (the sandbox lets pods live in any namespace), then the namespace with the label.
    const a = createTerminatedDrivers(kube(), 'disc-a', 3, 'a').map((p) => p.metadata?.uid as string);
    kube().namespaces.create('disc-a', { 'spark-cleanup': 'on' });
    kube().namespaces.create('quiet', { 'spark-cleanup': 'off' });
    // The fixed target `fixed` (current context: kube) matching as well stays one target: no duplicate.
    kube().namespaces.create('fixed', { 'spark-cleanup': 'on' });
    await waitFor('the pods of the labelled namespace deleted', () => gone('disc-a', a), BOUND_MS);
    expect(deletesPer(kube(), a)).toEqual([1, 1, 1]);
    for (const url of urls) {
      const view = await leaders(url);
      expect(Object.keys(view.targets).sort()).toEqual(['kube:disc-a', 'kube:fixed']);
      expect(view.discovery).toEqual([
        { context: 'kube', namespaceSelector: SELECTOR, synced: true, namespaces: ['disc-a', 'fixed'] },
      ]);
    }
    expect(await cluster.leaderOf('kube', 'disc-a')).toMatch(/^r[12]$/);
    for (const r of replicas)
      expect(
        r.lines
          .filter((l) => l.msg === 'replica restarted for the discovered namespaces')
          .map((l) => l.added),
      ).toEqual([['kube:disc-a']]);
    // `status` (Redis and etcd only) shows the discovered namespace beside the fixed one, led.
    const st = await status(env('fixed,kube:*', 'd1'));
    expect(st.code, st.stderr).toBe(0);
    const rows = (JSON.parse(st.stdout) as { targets: { target: string; leader: string | null }[] }).targets;
    expect(rows.map((r) => r.target)).toEqual(['kube:fixed', 'kube:disc-a']);
    expect(rows.every((r) => /^r[12]$/.test(r.leader ?? ''))).toBe(true);

    // The label removed: every replica restarts without it, its election key goes, its pods stay.
    kube().namespaces.setLabels('disc-a', { 'spark-cleanup': 'off' });
    for (const r of replicas)
      await r.waitForLine(
        (l) =>
          l.msg === 'replica restarted for the discovered namespaces' &&
          (l.removed as string[]).includes('kube:disc-a'),
        BOUND_MS,
      );
    await waitFor(
      'no leader of kube:disc-a in etcd',
      async () => (await cluster.leaderOf('kube', 'disc-a')) === undefined,
      E2E_BOUNDS.follows,
    );
    for (const url of urls) expect(Object.keys((await leaders(url)).targets)).toEqual(['kube:fixed']);
    const later = createTerminatedDrivers(kube(), 'disc-a', 2, 'later').map((p) => p.metadata?.uid as string);
    // A pod of the fixed target finished after them is cleaned: the replicas work, and passed the others by.
    const probe = createTerminatedDrivers(kube(), 'fixed', 1, 'probe').map((p) => p.metadata?.uid as string);
    await waitFor('the probe of the fixed target deleted', () => gone('fixed', probe), BOUND_MS);
    expect(deletesPer(kube(), later)).toEqual([0, 0]);
    expect(gone('disc-a', later)).toBe(false);

    // Labelled again: its pending pods are cleaned; then deleted: dropped as well.
    kube().namespaces.setLabels('disc-a', { 'spark-cleanup': 'on' });
    await waitFor('the later pods deleted once relabelled', () => gone('disc-a', later), BOUND_MS);
    expect(deletesPer(kube(), later)).toEqual([1, 1]);
    kube().namespaces.delete('disc-a');
    // The fourth change of the set: added, unlabelled, relabelled, deleted.
    const restarts = (r: (typeof replicas)[number]) =>
      r.lines.filter((l) => l.msg === 'replica restarted for the discovered namespaces');
    for (const r of replicas)
      await waitFor(
        `${r.id} restarted without the deleted namespace`,
        () =>
          restarts(r).length === 4 && ((restarts(r)[3]?.removed ?? []) as string[]).includes('kube:disc-a'),
        BOUND_MS,
      );
    await waitFor(
      'no leader of kube:disc-a after its deletion',
      async () => (await cluster.leaderOf('kube', 'disc-a')) === undefined,
      E2E_BOUNDS.follows,
    );
    for (const url of urls) expect((await leaders(url)).discovery[0]?.namespaces).toEqual(['fixed']);
    for (const r of replicas) r.kill('SIGTERM');
    expect(await Promise.all(replicas.map((r) => r.exited))).toEqual([0, 0]);
  }, 180_000);

  it('no namespace matched: the replica runs, says so, and is ready', async () => {
    // A selector no namespace of the shared sandbox carries.
    const r = cluster.startReplica('r3', { ...env('kube:*', 'd2'), SDC_NAMESPACE_SELECTOR: 'nobody=here' });
    const url = await httpUrl(r, E2E_BOUNDS.elected);
    await r.waitForLine(
      (l) => l.msg === 'no target: no namespace matches namespaceSelector yet; waiting for one',
      E2E_BOUNDS.follows,
    );
    const res = await fetch(`${url}/readyz`);
    const body = (await res.json()) as {
      ok: boolean;
      discovery: { namespaces: string[]; synced: boolean }[];
    };
    expect(res.status).toBe(200);
    expect(body.discovery).toEqual([
      { context: 'kube', namespaceSelector: 'nobody=here', synced: true, namespaces: [] },
    ]);
    // What the absence alert reads (infra/monitoring/alerts.yaml): sdc_build_info, never a per-target series,
    // of which a replica without targets has none.
    const metrics = (await (await fetch(`${url}/metrics`)).text()).split('\n');
    expect(metrics.filter((l) => /^sdc_build_info\{version="[^"]+"\} 1$/.test(l))).toHaveLength(1);
    expect(metrics.filter((l) => l.startsWith('sdc_leader{'))).toEqual([]);
    r.kill('SIGTERM');
    expect(await r.exited).toBe(0);
  }, 60_000);
});
