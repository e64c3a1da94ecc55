/**
 * Least privilege: the rendered example overlay grants the cleaner's ServiceAccount get, list,
 * watch and delete on pods in each target namespace, and nothing else; base and backends grant
 * nothing at all.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configMapEnv, findOne, podEnv, targetNamespaces, type Workload } from './find-objects.ts';
import {
  discoveryRbacProblems,
  type POD_CLEANUP_RULE,
  podRbacProblems,
  type RbacExpectation,
} from './rbac-rules.ts';
import { COMPONENTS, REPO_ROOT, renderKustomization } from './render.ts';
import type { KubeObject } from './validate-object.ts';

const overlay = renderKustomization('infra/k8s/overlays/example');
const deployment = findOne<Workload>(overlay, 'Deployment', 'spark-driver-cleaner');
const cleaner = deployment.spec.template.spec;
const config = configMapEnv(
  overlay,
  cleaner.containers[0] as Workload['spec']['template']['spec']['containers'][0],
);
const expected: RbacExpectation = {
  serviceAccount: {
    name: cleaner.serviceAccountName ?? 'default',
    namespace: deployment.metadata.namespace ?? '',
  },
  targetNamespaces: targetNamespaces(config.SDC_TARGETS ?? ''),
};

describe('RBAC of the example overlay', () => {
  it('targets two namespaces, and the ServiceAccount the pods run as exists', () => {
    expect(expected.targetNamespaces).toEqual(['spark-team-a', 'spark-team-b']);
    const sa = findOne(overlay, 'ServiceAccount', expected.serviceAccount.name);
    expect(sa.metadata.namespace).toBe(expected.serviceAccount.namespace);
    expect(expected.serviceAccount).toEqual({
      name: 'spark-driver-cleaner',
      namespace: 'spark-driver-cleaner',
    });
  });

  it('grants exactly get, list, watch, delete on pods in each target namespace, nothing else', () => {
    expect(podRbacProblems(overlay, expected)).toEqual([]);
  });

  it('each Role holds one rule: core-group pods with the four verbs (checked literally)', () => {
    const roles = overlay.filter((o) => o.kind === 'Role');
    expect(roles.map((r) => r.metadata.namespace).sort()).toEqual(['spark-team-a', 'spark-team-b']);
    for (const role of roles) {
      expect(role.rules).toEqual([
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'delete'] },
      ]);
    }
    expect(overlay.filter((o) => o.kind === 'RoleBinding')).toHaveLength(2);
    expect(overlay.some((o) => o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')).toBe(false);
  });

  it('the base grants nothing by itself, and neither do the components', () => {
    const objects = renderKustomization('infra/k8s/base');
    expect(objects.filter((o) => o.apiVersion.startsWith('rbac.authorization.k8s.io/'))).toEqual([]);
    for (const component of COMPONENTS)
      for (const file of readdirSync(path.join(REPO_ROOT, component)))
        expect(
          readFileSync(path.join(REPO_ROOT, component, file), 'utf8'),
          `${component}/${file}`,
        ).not.toContain('rbac.authorization.k8s.io');
  });
});

/** A copy of the overlay with `change` applied to its first Role or RoleBinding of team-a. */
function mutated(
  kind: 'Role' | 'RoleBinding',
  change: (o: KubeObject & Record<string, unknown>) => void,
): KubeObject[] {
  const copy = structuredClone(overlay);
  const target = copy.find((o) => o.kind === kind && o.metadata.namespace === 'spark-team-a');
  if (target === undefined) throw new Error(`no ${kind} in spark-team-a`);
  change(target as KubeObject & Record<string, unknown>);
  return copy;
}

const rule = (extra: Partial<Record<keyof typeof POD_CLEANUP_RULE | 'resourceNames', string[]>>) => ({
  apiGroups: [''],
  resources: ['pods'],
  verbs: ['get', 'list', 'watch', 'delete'],
  ...extra,
});

describe('the RBAC check rejects every widening or gap', () => {
  const cases: [string, () => KubeObject[]][] = [
    [
      'a fifth verb (patch)',
      () =>
        mutated('Role', (r) => (r.rules = [rule({ verbs: ['get', 'list', 'watch', 'delete', 'patch'] })])),
    ],
    [
      'a missing verb (no watch)',
      () => mutated('Role', (r) => (r.rules = [rule({ verbs: ['get', 'list', 'delete'] })])),
    ],
    ['a wildcard verb', () => mutated('Role', (r) => (r.rules = [rule({ verbs: ['*'] })]))],
    [
      'a subresource (pods/log)',
      () => mutated('Role', (r) => (r.rules = [rule({ resources: ['pods', 'pods/log'] })])),
    ],
    ['another API group', () => mutated('Role', (r) => (r.rules = [rule({ apiGroups: ['', 'apps'] })]))],
    [
      'a second rule (secrets)',
      () => mutated('Role', (r) => (r.rules = [rule({}), rule({ resources: ['secrets'] })])),
    ],
    [
      'resourceNames narrowing to one pod',
      () => mutated('Role', (r) => (r.rules = [rule({ resourceNames: ['x'] })])),
    ],
    [
      'a binding to the default ServiceAccount too',
      () =>
        mutated('RoleBinding', (b) => {
          (b.subjects as unknown[]).push({
            kind: 'ServiceAccount',
            name: 'default',
            namespace: 'spark-driver-cleaner',
          });
        }),
    ],
    [
      'a binding to a ClusterRole',
      () =>
        mutated(
          'RoleBinding',
          (b) => (b.roleRef = { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' }),
        ),
    ],
    [
      'a target namespace without its Role',
      () => overlay.filter((o) => !(o.kind === 'Role' && o.metadata.namespace === 'spark-team-b')),
    ],
    [
      'a Role in the cleaner’s own namespace',
      () => [
        ...overlay,
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'Role',
          metadata: { name: 'x', namespace: 'spark-driver-cleaner' },
          rules: [rule({})],
        },
      ],
    ],
    [
      'a ClusterRole',
      () => [
        ...overlay,
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRole',
          metadata: { name: 'x' },
          rules: [rule({})],
        },
      ],
    ],
  ];

  it.each(cases)('%s → reported', (_name, make) => {
    expect(podRbacProblems(make(), expected).length).toBeGreaterThan(0);
  });
});

describe('RBAC of the cluster-scope overlay (informerScope: cluster)', () => {
  const clusterOverlay = renderKustomization('infra/k8s/overlays/cluster-scope');
  const clusterExpected: RbacExpectation = { ...expected, informerScope: 'cluster' };

  it('sets SDC_INFORMER_SCOPE=cluster on the same targets', () => {
    const d = findOne<Workload>(clusterOverlay, 'Deployment', 'spark-driver-cleaner');
    const env = configMapEnv(
      clusterOverlay,
      d.spec.template.spec.containers[0] as Workload['spec']['template']['spec']['containers'][0],
    );
    expect(env.SDC_INFORMER_SCOPE).toBe('cluster');
    expect(targetNamespaces(env.SDC_TARGETS ?? '')).toEqual(expected.targetNamespaces);
  });

  it('grants list, watch on pods cluster-wide, and only get, delete in each target namespace', () => {
    expect(podRbacProblems(clusterOverlay, clusterExpected)).toEqual([]);
    expect(findOne(clusterOverlay, 'ClusterRole').rules).toEqual([
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
    ]);
    for (const role of clusterOverlay.filter((o) => o.kind === 'Role'))
      expect(role.rules).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'delete'] }]);
  });

  const widen = (change: (o: KubeObject & Record<string, unknown>) => void, kind = 'ClusterRole') => {
    const copy = structuredClone(clusterOverlay);
    change(copy.find((o) => o.kind === kind) as KubeObject & Record<string, unknown>);
    return copy;
  };
  it.each<[string, () => KubeObject[]]>([
    ['delete cluster-wide', () => widen((r) => (r.rules = [rule({ verbs: ['list', 'watch', 'delete'] })]))],
    ['secrets cluster-wide', () => widen((r) => (r.rules = [rule({ resources: ['pods', 'secrets'] })]))],
    [
      'the ClusterRole bound to every ServiceAccount',
      () =>
        widen(
          (b) => (b.subjects = [{ kind: 'Group', name: 'system:serviceaccounts' }]),
          'ClusterRoleBinding',
        ),
    ],
    ['no ClusterRole', () => clusterOverlay.filter((o) => o.kind !== 'ClusterRole')],
    ['the namespace overlay (no cluster grant) under cluster scope', () => overlay],
  ])('%s → reported', (_name, make) => {
    expect(podRbacProblems(make(), clusterExpected).length).toBeGreaterThan(0);
  });
});

describe('RBAC of the namespace-discovery overlay (SDC_TARGETS=* with SDC_NAMESPACE_SELECTOR)', () => {
  const discoveryOverlay = renderKustomization('infra/k8s/overlays/namespace-discovery');

  it('sets SDC_TARGETS=* and a namespace selector, and the configuration loads', async () => {
    const d = findOne<Workload>(discoveryOverlay, 'Deployment', 'spark-driver-cleaner');
    const env = configMapEnv(
      discoveryOverlay,
      d.spec.template.spec.containers[0] as Workload['spec']['template']['spec']['containers'][0],
    );
    expect(env.SDC_TARGETS).toBe('*');
    expect(env.SDC_NAMESPACE_SELECTOR).toBe('spark-driver-cleaner/clean=enabled');
    const { loadConfig } = await import('../../src/config/load.ts');
    const pod = podEnv(
      discoveryOverlay,
      d.spec.template.spec.containers[0] as Workload['spec']['template']['spec']['containers'][0],
    );
    const c = loadConfig({ env: { ...pod, SDC_KUBECONFIG: '/k' } });
    expect(c.discover).toEqual([{ context: undefined }]);
    expect(c.targets).toEqual([]);
  });

  it('grants list, watch on namespaces and get, list, watch, delete on pods cluster-wide; no Role', () => {
    expect(discoveryRbacProblems(discoveryOverlay, expected.serviceAccount)).toEqual([]);
    expect(discoveryOverlay.filter((o) => o.kind === 'Role' || o.kind === 'RoleBinding')).toEqual([]);
  });

  const widen = (change: (o: KubeObject & Record<string, unknown>) => void, kind = 'ClusterRole') => {
    const copy = structuredClone(discoveryOverlay);
    change(copy.find((o) => o.kind === kind) as KubeObject & Record<string, unknown>);
    return copy;
  };
  it.each<[string, () => KubeObject[]]>([
    [
      'namespaces get as well',
      () =>
        widen(
          (r) =>
            (r.rules = [
              rule({ resources: ['namespaces'], verbs: ['get', 'list', 'watch'] }),
              rule({ verbs: ['get', 'list', 'watch', 'delete'] }),
            ]),
        ),
    ],
    [
      'no namespaces rule',
      () => widen((r) => (r.rules = [rule({ verbs: ['get', 'list', 'watch', 'delete'] })])),
    ],
    [
      'the ClusterRole bound to every ServiceAccount',
      () =>
        widen(
          (b) => (b.subjects = [{ kind: 'Group', name: 'system:serviceaccounts' }]),
          'ClusterRoleBinding',
        ),
    ],
    ['the example overlay (Roles per namespace)', () => overlay],
  ])('%s → reported', (_name, make) => {
    expect(discoveryRbacProblems(make(), expected.serviceAccount).length).toBeGreaterThan(0);
  });
});
