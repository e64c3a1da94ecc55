/**
 * The least-privilege rule of the deployment, as a checkable function: in every target namespace the
 * cleaner's service account may get, list, watch and delete pods, and nothing else anywhere. With
 * `informerScope: cluster` (infra/k8s/overlays/cluster-scope) the list and watch move to one ClusterRole
 * (pods, every namespace: the informer watches /api/v1/pods) and the target namespaces' Roles keep get and
 * delete only: the cleaner still reads and deletes pods in its target namespaces alone.
 *
 * Why exactly these four verbs (see the handler's flow in DESIGN.md): `list` + `watch` feed the
 * informer, `get` re-reads a pod before its DELETE (live re-check), `delete` removes it with a UID
 * precondition. Leadership lives in etcd, so no `coordination.k8s.io` Lease rights are needed.
 */
import type { KubeObject } from './validate-object.ts';

/** The only rule a target namespace's Role may hold. */
export const POD_CLEANUP_RULE = {
  apiGroups: [''],
  resources: ['pods'],
  verbs: ['delete', 'get', 'list', 'watch'],
} as const;

/** With `informerScope: cluster`: the target namespaces' rule (get, delete)… */
export const POD_CLEANUP_RULE_CLUSTER_SCOPE = {
  apiGroups: [''],
  resources: ['pods'],
  verbs: ['delete', 'get'],
} as const;

/** …and the one ClusterRole's rule (list, watch on pods in every namespace). */
export const POD_INFORMER_CLUSTER_RULE = {
  apiGroups: [''],
  resources: ['pods'],
  verbs: ['list', 'watch'],
} as const;

/** Who must be granted the rule, and where. */
export interface RbacExpectation {
  /** `namespace` (default): no cluster-wide RBAC; `cluster`: exactly one ClusterRole (list, watch pods). */
  informerScope?: 'namespace' | 'cluster';
  /** The cleaner's ServiceAccount. */
  serviceAccount: { name: string; namespace: string };
  /** Target namespaces (from SDC_TARGETS); each needs exactly one Role and one RoleBinding. */
  targetNamespaces: readonly string[];
}

interface PolicyRule {
  apiGroups?: readonly string[];
  resources?: readonly string[];
  verbs?: readonly string[];
  resourceNames?: readonly string[];
  nonResourceURLs?: readonly string[];
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

const sorted = (values: readonly string[] | undefined): string[] => [...(values ?? [])].sort();

/** A rule in a canonical form (lists sorted, absent lists omitted) for exact comparison. */
function canonicalRule(rule: PolicyRule): Record<string, string[]> {
  const result: Record<string, string[]> = {};
  for (const key of ['apiGroups', 'resources', 'verbs', 'resourceNames', 'nonResourceURLs'] as const) {
    if (rule[key] !== undefined) result[key] = sorted(rule[key]);
  }
  return result;
}

/**
 * Checks the RBAC objects among `objects` against `expected`.
 *
 * @returns one line per violation (`Role spark-team-a/x: rules ...`); empty when the grant is exactly
 *   get/list/watch/delete on pods in each target namespace and nothing more.
 */
export function podRbacProblems(objects: readonly KubeObject[], expected: RbacExpectation): string[] {
  const problems: string[] = [];
  const clusterScope = expected.informerScope === 'cluster';
  const want = JSON.stringify(
    canonicalRule(clusterScope ? POD_CLEANUP_RULE_CLUSTER_SCOPE : POD_CLEANUP_RULE),
  );
  const rbac = objects.filter((o) => o.apiVersion.startsWith('rbac.authorization.k8s.io/'));
  const sa = expected.serviceAccount;
  const onlySa = (o: KubeObject) => {
    const subjects = (o.subjects as Subject[] | undefined) ?? [];
    return (
      subjects.length === 1 &&
      subjects[0]?.kind === 'ServiceAccount' &&
      subjects[0].name === sa.name &&
      subjects[0].namespace === sa.namespace
    );
  };

  if (clusterScope) problems.push(...clusterInformerProblems(rbac, onlySa));
  for (const o of rbac) {
    const where = `${o.kind} ${o.metadata.namespace ?? '(cluster)'}/${o.metadata.name}`;
    if (o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding') {
      if (!clusterScope) problems.push(`${where}: no cluster-wide RBAC allowed`);
      continue;
    }
    if (!expected.targetNamespaces.includes(o.metadata.namespace ?? '')) {
      problems.push(`${where}: not in a target namespace (${expected.targetNamespaces.join(', ')})`);
    }
    if (o.kind === 'Role') {
      const rules = (o.rules as PolicyRule[] | undefined) ?? [];
      const got = rules.map((r) => JSON.stringify(canonicalRule(r)));
      if (got.length !== 1 || got[0] !== want)
        problems.push(`${where}: rules ${JSON.stringify(rules)}, want [${want}]`);
    }
    if (o.kind === 'RoleBinding') {
      const roleRef = o.roleRef as { kind: string; name: string; apiGroup: string };
      const role = rbac.find(
        (r) =>
          r.kind === 'Role' &&
          r.metadata.name === roleRef.name &&
          r.metadata.namespace === o.metadata.namespace,
      );
      if (roleRef.kind !== 'Role' || role === undefined) {
        problems.push(`${where}: roleRef ${roleRef.kind}/${roleRef.name} is not a Role of this namespace`);
      }
      if (!onlySa(o))
        problems.push(
          `${where}: subjects ${JSON.stringify(o.subjects)}, want only ServiceAccount ${sa.namespace}/${sa.name}`,
        );
    }
  }

  for (const ns of expected.targetNamespaces) {
    for (const kind of ['Role', 'RoleBinding']) {
      const count = rbac.filter((o) => o.kind === kind && o.metadata.namespace === ns).length;
      if (count !== 1) problems.push(`namespace ${ns}: ${count} ${kind}s, want exactly 1`);
    }
  }
  return problems;
}

/**
 * `informerScope: cluster`: exactly one ClusterRole, holding exactly list and watch on pods, and exactly one
 * ClusterRoleBinding, binding it to the cleaner's ServiceAccount alone.
 */
function clusterInformerProblems(
  rbac: readonly KubeObject[],
  onlySa: (binding: KubeObject) => boolean,
): string[] {
  const problems: string[] = [];
  const roles = rbac.filter((o) => o.kind === 'ClusterRole');
  const bindings = rbac.filter((o) => o.kind === 'ClusterRoleBinding');
  if (roles.length !== 1 || bindings.length !== 1)
    return [`${roles.length} ClusterRoles and ${bindings.length} ClusterRoleBindings, want exactly 1 each`];
  const [role, binding] = [roles[0] as KubeObject, bindings[0] as KubeObject];
  const want = JSON.stringify(canonicalRule(POD_INFORMER_CLUSTER_RULE));
  const rules = (role.rules as PolicyRule[] | undefined) ?? [];
  const got = rules.map((r) => JSON.stringify(canonicalRule(r)));
  if (got.length !== 1 || got[0] !== want)
    problems.push(`ClusterRole ${role.metadata.name}: rules ${JSON.stringify(rules)}, want [${want}]`);
  const roleRef = binding.roleRef as { kind: string; name: string };
  if (roleRef.kind !== 'ClusterRole' || roleRef.name !== role.metadata.name)
    problems.push(`ClusterRoleBinding ${binding.metadata.name}: roleRef ${roleRef.kind}/${roleRef.name}`);
  if (!onlySa(binding))
    problems.push(
      `ClusterRoleBinding ${binding.metadata.name}: subjects ${JSON.stringify(binding.subjects)}, want only the ServiceAccount`,
    );
  return problems;
}

/** With discovered namespaces (infra/k8s/overlays/namespace-discovery): the one ClusterRole's rules. */
export const NAMESPACE_DISCOVERY_RULES = [
  { apiGroups: [''], resources: ['namespaces'], verbs: ['list', 'watch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['delete', 'get', 'list', 'watch'] },
] as const;

/**
 * Discovered namespaces: exactly one ClusterRole holding exactly {@link NAMESPACE_DISCOVERY_RULES} (the
 * namespaces to clean are not known in advance), one ClusterRoleBinding to the cleaner's ServiceAccount alone,
 * and no Role nor RoleBinding (a namespace labelled later must need none).
 * @returns one line per violation; empty when the grant is exactly that.
 */
export function discoveryRbacProblems(
  objects: readonly KubeObject[],
  serviceAccount: RbacExpectation['serviceAccount'],
): string[] {
  const rbac = objects.filter((o) => o.apiVersion.startsWith('rbac.authorization.k8s.io/'));
  const problems = rbac
    .filter((o) => o.kind === 'Role' || o.kind === 'RoleBinding')
    .map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}: no namespaced RBAC with discovery`);
  const roles = rbac.filter((o) => o.kind === 'ClusterRole');
  const bindings = rbac.filter((o) => o.kind === 'ClusterRoleBinding');
  if (roles.length !== 1 || bindings.length !== 1)
    return [
      ...problems,
      `${roles.length} ClusterRoles and ${bindings.length} ClusterRoleBindings, want exactly 1 each`,
    ];
  const [role, binding] = [roles[0] as KubeObject, bindings[0] as KubeObject];
  const want = NAMESPACE_DISCOVERY_RULES.map((r) => JSON.stringify(canonicalRule(r))).sort();
  const rules = (role.rules as PolicyRule[] | undefined) ?? [];
  const got = rules.map((r) => JSON.stringify(canonicalRule(r))).sort();
  if (JSON.stringify(got) !== JSON.stringify(want))
    problems.push(
      `ClusterRole ${role.metadata.name}: rules ${JSON.stringify(rules)}, want ${JSON.stringify(want)}`,
    );
  const roleRef = binding.roleRef as { kind: string; name: string };
  if (roleRef.kind !== 'ClusterRole' || roleRef.name !== role.metadata.name)
    problems.push(`ClusterRoleBinding ${binding.metadata.name}: roleRef ${roleRef.kind}/${roleRef.name}`);
  const subjects = (binding.subjects as Subject[] | undefined) ?? [];
  if (
    subjects.length !== 1 ||
    subjects[0]?.kind !== 'ServiceAccount' ||
    subjects[0].name !== serviceAccount.name ||
    subjects[0].namespace !== serviceAccount.namespace
  )
    problems.push(
      `ClusterRoleBinding ${binding.metadata.name}: subjects ${JSON.stringify(subjects)}, want only the ServiceAccount`,
    );
  return problems;
}
