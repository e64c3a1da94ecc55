/**
 * The synthetic Spark workload and the fixture loader: drivers move Pending → Running → terminal
 * with the configured mix, executors are owned by their driver, and the fixture PodList loads verbatim.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { loadFixturePods, startSparkWorkload } from '../../harness/sandbox/workload.ts';

let server: SandboxApiServer;
beforeAll(async () => {
  server = await startSandboxApiServer();
});
afterAll(async () => {
  await server.close();
});

describe('startSparkWorkload', () => {
  it('creates the given number of drivers that all terminate, with the mix and owned executors', async () => {
    const workload = startSparkWorkload(server, {
      namespaces: ['wa', 'wb'],
      pods: 6,
      ratePerSecond: 200,
      pendingMs: 20,
      runMs: 40,
      executorsPerDriver: 2,
      mix: { succeeded: 0, failed: 0, oomKilled: 1 },
    });
    await workload.done;
    expect(workload.stats.created).toBe(6);
    expect(workload.stats.terminated).toHaveLength(6);
    const drivers = server.pods.list().filter((p) => p.metadata?.labels?.['spark-role'] === 'driver');
    expect(drivers.map((p) => p.metadata?.namespace).sort()).toEqual(['wa', 'wa', 'wa', 'wb', 'wb', 'wb']);
    for (const d of drivers) {
      expect(d.status?.phase).toBe('Failed');
      expect(d.spec?.nodeName).toBeTruthy();
      expect(Object.keys(d.metadata?.labels ?? {}).sort()).toEqual([
        'kyuubi-unique-tag',
        'spark-app-name',
        'spark-app-selector',
        'spark-role',
        'spark-version',
      ]);
      const c = d.status?.containerStatuses?.[0];
      expect(c?.name).toBe('spark-kubernetes-driver');
      expect(c?.state?.terminated).toMatchObject({ exitCode: 137, reason: 'OOMKilled' });
      const owned = server.pods
        .list(d.metadata?.namespace)
        .filter((p) => p.metadata?.ownerReferences?.some((o) => o.uid === d.metadata?.uid));
      expect(owned).toHaveLength(2);
    }
    const t = workload.stats.terminated[0];
    expect(t?.finishedAtMs).toBe(
      Date.parse(
        String(
          server.pods.get(t?.namespace ?? '', t?.name ?? '')?.status?.containerStatuses?.[0]?.state
            ?.terminated?.finishedAt,
        ),
      ),
    );
  });

  it('stop() ends the workload before its count', async () => {
    const workload = startSparkWorkload(server, { namespaces: ['ws'], ratePerSecond: 1, runMs: 60_000 });
    workload.stop();
    await workload.done;
    expect(workload.stats.created).toBe(1);
    expect(workload.stats.terminated).toHaveLength(0);
  });
});

describe('loadFixturePods', () => {
  it('loads ../shared/fixtures/driver-pods.json verbatim', async () => {
    const fresh = await startSandboxApiServer();
    try {
      const pods = loadFixturePods(fresh);
      expect(pods.length).toBeGreaterThan(5);
      const going = fresh.pods
        .list('spark-jobs')
        .find((p) => p.metadata?.name?.startsWith('kyuubi-already-going'));
      expect(going?.metadata?.deletionTimestamp).toBeDefined();
      expect(going?.metadata?.finalizers).toEqual(['example.com/audit-export']);
      const noStatus = fresh.pods
        .list('spark-jobs')
        .find((p) => p.metadata?.name?.startsWith('kyuubi-no-status-yet'));
      expect(noStatus?.status).toBeUndefined();
      // The finalizer holds it: a DELETE returns it unchanged.
      const r = fresh.pods.delete('spark-jobs', going?.metadata?.name ?? '');
      expect(r.removed).toBe(false);
      expect(r.pod.metadata?.resourceVersion).toBe(going?.metadata?.resourceVersion);
    } finally {
      await fresh.close();
    }
  });
});
