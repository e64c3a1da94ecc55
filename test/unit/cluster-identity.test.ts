/**
 * A cluster's identity (src/kube/cluster-identity.ts): derived from the CA certificate (the oldest of a
 * bundle), or the API server URL without one; explicit names (`clusterName`, `clusterNames`) validated as DNS
 * labels with errors naming the field (exit 2); two contexts reaching one cluster are one target; and the
 * fingerprints a replica claims follow its CA file through a rotation.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { clusterIdentity, fingerprintsNow } from '../../src/kube/cluster-identity.ts';
import { openContexts, resolveIdentities } from '../../src/kube/context-clients.ts';
import { DuplicateTargetError } from '../../src/kube/distinct-targets.ts';
import { KubeconfigError, loadClusterEndpoint } from '../../src/kube/kubeconfig.ts';

/** A self-signed CA certificate (PEM) valid from `notBefore`. */
async function ca(cn: string, notBefore: Date): Promise<string> {
  const pems = await generate([{ name: 'commonName', value: cn }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: notBefore,
    notAfterDate: new Date(notBefore.getTime() + 365 * 86_400_000),
    extensions: [{ name: 'basicConstraints', cA: true, critical: true }],
  });
  return pems.cert;
}

let oldCa: string;
let newCa: string;
let otherCa: string;
beforeAll(async () => {
  [oldCa, newCa, otherCa] = await Promise.all([
    ca('old', new Date('2024-01-01T00:00:00Z')),
    ca('new', new Date('2026-01-01T00:00:00Z')),
    ca('other', new Date('2025-01-01T00:00:00Z')),
  ]);
});

const access = (server: string, ...pems: string[]) => ({
  server,
  tls: pems.length > 0 ? { ca: Buffer.from(pems.join('\n')) } : {},
});

describe('clusterIdentity: derived', () => {
  it('from the CA: ca-<12 hex>, the same whatever URL reaches it; another CA is another cluster', () => {
    const a = clusterIdentity(access('https://10.96.0.1:443', oldCa));
    const b = clusterIdentity(access('https://api.prod.example:6443', oldCa));
    const c = clusterIdentity(access('https://10.96.0.1:443', otherCa));
    expect(a.name).toMatch(/^ca-[0-9a-f]{12}$/);
    expect(a).toEqual({ ...b });
    expect(a.source).toBe('certificate-authority');
    expect(a.fingerprints).toEqual([`ca:${a.name.slice(3)}`]);
    expect(c.name).not.toBe(a.name);
  });

  it('a CA rotation: the bundle (old + new, any order) keeps the old name; the new CA alone changes it', () => {
    const before = clusterIdentity(access('https://k', oldCa));
    const during = clusterIdentity(access('https://k', newCa, oldCa));
    const after = clusterIdentity(access('https://k', newCa));
    expect(during.name).toBe(before.name);
    expect(during.fingerprints).toHaveLength(2);
    expect(during.fingerprints).toEqual(
      expect.arrayContaining([...before.fingerprints, ...after.fingerprints]),
    );
    expect(after.name).not.toBe(before.name);
  });

  it('no CA (plain http, the system CAs): api-<12 hex> of the URL, which names it', () => {
    const a = clusterIdentity(access('http://127.0.0.1:8080'));
    expect(a).toEqual({
      name: expect.stringMatching(/^api-[0-9a-f]{12}$/),
      source: 'server',
      fingerprints: [expect.stringMatching(/^server:[0-9a-f]{12}$/)],
    });
    expect(clusterIdentity(access('http://127.0.0.1:8081')).name).not.toBe(a.name);
  });

  it('an explicit name wins and keeps the fingerprints', () => {
    const id = clusterIdentity(access('https://k', oldCa), { name: 'prod-eu-1', field: 'clusterNames' });
    expect(id).toEqual({
      name: 'prod-eu-1',
      source: 'clusterNames',
      fingerprints: clusterIdentity(access('https://k', oldCa)).fingerprints,
    });
  });
});

/** A kubeconfig with one context per entry (context = cluster name), current the first. */
function kubeconfig(entries: { context: string; server: string; ca?: string }[]): string {
  const path = join(mkdtempSync(join(tmpdir(), 'sdc-identity-')), 'config');
  writeFileSync(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: entries.map((e) => ({
        name: e.context,
        cluster: {
          server: e.server,
          ...(e.ca ? { 'certificate-authority-data': Buffer.from(e.ca).toString('base64') } : {}),
        },
      })),
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: entries.map((e) => ({ name: e.context, context: { cluster: e.context, user: 'u' } })),
      'current-context': entries[0]?.context,
    }),
  );
  return path;
}

const contextsConfig = (path: string, targets: string, env: Record<string, string> = {}) =>
  loadConfig({ env: { KUBECONFIG: path, SDC_TARGETS: targets, ...env } });

describe('explicit names and duplicates (openContexts, exit 2)', () => {
  it('clusterName names the default context’s cluster; clusterNames the others; the rest are derived', async () => {
    const path = kubeconfig([
      { context: 'a', server: 'https://a:6443', ca: oldCa },
      { context: 'b', server: 'https://b:6443', ca: otherCa },
      { context: 'c', server: 'https://c:6443', ca: newCa },
    ]);
    const opened = openContexts(
      contextsConfig(path, 'spark,b:spark,c:spark', {
        SDC_CLUSTER_NAME: 'prod-a',
        SDC_CLUSTER_NAMES: 'b=prod-b',
      }),
      { now: Date.now },
    );
    try {
      expect(
        opened.targets.map((t) => [t.clients.context, t.clients.cluster.name, t.clients.cluster.source]),
      ).toEqual([
        ['a', 'prod-a', 'clusterName'],
        ['b', 'prod-b', 'clusterNames'],
        ['c', clusterIdentity(access('https://c:6443', newCa)).name, 'certificate-authority'],
      ]);
    } finally {
      await opened.close();
    }
  });

  it('two contexts of one cluster (one CA), same namespace → one target: refused, naming both contexts', () => {
    const path = kubeconfig([
      { context: 'inside', server: 'https://10.96.0.1:443', ca: oldCa },
      { context: 'outside', server: 'https://api.example:6443', ca: oldCa },
    ]);
    const config = contextsConfig(path, 'inside:spark,outside:spark');
    expect(() => openContexts(config, { now: Date.now })).toThrow(DuplicateTargetError);
    expect(() => openContexts(config, { now: Date.now })).toThrow(
      /"inside:spark" and "outside:spark" are the same target, namespace spark of cluster ca-[0-9a-f]{12} \(derived from the CA certificate.*reached through contexts inside and outside/,
    );
    // Named alike by clusterNames: the same.
    const named = contextsConfig(
      kubeconfig([
        { context: 'x', server: 'https://x', ca: oldCa },
        { context: 'y', server: 'https://y', ca: otherCa },
      ]),
      'x:spark,y:spark',
      { SDC_CLUSTER_NAMES: 'x=one,y=one' },
    );
    expect(() => openContexts(named, { now: Date.now })).toThrow(
      /same target, namespace spark of cluster one/,
    );
  });

  it('clusterName and clusterNames naming the default context differently → refused, naming both fields', () => {
    const path = kubeconfig([{ context: 'a', server: 'https://a', ca: oldCa }]);
    const config = contextsConfig(path, 'spark', { SDC_CLUSTER_NAME: 'one', SDC_CLUSTER_NAMES: 'a=two' });
    expect(() => openContexts(config, { now: Date.now })).toThrow(KubeconfigError);
    expect(() => openContexts(config, { now: Date.now })).toThrow(
      /clusterName \(--cluster-name, SDC_CLUSTER_NAME\) is one and clusterNames \(--cluster-names, SDC_CLUSTER_NAMES\) names the same context, a \(the default context\), two/,
    );
    // The same name twice is no conflict.
    const same = contextsConfig(path, 'spark', { SDC_CLUSTER_NAME: 'one', SDC_CLUSTER_NAMES: 'a=one' });
    expect(resolveIdentities(path, [loadClusterEndpoint(path, 'a')], same.naming).get('a')?.name).toBe('one');
  });

  it('status and explain read the endpoint only: no credential plugin runs', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sdc-identity-')), 'config');
    writeFileSync(
      path,
      stringify({
        clusters: [
          {
            name: 'c',
            cluster: {
              server: 'https://c',
              'certificate-authority-data': Buffer.from(oldCa).toString('base64'),
            },
          },
        ],
        users: [
          {
            name: 'u',
            user: {
              exec: {
                apiVersion: 'client.authentication.k8s.io/v1',
                command: '/nonexistent/plugin',
                interactiveMode: 'Never',
              },
            },
          },
        ],
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'c',
      }),
    );
    const e = loadClusterEndpoint(path, undefined);
    expect(clusterIdentity(e).name).toBe(clusterIdentity(access('https://x', oldCa)).name);
  });
});

describe('clusterName and clusterNames in the configuration', () => {
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig({ env: { SDC_TARGETS: 'a:b', ...env } });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).problems.join('\n');
    }
    return '';
  };
  it.each([
    ['Prod (upper case)', { SDC_CLUSTER_NAME: 'Prod' }, /^SDC_CLUSTER_NAME: "Prod": expected a DNS label/],
    [
      'a colon (a Redis key separator)',
      { SDC_CLUSTER_NAME: 'a:b' },
      /^SDC_CLUSTER_NAME: "a:b": expected a DNS label/,
    ],
    [
      'a slash (an etcd and ZooKeeper path separator)',
      { SDC_CLUSTER_NAME: 'a/b' },
      /SDC_CLUSTER_NAME: "a\/b"/,
    ],
    [
      '64 characters',
      { SDC_CLUSTER_NAME: 'a'.repeat(64) },
      /SDC_CLUSTER_NAME: "a{64}": expected a DNS label/,
    ],
    ['a pair without =', { SDC_CLUSTER_NAMES: 'prod' }, /^SDC_CLUSTER_NAMES: "prod": expected context=name/],
    [
      'a bad name in a pair',
      { SDC_CLUSTER_NAMES: 'arn:aws:eks:x:1:cluster/a=A_B' },
      /SDC_CLUSTER_NAMES: "arn:aws:eks:x:1:cluster\/a=A_B": the name "A_B" is not a DNS label/,
    ],
    [
      'one context, two names',
      { SDC_CLUSTER_NAMES: 'a=x,a=y' },
      /SDC_CLUSTER_NAMES: context a is named twice \(x and y\)/,
    ],
  ])('%s → exit 2 naming the field', (_name, env, pattern) => {
    expect(problems(env)).toMatch(pattern);
  });

  it('accepted: a DNS label; pairs whose context has colons and slashes (an EKS ARN), the name after the last =', () => {
    const c = loadConfig({
      env: {
        SDC_TARGETS: 'a:b',
        SDC_CLUSTER_NAME: ' prod-eu-1 ',
        SDC_CLUSTER_NAMES: 'arn:aws:eks:eu-west-1:1:cluster/prod=prod-eu-2, kind-a=kind-a',
      },
    });
    expect(c.naming).toEqual({
      clusterName: 'prod-eu-1',
      clusterNames: [
        { context: 'arn:aws:eks:eu-west-1:1:cluster/prod', name: 'prod-eu-2' },
        { context: 'kind-a', name: 'kind-a' },
      ],
    });
    expect(loadConfig({ env: { SDC_TARGETS: 'a:b' } }).naming).toEqual({
      clusterName: undefined,
      clusterNames: [],
    });
  });
});

describe('fingerprintsNow: the CA file as it is now, joined to the one loaded at start', () => {
  it('re-read at most every 30 s; a rotation adds the new CA; an unreadable file keeps the last answer', () => {
    let now = 0;
    let pems = [oldCa];
    let broken = false;
    const started = clusterIdentity(access('https://k', oldCa));
    const read = fingerprintsNow(
      started,
      () => {
        if (broken) throw new Error('being replaced');
        return access('https://k', ...pems);
      },
      () => now,
    );
    expect(read()).toEqual(started.fingerprints);
    pems = [oldCa, newCa];
    now = 29_999;
    expect(read()).toEqual(started.fingerprints);
    now = 30_000;
    const both = read();
    expect(both).toHaveLength(2);
    pems = [newCa];
    broken = true;
    now = 60_000;
    expect(read()).toEqual(both);
    broken = false;
    now = 90_000;
    // The CA it started with stays claimed: its connections still trust it.
    expect(read()).toEqual(both);
  });
});
