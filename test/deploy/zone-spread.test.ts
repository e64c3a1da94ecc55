/**
 * Zone spread of the example overlay (infra/k8s/overlays/example/zone-spread.yaml): the replicas are spread
 * over zones, then nodes, as a preference that never leaves a pod Pending; the cluster-scope overlay, built
 * on it, keeps it. manifests.test.ts validates the rendered Deployment against the Kubernetes schema.
 */
import { describe, expect, it } from 'vitest';
import { findOne, type Workload } from './find-objects.ts';
import { renderKustomization } from './render.ts';

/** One `topologySpreadConstraints` entry (the fields checked here). */
interface SpreadConstraint {
  maxSkew: number;
  topologyKey: string;
  whenUnsatisfiable: string;
  labelSelector?: { matchLabels?: Record<string, string> };
}

function constraintsOf(dir: string): { constraints: SpreadConstraint[]; podLabels: Record<string, string> } {
  const deployment = findOne<Workload>(renderKustomization(dir), 'Deployment', 'spark-driver-cleaner');
  const spec = deployment.spec.template.spec as { topologySpreadConstraints?: SpreadConstraint[] };
  return {
    constraints: spec.topologySpreadConstraints ?? [],
    podLabels: deployment.spec.template.metadata.labels,
  };
}

describe.each(['infra/k8s/overlays/example', 'infra/k8s/overlays/cluster-scope'])('%s', (dir) => {
  const { constraints, podLabels } = constraintsOf(dir);

  it.each(['topology.kubernetes.io/zone', 'kubernetes.io/hostname'])(
    'spreads the replicas over %s (maxSkew 1, ScheduleAnyway) counting only its own pods',
    (key) => {
      const c = constraints.find((x) => x.topologyKey === key);
      expect(c, `a constraint on ${key}`).toBeDefined();
      expect(c?.maxSkew).toBe(1);
      // DoNotSchedule would leave a replica Pending in a single-zone cluster or a full zone.
      expect(c?.whenUnsatisfiable).toBe('ScheduleAnyway');
      const selector = c?.labelSelector?.matchLabels ?? {};
      expect(Object.keys(selector).length).toBeGreaterThan(0);
      for (const [k, v] of Object.entries(selector)) expect(podLabels[k], k).toBe(v);
    },
  );
});
