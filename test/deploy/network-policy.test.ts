/**
 * The cleaner's egress as the rendered NetworkPolicies allow it (the union of every policy selecting its
 * pods): DNS only to the cluster DNS pods; Redis and etcd only to the pods an overlay knows (the example's
 * backends, the Sentinel overlay's Redis namespace), at any address only in the base, which cannot know;
 * the API server by port (its address is cluster-specific). And the PodDisruptionBudget lets a drain evict
 * an unready replica.
 */
import { describe, expect, it } from 'vitest';
import { findOne, type Workload } from './find-objects.ts';
import { KUSTOMIZATIONS, renderKustomization } from './render.ts';
import type { KubeObject } from './validate-object.ts';

interface Selector {
  matchLabels?: Record<string, string>;
}
interface Peer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
  ipBlock?: { cidr: string };
}
interface EgressRule {
  to?: Peer[];
  ports?: { port: number; protocol?: string }[];
}
interface NetworkPolicy extends KubeObject {
  spec: { podSelector: Selector; policyTypes: string[]; egress?: EgressRule[] };
}

const CLEANER = { 'app.kubernetes.io/name': 'spark-driver-cleaner', 'app.kubernetes.io/part-of': 'x' };

/** True when every matchLabels entry of `selector` is among `labels` (an empty selector selects all). */
function selects(selector: Selector | undefined, labels: Record<string, string>): boolean {
  return Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}

/**
 * The peers the cleaner pods may reach on `port` (TCP), over every egress policy selecting them:
 * `'any'` when some rule allows the port without a `to` (any address).
 */
function peersOn(objects: KubeObject[], port: number): 'any' | Peer[] {
  const rules = objects
    .filter((o): o is NetworkPolicy => o.kind === 'NetworkPolicy')
    .filter((p) => p.spec.policyTypes.includes('Egress') && selects(p.spec.podSelector, CLEANER))
    .flatMap((p) => p.spec.egress ?? [])
    .filter((r) => r.ports === undefined || r.ports.some((p) => p.port === port && p.protocol !== 'UDP'));
  if (rules.some((r) => r.to === undefined || r.to.length === 0)) return 'any';
  return rules.flatMap((r) => r.to ?? []);
}

/** The pod template labels of workload `name` (Deployment or StatefulSet). */
function podLabels(objects: KubeObject[], kind: string, name: string): Record<string, string> {
  return findOne<Workload>(objects, kind, name).spec.template.metadata.labels;
}

const example = renderKustomization('infra/k8s/overlays/example');
const sentinel = renderKustomization('infra/k8s/overlays/redis-sentinel');
const base = renderKustomization('infra/k8s/base');

describe('egress of the example overlay (its own Redis and etcd)', () => {
  it('reaches Redis only as the pods of the backends Redis (in its namespace)', () => {
    const peers = peersOn(example, 6379);
    expect(peers).not.toBe('any');
    expect(peers).toEqual([{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'redis' } } }]);
    expect(selects((peers as Peer[])[0]?.podSelector, podLabels(example, 'Deployment', 'redis'))).toBe(true);
  });

  it('reaches etcd only as the pods of the backends etcd StatefulSet (in its namespace)', () => {
    const peers = peersOn(example, 2379);
    expect(peers).toEqual([{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'etcd' } } }]);
    expect(selects((peers as Peer[])[0]?.podSelector, podLabels(example, 'StatefulSet', 'etcd'))).toBe(true);
  });

  it('resolves names only with the cluster DNS pods in kube-system, over UDP and TCP', () => {
    const dns = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } };
    expect(peersOn(example, 53)).toEqual([
      { ...dns, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } },
    ]);
    const policy = findOne<NetworkPolicy>(example, 'NetworkPolicy', 'spark-driver-cleaner');
    const dnsRule = policy.spec.egress?.find((r) => r.ports?.some((p) => p.port === 53));
    expect(dnsRule?.ports?.map((p) => p.protocol).sort()).toEqual(['TCP', 'UDP']);
  });

  it('keeps the API server reachable on 443 and 6443 (its address is cluster-specific)', () => {
    expect(peersOn(example, 443)).toBe('any');
    expect(peersOn(example, 6443)).toBe('any');
  });
});

describe('egress of the Redis Sentinel overlay', () => {
  const redisNamespace = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'redis' } },
    podSelector: { matchLabels: { 'app.kubernetes.io/instance': 'redis' } },
  };

  it('reaches Redis and the Sentinels only in the Redis release of namespace redis', () => {
    expect(peersOn(sentinel, 6379)).toEqual([redisNamespace]);
    expect(peersOn(sentinel, 26379)).toEqual([redisNamespace]);
  });

  it('still reaches the example etcd pods only', () => {
    expect(peersOn(sentinel, 2379)).toEqual([
      { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'etcd' } } },
    ]);
  });
});

describe('egress of the base (it cannot know where Redis, etcd or ZooKeeper run)', () => {
  it('allows the Redis, etcd and ZooKeeper client ports at any address, and DNS only to the cluster DNS', () => {
    expect(peersOn(base, 6379)).toBe('any');
    expect(peersOn(base, 2379)).toBe('any');
    expect(peersOn(base, 2181)).toBe('any');
    expect(peersOn(base, 53)).not.toBe('any');
  });
});

describe.each(KUSTOMIZATIONS.filter((d) => d !== 'infra/k8s/backends'))('%s PodDisruptionBudget', (dir) => {
  it('lets a drain evict a replica that is not ready (unhealthyPodEvictionPolicy: AlwaysAllow)', () => {
    const pdb = findOne<KubeObject & { spec: { unhealthyPodEvictionPolicy?: string } }>(
      renderKustomization(dir),
      'PodDisruptionBudget',
      'spark-driver-cleaner',
    );
    expect(pdb.spec.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
  });
});
