/**
 * A replica that cannot list pods takes no target: two healthy replicas and one whose API server address refuses
 * connections (its kubeconfig names a closed port), six targets. The broken replica is a live member of the
 * leadership balance, but it reports every target not ready (its membership value), so no target is assigned
 * to it and it campaigns for none: every driver pod of every target is deleted once, within `overdueGrace` of
 * its deadline, and the broken replica says it cannot clean on `/readyz` (503: no target ready), in
 * `sdc_target_ready` and in `status` (read from etcd). And a leader that loses its API access (its proxy closes)
 * hands its targets over to the ready replica once its informer has been down 10 s, and stays out of their line.
 */
import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { deletesPer, linesWhere, serviceEnv, tempFile } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  createDrivers,
  gaugeByNamespace,
  httpUrl,
  replicaEnv,
  runStatus,
  startApiProxy,
  stopAll,
  uidOf,
  useFailureCluster,
} from './helpers.ts';

const cluster = useFailureCluster();

/** A TCP port nothing listens on (bound, then closed: connections to it are refused). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

it('two healthy replicas and one that cannot reach the API: every pod of six targets deleted once, in time; the broken one leads nothing and says so', async () => {
  const c = cluster();
  const namespaces = Array.from({ length: 6 }, (_, i) => `unready-${i}`);
  const graceMs = 10_000;
  const env = replicaEnv(c, namespaces[0] ?? '', 'ur', {
    SDC_TARGETS: namespaces.map((ns) => `${c.context}:${ns}`).join(','),
    SDC_RETENTION: '2s',
    SDC_OVERDUE_GRACE: `${graceMs / 1000}s`,
    SDC_RECONCILE_INTERVAL: '5s',
    // The broken replica's kubeconfig names another server URL, and without a CA a cluster's derived name is
    // its URL's: the one cluster's name, set explicitly, keeps the three replicas one fleet.
    SDC_CLUSTER_NAME: c.clusterName,
  });
  const brokenConfig = tempFile(
    'kubeconfig.yaml',
    c.server.kubeconfigYaml.replace(/server: \S+/, `server: http://127.0.0.1:${await closedPort()}`),
  );
  const healthy = [c.startReplica('ur-h1', env), c.startReplica('ur-h2', env)];
  const replicas = [...healthy];
  try {
    const [h1] = healthy;
    if (!h1) throw new Error('no healthy replica');
    const url = await httpUrl(h1);
    const leaders = async () =>
      (await (await fetch(`${url}/api/v1/leaders`, { signal: AbortSignal.timeout(5000) })).json()) as {
        targets: Record<string, { leader: string | null; assigned?: string | null }>;
        balance: { members: string[] };
      };
    await waitFor(
      'every target led by its assigned healthy replica',
      async () => {
        const body = await leaders();
        const rows = Object.values(body.targets);
        return body.balance.members.length === 2 && rows.every((r) => r.leader && r.leader === r.assigned);
      },
      60_000,
    );

    const broken = c.startReplica('ur-broken', { ...env, KUBECONFIG: brokenConfig });
    replicas.push(broken);
    // It is a live member of the balance: were it counted as able to clean, it would be assigned ⌈6/3⌉ = 2.
    await waitFor('the broken replica is a member', async () =>
      (await leaders()).balance.members.includes('ur-broken'),
    );

    const pods = namespaces.flatMap((ns) => createDrivers(c.server, ns, 5, 'ur'));
    const uids = pods.map(uidOf);
    await waitFor(
      'every driver of every target deleted',
      () => namespaces.every((ns) => c.server.pods.list(ns).length === 0),
      60_000,
    ).catch((err: Error) => {
      const left = namespaces.map((ns) => `${ns}: ${c.server.pods.list(ns).length}`).join(', ');
      const led = linesWhere(replicas, (l) => l.msg === 'elected leader').map(
        (l) => `${l.replica} ${l.namespace}`,
      );
      throw new Error(`${err.message}\nleft: ${left}\nelected: ${led.join(', ')}`);
    });
    expect(deletesPer(c.server, uids)).toEqual(uids.map(() => 1));
    const accepted = await waitFor('an accepted line per pod', () => {
      const ls = linesWhere(replicas, (l) => l.outcome === 'accepted');
      return ls.length >= uids.length ? ls : undefined;
    });
    // Each within the grace of its deadline: no target waited for the broken replica.
    for (const l of accepted) expect(Number(l.latenessMs)).toBeLessThan(graceMs);
    expect(new Set(accepted.map((l) => l.replica))).not.toContain('ur-broken');
    expect(broken.lines.filter((l) => l.msg === 'elected leader')).toEqual([]);

    // It says so: /readyz 503 (no target it can clean) naming them all, sdc_target_ready 0, status per target.
    const brokenUrl = await httpUrl(broken);
    const ready = await fetch(`${brokenUrl}/readyz`, { signal: AbortSignal.timeout(5000) });
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({
      ok: false,
      targetsReady: false,
      notReady: namespaces.map((ns) => `${c.context}:${ns}`),
    });
    const brokenGauge = await gaugeByNamespace(brokenUrl, 'sdc_target_ready');
    expect(namespaces.map((ns) => brokenGauge.get(ns))).toEqual(namespaces.map(() => 0));
    const healthyGauge = await gaugeByNamespace(url, 'sdc_target_ready');
    expect(namespaces.map((ns) => healthyGauge.get(ns))).toEqual(namespaces.map(() => 1));
    expect((await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) })).status).toBe(200);

    const s = await runStatus({ ...serviceEnv(c.server.kubeconfigPath, c.redis, c.etcd), ...env });
    expect(s.code, JSON.stringify(s.json)).toBe(0);
    expect(s.json.balance?.members).toEqual(['ur-broken', 'ur-h1', 'ur-h2']);
    for (const row of s.json.targets) {
      expect(row.notReadyOn).toEqual(['ur-broken']);
      expect(row.assigned).not.toBe('ur-broken');
      expect(row.leader).not.toBe('ur-broken');
    }
    expect(broken.lines.filter((l) => l.msg === 'elected leader')).toEqual([]);
  } finally {
    await stopAll(replicas);
  }
}, 180_000);

it('a leader that loses its API access hands its targets to the ready replica after 10 s down and stays out', async () => {
  const c = cluster();
  const namespaces = Array.from({ length: 4 }, (_, i) => `unready-lost-${i}`);
  const env = replicaEnv(c, namespaces[0] ?? '', 'url', {
    SDC_TARGETS: namespaces.map((ns) => `${c.context}:${ns}`).join(','),
    SDC_RETENTION: '1s',
    SDC_OVERDUE_GRACE: '30s',
  });
  const proxy = await startApiProxy(c.server);
  const losing = c.startReplica('url-a', { ...env, ...proxy.env });
  const keeping = c.startReplica('url-b', env);
  const replicas = [losing, keeping];
  try {
    const url = await httpUrl(keeping);
    const leaders = async () =>
      (await (await fetch(`${url}/api/v1/leaders`, { signal: AbortSignal.timeout(5000) })).json()) as {
        leaders: Record<string, string | null>;
        targets: Record<string, { leader: string | null; assigned?: string | null }>;
        balance: { members: string[]; notReady: Record<string, string[]> };
      };
    const settled = await waitFor(
      'both replicas ready for every target, each leading its share (2), each target its assigned replica',
      async () => {
        const body = await leaders();
        const led = Object.values(body.leaders);
        // Every member ready for every target (an informer still listing moves its target later).
        const allReady = Object.keys(body.balance.notReady).length === 0;
        const settledAll =
          allReady && Object.values(body.targets).every((t) => t.leader && t.leader === t.assigned);
        return settledAll &&
          led.filter((l) => l === 'url-a').length === 2 &&
          led.filter((l) => l === 'url-b').length === 2
          ? body
          : undefined;
      },
      60_000,
    );
    const lostTargets = Object.entries(settled.leaders)
      .filter(([, l]) => l === 'url-a')
      .map(([t]) => t);
    // The shared view shows url-a's win as soon as etcd holds it; its own "elected leader" line
    // comes a moment later. Wait for those lines, so that none is mistaken for a rejoin.
    await waitFor(
      'url-a logged its election for each target it leads',
      () =>
        lostTargets.every((t) =>
          losing.lines.some((l) => l.msg === 'elected leader' && `${l.context}:${l.namespace}` === t),
        ),
      30_000,
    );

    await proxy.close(); // connections to its API address are now refused
    const closedAt = Date.now();
    const pods = namespaces.flatMap((ns) => createDrivers(c.server, ns, 3, 'lost'));
    const uids = pods.map(uidOf);
    await waitFor(
      'every driver deleted',
      () => namespaces.every((ns) => c.server.pods.list(ns).length === 0),
      60_000,
    );
    await waitFor(
      'every target led by the ready replica, the other reported not ready for all',
      async () => {
        const body = await leaders();
        return (
          Object.values(body.leaders).every((l) => l === 'url-b') &&
          namespaces.every((ns) => body.balance.notReady[`${c.clusterName}/${ns}`]?.includes('url-a'))
        );
      },
      60_000,
    );
    expect(deletesPer(c.server, uids)).toEqual(uids.map(() => 1));
    // It handed over (not lost: a planned end), no sooner than its informer's 10 s down.
    const handovers = losing.lines.filter(
      (l) =>
        l.msg === 'leadership ended' &&
        String(l.reason).includes('handing over to url-b') &&
        Date.parse(String(l.time)) >= closedAt,
    );
    expect(new Set(handovers.map((l) => `${l.context}:${l.namespace}`))).toEqual(new Set(lostTargets));
    for (const l of handovers) expect(Date.parse(String(l.time)) - closedAt).toBeGreaterThanOrEqual(9000);
    // And stays out of the line while it cannot list.
    const rejoined = losing.lines.filter(
      (l) => l.msg === 'elected leader' && Date.parse(String(l.time)) > closedAt,
    );
    const story = [losing, keeping].flatMap((r) =>
      r.lines
        .filter((l) => /lead|elect|campaign|hand|fallback|stuck|informer|lease|member/.test(String(l.msg)))
        .map((l) => [r.id, l.time, l.namespace, l.msg, l.reason ?? l.why ?? '', l.owner ?? ''].join(' ')),
    );
    expect(rejoined, `closed at ${new Date(closedAt).toISOString()}\n${story.join('\n')}`).toEqual([]);
  } finally {
    await stopAll(replicas);
  }
}, 180_000);
