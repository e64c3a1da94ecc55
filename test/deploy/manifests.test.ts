/**
 * Every kustomization renders with `kubectl kustomize`, and every rendered object is valid against
 * the Kubernetes API schemas (types, required fields, formats, and no unknown fields). Then the
 * properties of the example backends the cleaner depends on.
 */
import { describe, expect, it } from 'vitest';
import { envName, FIELDS } from '../../src/config/fields.ts';
import { loadConfig } from '../../src/config/load.ts';
import { type Container, configMapEnv, findOne, podEnv, type Workload } from './find-objects.ts';
import { KUSTOMIZATIONS, kustomize } from './render.ts';
import { type KubeObject, UnknownKindError, validateKubeObject } from './validate-object.ts';

const rendered = new Map(KUSTOMIZATIONS.map((dir) => [dir, kustomize(dir)] as const));
const overlay = rendered.get('infra/k8s/overlays/example')?.objects as KubeObject[];

describe.each(KUSTOMIZATIONS)('%s', (dir) => {
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

  it('lets the pods reach the Sentinels (egress to 26379)', () => {
    const policy = findOne<KubeObject & { spec: { egress: { ports?: { port: number }[] }[] } }>(
      objects,
      'NetworkPolicy',
      'spark-driver-cleaner-backends',
    );
    expect(policy.spec.egress.flatMap((r) => r.ports ?? []).map((p) => p.port)).toContain(26379);
  });
});
