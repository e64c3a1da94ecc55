/**
 * The cleaner's egress as the rendered NetworkPolicies allow it (the union of every policy selecting its
 * pods): DNS only to the cluster DNS pods; Redis and etcd only to the pods an overlay knows (the example's
 * backend components, the Sentinel overlay's Redis namespace), at any address only in the base, which cannot know;
 * the API server by port (its address is cluster-specific). Narrowing one backend never blocks another's port:
 * the example still reaches ZooKeeper, so dropping its etcd for Kyuubi's ZooKeeper works. And the
 * PodDisruptionBudget lets a drain evict an unready replica.
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
const zookeeper = renderKustomization('infra/k8s/overlays/zookeeper');
const base = renderKustomization('infra/k8s/base');
const redisPods = { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'redis' } } };

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

  it('still reaches ZooKeeper (2181): narrowing Redis and etcd leaves the other backends’ policies alone', () => {
    expect(peersOn(example, 2181)).toBe('any');
  });
});

describe('egress of the ZooKeeper overlay (the example without its etcd component)', () => {
  it('reaches ZooKeeper (2181), the example Redis only as its pods, and etcd not at all', () => {
    expect(peersOn(zookeeper, 2181)).toBe('any');
    expect(peersOn(zookeeper, 6379)).toEqual([redisPods]);
    expect(peersOn(zookeeper, 2379)).toEqual([]);
    expect(zookeeper.some((o) => o.kind === 'StatefulSet')).toBe(false);
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
  it('allows Redis (6379, TLS 6380, Sentinel 26379), etcd and ZooKeeper at any address, and DNS only to the cluster DNS', () => {
    for (const port of [6379, 6380, 26379, 2379, 2181]) expect(peersOn(base, port), String(port)).toBe('any');
    expect(peersOn(base, 53)).not.toBe('any');
  });

  it('gives each backend a policy of its own, so that a component or an overlay narrows one alone', () => {
    const names = base.filter((o) => o.kind === 'NetworkPolicy').map((o) => o.metadata.name);
    expect(names.sort()).toEqual([
      'spark-driver-cleaner',
      'spark-driver-cleaner-etcd',
      'spark-driver-cleaner-redis',
      'spark-driver-cleaner-zookeeper',
    ]);
  });
});

const withCleaner = KUSTOMIZATIONS.filter((d) =>
  renderKustomization(d).some((o) => o.kind === 'Deployment' && o.metadata.name === 'spark-driver-cleaner'),
);
describe.each(withCleaner)('%s PodDisruptionBudget', (dir) => {
  it('lets a drain evict a replica that is not ready (unhealthyPodEvictionPolicy: AlwaysAllow)', () => {
    const pdb = findOne<KubeObject & { spec: { unhealthyPodEvictionPolicy?: string } }>(
      renderKustomization(dir),
      'PodDisruptionBudget',
      'spark-driver-cleaner',
    );
    expect(pdb.spec.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
  });
});
