/**
 * Every kustomization renders with `kubectl kustomize`, and every rendered object is valid against
 * the Kubernetes API schemas (types, required fields, formats, and no unknown fields); every component is used by
 * one of them. Every overlay's configuration loads as a replica loads it, with Redis and one leadership backend.
 * Then the properties of the example backends the cleaner depends on, and of the Sentinel, ZooKeeper,
 * remote-contexts and private-CA Redis variants.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { envName, FIELDS } from '../../src/config/fields.ts';
import { loadConfig } from '../../src/config/load.ts';
import { type Container, configMapEnv, findOne, podEnv, type Workload } from './find-objects.ts';
import { COMPONENTS, KUSTOMIZATIONS, kustomize, REPO_ROOT } from './render.ts';
import { type KubeObject, UnknownKindError, validateKubeObject } from './validate-object.ts';

/** The private-CA Redis component inside the example overlay, as docs/deployment.md shows it. */
const WITH_REDIS_CA = 'test/deploy/with-redis-ca';
const rendered = new Map([...KUSTOMIZATIONS, WITH_REDIS_CA].map((dir) => [dir, kustomize(dir)] as const));
const overlay = rendered.get('infra/k8s/overlays/example')?.objects as KubeObject[];

describe.each([...KUSTOMIZATIONS, WITH_REDIS_CA])('%s', (dir) => {
  const { objects, warnings } = rendered.get(dir) as { objects: KubeObject[]; warnings: string };

  // kustomize v5 warns about deprecated fields (`bases`, `patchesStrategicMerge`, `vars`…): each is a
  // field a later kustomize drops, so the shipped files use none.
  it('renders without a kustomize warning (no deprecated field)', () => {
    expect(warnings).toBe('');
  });

  it('renders objects with apiVersion, kind and name', () => {
    expect(objects.length).toBeGreaterThan(0);
    for (const o of objects)
      expect(o.metadata?.name, `${o.kind}`).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
  });

  it('every object is valid against the Kubernetes schemas', async () => {
    const problems = (await Promise.all(objects.map(validateKubeObject))).flat();
    expect(problems).toEqual([]);
  });
});

describe('the kustomizations', () => {
  it('include every overlay directory, and render without the GitOps one (its remote base: gitops.test.ts)', () => {
    const overlays = readdirSync(path.join(REPO_ROOT, 'infra/k8s/overlays')).map(
      (d) => `infra/k8s/overlays/${d}`,
    );
    expect(overlays.filter((d) => !KUSTOMIZATIONS.includes(d))).toEqual(['infra/k8s/overlays/gitops']);
  });

  it('use every component: each is rendered inside a kustomization that CI renders', () => {
    const kustomizations = [...KUSTOMIZATIONS, WITH_REDIS_CA, 'test/deploy/with-monitoring'];
    const used = new Set(
      kustomizations.flatMap((dir) => {
        const text = readFileSync(path.join(REPO_ROOT, dir, 'kustomization.yaml'), 'utf8');
        const listed = text.split(/^components:\s*$/m)[1]?.split(/^\S/m)[0] ?? '';
        return [...listed.matchAll(/^\s*-\s*(\S+)\s*$/gm)].map((m) =>
          path
            .relative(REPO_ROOT, path.resolve(REPO_ROOT, dir, m[1] ?? ''))
            .split(path.sep)
            .join('/'),
        );
      }),
    );
    expect(COMPONENTS.length).toBeGreaterThanOrEqual(3);
    expect(COMPONENTS.filter((c) => !used.has(c))).toEqual([]);
  });
});

/** The overlays that run the cleaner, with its container. */
const overlays = KUSTOMIZATIONS.filter((d) => d.startsWith('infra/k8s/overlays/')).flatMap((dir) => {
  const objects = rendered.get(dir)?.objects ?? [];
  const deployment = objects.find(
    (o) => o.kind === 'Deployment' && o.metadata.name === 'spark-driver-cleaner',
  );
  return deployment
    ? [[dir, objects, (deployment as Workload).spec.template.spec.containers[0] as Container] as const]
    : [];
});

describe('every overlay’s configuration', () => {
  it('covers the overlays (example, cluster-scope, namespace-discovery, redis-sentinel, zookeeper, remote-contexts)', () => {
    expect(overlays.map(([dir]) => dir.split('/').at(-1)).sort()).toEqual([
      'cluster-scope',
      'example',
      'namespace-discovery',
      'redis-sentinel',
      'remote-contexts',
      'zookeeper',
    ]);
  });

  it.each(overlays)(
    '%s loads as a replica loads it, with a Redis and one leadership backend, starting in dry run',
    (_dir, objects, container) => {
      const env = podEnv(objects, container);
      const config = loadConfig({ env, serviceAccountNamespace: () => 'spark-driver-cleaner' });
      expect(env.SDC_REDIS_URL !== undefined || env.SDC_REDIS_MODE !== undefined).toBe(true);
      expect(config.etcdEndpoints.length > 0 !== (config.zookeeper !== undefined)).toBe(true);
      expect(config.targets.length + config.discover.length).toBeGreaterThan(0);
      expect(config.dryRun).toBe(true);
    },
  );

  it('the base sets no Redis and no leadership backend: an overlay or a backend component does', () => {
    const objects = rendered.get('infra/k8s/base')?.objects ?? [];
    const container = findOne<Workload>(objects, 'Deployment', 'spark-driver-cleaner').spec.template.spec
      .containers[0] as Container;
    const env = configMapEnv(objects, container);
    for (const key of ['SDC_REDIS_URL', 'SDC_ETCD_ENDPOINTS', 'SDC_ZOOKEEPER', 'SDC_TARGETS'])
      expect(env[key], key).toBeUndefined();
  });
});

describe('the schema check can fail', () => {
  const deployment = findOne(overlay, 'Deployment', 'spark-driver-cleaner');

  it.each<[string, (d: Workload) => void, RegExp]>([
    [
      'a misspelt field (readinesProbe)',
      (d) => Object.assign(d.spec.template.spec.containers[0] as object, { readinesProbe: {} }),
      /readinesProbe: unknown field/,
    ],
    [
      'a string where an integer belongs (replicas)',
      (d) => Object.assign(d.spec, { replicas: 'three' }),
      /replicas must be integer/,
    ],
    [
      'a malformed quantity (memory: 1 GB)',
      (d) => Object.assign(d.spec.template.spec.containers[0]?.resources?.limits ?? {}, { memory: '1 GB' }),
      /memory must match format "quantity"/,
    ],
    [
      'a missing required field (container name)',
      (d) => delete (d.spec.template.spec.containers[0] as Partial<Container>).name,
      /containers\/0 must have required property name/,
    ],
  ])('%s is reported', async (_name, change, message) => {
    const copy = structuredClone(deployment) as Workload;
    change(copy);
    expect((await validateKubeObject(copy)).join('\n')).toMatch(message);
  });

  it('an unknown kind is an error, not a silent pass', async () => {
    await expect(
      validateKubeObject({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'x' } }),
    ).rejects.toThrow(UnknownKindError);
  });
});

describe('configuration', () => {
  const container = findOne<Workload>(overlay, 'Deployment', 'spark-driver-cleaner').spec.template.spec
    .containers[0] as Container;
  const config = configMapEnv(overlay, container);

  it('sets only variables the service reads (SDC_* from the config fields, OTEL_*)', () => {
    const known = new Set(FIELDS.flatMap((f) => [envName(f.key), ...(f.envAliases ?? [])]));
    const unknown = Object.keys(config).filter((k) => !known.has(k) && !k.startsWith('OTEL_'));
    expect(unknown).toEqual([]);
    expect(config.SDC_TARGETS).toBe('spark-team-a,spark-team-b');
  });

  it('points at the example Redis and at all three etcd members', () => {
    const redisService = findOne(overlay, 'Service', 'redis');
    expect(config.SDC_REDIS_URL).toBe(`redis://${redisService.metadata.name}:6379`);
    const etcd = findOne<Workload & { spec: { serviceName: string } }>(overlay, 'StatefulSet', 'etcd');
    const members = Array.from(
      { length: etcd.spec.replicas ?? 0 },
      (_, i) => `http://etcd-${i}.${etcd.spec.serviceName}:2379`,
    );
    expect(config.SDC_ETCD_ENDPOINTS?.split(',')).toEqual(members);
  });
});

describe('example backends', () => {
  it('Redis runs with maxmemory-policy noeviction (BullMQ requirement)', () => {
    const redis = findOne<Workload>(overlay, 'Deployment', 'redis').spec.template.spec
      .containers[0] as Container;
    const args = redis.args ?? [];
    expect(args[args.indexOf('--maxmemory-policy') + 1]).toBe('noeviction');
  });

  it('etcd is a 3-member StatefulSet whose initial cluster names every member', () => {
    const etcd = findOne<Workload & { spec: { serviceName: string; podManagementPolicy: string } }>(
      overlay,
      'StatefulSet',
      'etcd',
    );
    expect(etcd.spec.replicas).toBe(3);
    expect(etcd.spec.podManagementPolicy).toBe('Parallel');
    const args = (etcd.spec.template.spec.containers[0] as Container).args ?? [];
    const initial =
      args.find((a) => a.startsWith('--initial-cluster='))?.slice('--initial-cluster='.length) ?? '';
    expect(initial.split(',').map((m) => m.split('=')[0])).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
    const headless = findOne<KubeObject & { spec: { clusterIP: string } }>(
      overlay,
      'Service',
      etcd.spec.serviceName,
    );
    expect(headless.spec.clusterIP).toBe('None');
  });

  it('every workload meets the restricted Pod Security basics its namespace enforces', () => {
    const workloads = overlay.filter(
      (o) => o.kind === 'Deployment' || o.kind === 'StatefulSet',
    ) as Workload[];
    expect(workloads.map((w) => w.metadata.name).sort()).toEqual(['etcd', 'redis', 'spark-driver-cleaner']);
    for (const w of workloads) {
      const spec = w.spec.template.spec;
      expect(spec.securityContext?.runAsNonRoot, w.metadata.name).toBe(true);
      expect(spec.securityContext?.seccompProfile?.type, w.metadata.name).toBe('RuntimeDefault');
      for (const c of spec.containers) {
        expect(c.securityContext, `${w.metadata.name}/${c.name}`).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        expect(Object.keys(c.resources?.limits ?? {}).sort(), `${w.metadata.name}/${c.name}`).toEqual([
          'cpu',
          'memory',
        ]);
      }
    }
    const ns = findOne(overlay, 'Namespace', 'spark-driver-cleaner');
    expect((ns.metadata.labels as Record<string, string>)['pod-security.kubernetes.io/enforce']).toBe(
      'restricted',
    );
  });
});

describe('the Redis Sentinel overlay', () => {
  const objects = rendered.get('infra/k8s/overlays/redis-sentinel')?.objects as KubeObject[];
  const container = findOne<Workload>(objects, 'Deployment', 'spark-driver-cleaner').spec.template.spec
    .containers[0] as Container;

  it('its configuration loads as the replica loads it: Sentinel mode, three Sentinels, the master name', () => {
    // With the Deployment's dashboard credentials: without them its 0.0.0.0 port is refused.
    const config = loadConfig({ env: podEnv(objects, container) });
    expect(config.redis).toMatchObject({ mode: 'sentinel', masterName: 'mymaster', tls: false });
    expect(config.redis.mode === 'sentinel' ? config.redis.sentinels.map((s) => s.port) : []).toEqual([
      26379, 26379, 26379,
    ]);
  });

  it('lets the pods reach the Sentinels (egress to 26379), and runs no example Redis', () => {
    const policy = findOne<KubeObject & { spec: { egress: { ports?: { port: number }[] }[] } }>(
      objects,
      'NetworkPolicy',
      'spark-driver-cleaner-redis',
    );
    expect(policy.spec.egress.flatMap((r) => r.ports ?? []).map((p) => p.port)).toContain(26379);
    expect(objects.some((o) => o.metadata.name === 'redis')).toBe(false);
  });
});

describe('the ZooKeeper overlay (the example’s etcd dropped, as the README says)', () => {
  const objects = rendered.get('infra/k8s/overlays/zookeeper')?.objects as KubeObject[];
  const container = findOne<Workload>(objects, 'Deployment', 'spark-driver-cleaner').spec.template.spec
    .containers[0] as Container;

  it('elects on ZooKeeper, outside Kyuubi’s /kyuubi, with no etcd endpoint and no etcd workload', () => {
    const config = loadConfig({ env: podEnv(objects, container) });
    expect(config.zookeeper?.root).toBe('/spark-driver-cleaner');
    expect(config.etcdEndpoints).toEqual([]);
    expect(objects.some((o) => o.metadata.name === 'etcd')).toBe(false);
  });
});

describe('the README’s “drop the example etcd” for Kyuubi’s ZooKeeper, done to a copy of the example overlay', () => {
  it('renders with no etcd, loads with ZooKeeper as the leadership backend, and lets ZooKeeper’s port out', () => {
    const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
    const lines = readme.split('\n').filter((l) => /^\s+- SDC_ZOOKEEPER(_ROOT)?=/.test(l));
    expect(lines).toHaveLength(2);
    const copy = mkdtempSync(path.join(tmpdir(), 'sdc-readme-zk-'));
    try {
      cpSync(path.join(REPO_ROOT, 'infra/k8s'), path.join(copy, 'infra/k8s'), { recursive: true });
      const file = path.join(copy, 'infra/k8s/overlays/example/kustomization.yaml');
      const text = readFileSync(file, 'utf8');
      expect(text).toContain('  - ../../backends/etcd\n');
      writeFileSync(
        file,
        text
          .replace('  - ../../backends/etcd\n', '')
          .replace('      - SDC_DRY_RUN=true\n', `      - SDC_DRY_RUN=true\n${lines.join('\n')}\n`),
      );
      const objects = kustomize(path.join(copy, 'infra/k8s/overlays/example')).objects;
      const container = findOne<Workload>(objects, 'Deployment', 'spark-driver-cleaner').spec.template.spec
        .containers[0] as Container;
      const config = loadConfig({ env: podEnv(objects, container) });
      expect(config.zookeeper?.connect).toContain(':2181');
      expect(config.etcdEndpoints).toEqual([]);
      expect(objects.some((o) => o.metadata.name === 'etcd')).toBe(false);
      const allows2181 = objects
        .filter((o) => o.kind === 'NetworkPolicy')
        .flatMap(
          (p) =>
            (p as KubeObject & { spec: { egress?: { to?: unknown[]; ports?: { port: number }[] }[] } }).spec
              .egress ?? [],
        )
        .some((r) => r.to === undefined && r.ports?.some((p) => p.port === 2181));
      expect(allows2181).toBe(true);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});

describe('the remote-contexts overlay', () => {
  const objects = rendered.get('infra/k8s/overlays/remote-contexts')?.objects as KubeObject[];
  const deployment = findOne<Workload>(objects, 'Deployment', 'spark-driver-cleaner');
  const container = deployment.spec.template.spec.containers[0] as Container;

  it('mounts the kubeconfig Secret where SDC_KUBECONFIG points, and names contexts of it in every target', () => {
    const env = podEnv(objects, container);
    const file = env.SDC_KUBECONFIG ?? '';
    const mount = container.volumeMounts?.find((m) => path.posix.dirname(file) === m.mountPath);
    expect(mount, file).toBeDefined();
    const volume = (deployment.spec.template.spec.volumes ?? []).find((v) => v.name === mount?.name) as
      | { secret?: { secretName: string } }
      | undefined;
    expect(volume?.secret?.secretName).toBe('spark-driver-cleaner-kubeconfig');
    expect(path.posix.basename(file)).toBe('config');
    const config = loadConfig({ env });
    expect(config.targets.every((t) => t.context !== undefined)).toBe(true);
    // No Role in this cluster: the remote clusters grant the kubeconfig's user.
    expect(objects.some((o) => o.kind === 'Role' || o.kind === 'ClusterRole')).toBe(false);
  });
});

describe('a Redis with a private CA (the redis-ca component)', () => {
  const objects = rendered.get(WITH_REDIS_CA)?.objects as KubeObject[];
  const deployment = findOne<Workload>(objects, 'Deployment', 'spark-driver-cleaner');
  const container = deployment.spec.template.spec.containers[0] as Container;

  it('mounts the CA Secret’s ca.crt where NODE_EXTRA_CA_CERTS points, beside a rediss:// URL', () => {
    const env = podEnv(objects, container);
    const file = env.NODE_EXTRA_CA_CERTS ?? '';
    expect(path.posix.basename(file)).toBe('ca.crt');
    const mount = container.volumeMounts?.find((m) => m.mountPath === path.posix.dirname(file));
    const volume = (deployment.spec.template.spec.volumes ?? []).find((v) => v.name === mount?.name) as
      | { secret?: { secretName: string } }
      | undefined;
    expect(volume?.secret?.secretName).toBe('spark-driver-cleaner-redis-ca');
    expect(loadConfig({ env }).redis).toMatchObject({ mode: 'single' });
    expect(env.SDC_REDIS_URL).toMatch(/^rediss:\/\//);
  });
});
