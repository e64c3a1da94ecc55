/**
 * The cleaner's Deployment as rendered by the example overlay: the fields a highly available,
 * least-privilege replica set needs, and their consistency with the ConfigMap, Service, PDB and
 * NetworkPolicy around it.
 */
import { describe, expect, it } from 'vitest';
import { packageVersion } from '../../scripts/release/versions.ts';
import { type Container, configMapEnv, findOne, type Workload } from './find-objects.ts';
import { REPO_ROOT, renderKustomization } from './render.ts';
import type { KubeObject } from './validate-object.ts';

const overlay = renderKustomization('infra/k8s/overlays/example');
const deployment = findOne<Workload>(overlay, 'Deployment', 'spark-driver-cleaner');
const pod = deployment.spec.template.spec;
const container = findContainer(pod.containers, 'spark-driver-cleaner');
const config = configMapEnv(overlay, container);
const podLabels = deployment.spec.template.metadata.labels;

function findContainer(containers: Container[], name: string): Container {
  const found = containers.find((c) => c.name === name);
  if (found === undefined) throw new Error(`no container ${name}`);
  return found;
}

/** True when every key/value of `selector` is among `labels` (a matchLabels selector). */
function selects(selector: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  return (
    selector !== undefined &&
    Object.keys(selector).length > 0 &&
    Object.entries(selector).every(([k, v]) => labels[k] === v)
  );
}

describe('spark-driver-cleaner Deployment', () => {
  it('runs 3 replicas whose selector matches the pod template', () => {
    expect(deployment.spec.replicas).toBe(3);
    expect(selects(deployment.spec.selector.matchLabels, podLabels)).toBe(true);
  });

  it('spreads the replicas over nodes with pod anti-affinity on its own pods', () => {
    const anti = pod.affinity?.podAntiAffinity ?? {};
    const terms = [
      ...((anti.requiredDuringSchedulingIgnoredDuringExecution ?? []) as {
        topologyKey: string;
        labelSelector: { matchLabels: Record<string, string> };
      }[]),
      ...(
        (anti.preferredDuringSchedulingIgnoredDuringExecution ?? []) as {
          podAffinityTerm: { topologyKey: string; labelSelector: { matchLabels: Record<string, string> } };
        }[]
      ).map((p) => p.podAffinityTerm),
    ];
    expect(
      terms.some(
        (t) => t.topologyKey === 'kubernetes.io/hostname' && selects(t.labelSelector.matchLabels, podLabels),
      ),
    ).toBe(true);
  });

  it('probes readiness on /readyz and liveness on /healthz, on the port the server listens on', () => {
    expect(container.readinessProbe?.httpGet?.path).toBe('/readyz');
    expect(container.livenessProbe?.httpGet?.path).toBe('/healthz');
    const named = container.ports?.find((p) => p.name === container.readinessProbe?.httpGet?.port);
    expect(named?.containerPort).toBe(Number(config.SDC_HTTP_PORT));
    expect(container.livenessProbe?.httpGet?.port).toBe(container.readinessProbe?.httpGet?.port);
    // Probes come from the kubelet on the pod IP: loopback-only would fail them all.
    expect(config.SDC_HTTP_HOST).toBe('0.0.0.0');
  });

  it('sets CPU and memory requests and limits', () => {
    for (const kind of ['requests', 'limits'] as const) {
      expect(Object.keys(container.resources?.[kind] ?? {}).sort(), kind).toEqual(['cpu', 'memory']);
    }
  });

  it('gives terminating pods longer than the election TTL', () => {
    const ttlSeconds = Number(config.SDC_ELECTION_TTL_SECONDS ?? '10');
    expect(Number.isInteger(ttlSeconds)).toBe(true);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(ttlSeconds);
  });

  it('takes its replica identity from the pod name through the downward API', () => {
    const replicaId = container.env?.find((e) => e.name === 'SDC_REPLICA_ID');
    expect(replicaId?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    expect(config.SDC_REPLICA_ID).toBeUndefined();
  });

  it('runs non-root with a read-only root filesystem, no capabilities, and /tmp as the only writable path', () => {
    expect(pod.securityContext?.runAsNonRoot).toBe(true);
    expect(pod.securityContext?.runAsUser).toBeGreaterThan(0);
    expect(pod.securityContext?.seccompProfile?.type).toBe('RuntimeDefault');
    expect(container.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    expect(pod.volumes?.find((v) => v.name === 'tmp')?.emptyDir).toBeDefined();
  });

  it('runs as the ServiceAccount of its namespace and uses the overlay’s image', () => {
    const sa = findOne(overlay, 'ServiceAccount', pod.serviceAccountName);
    expect(sa.metadata.namespace).toBe(deployment.metadata.namespace);
    expect(container.image).toBe(`registry.example.com/spark-driver-cleaner:${packageVersion(REPO_ROOT)}`);
  });

  it('keeps secrets out of the ConfigMap and reads them from a required Secret, the dashboard credentials required', () => {
    expect(config.SDC_DASHBOARD_PASSWORD).toBeUndefined();
    expect(container.envFrom?.find((s) => s.secretRef)?.secretRef).toEqual({
      name: 'spark-driver-cleaner-secrets',
    });
    // Without them the HTTP port (dashboard, /api/) would answer any pod the NetworkPolicy admits.
    for (const key of ['SDC_DASHBOARD_USER', 'SDC_DASHBOARD_PASSWORD'])
      expect(container.env?.find((e) => e.name === key)?.valueFrom).toEqual({
        secretKeyRef: { name: 'spark-driver-cleaner-secrets', key },
      });
  });
});

describe('the example overlay as the README tells to start', () => {
  it('starts in dry run (SDC_DRY_RUN=true over the base’s false): it deletes nothing until the cut-over', () => {
    expect(config.SDC_DRY_RUN).toBe('true');
    const base = renderKustomization('infra/k8s/base');
    const baseDeployment = findOne<Workload>(base, 'Deployment', 'spark-driver-cleaner');
    const baseContainer = findContainer(baseDeployment.spec.template.spec.containers, 'spark-driver-cleaner');
    expect(configMapEnv(base, baseContainer).SDC_DRY_RUN).toBe('false');
  });
});

describe('objects around the Deployment', () => {
  const service = findOne<
    KubeObject & { spec: { selector: Record<string, string>; ports: { port: number; targetPort: string }[] } }
  >(overlay, 'Service', 'spark-driver-cleaner');
  const pdb = findOne<
    KubeObject & { spec: { maxUnavailable?: number; selector: { matchLabels: Record<string, string> } } }
  >(overlay, 'PodDisruptionBudget', 'spark-driver-cleaner');
  const policy = findOne<
    KubeObject & {
      spec: {
        podSelector: { matchLabels: Record<string, string> };
        ingress: { ports: { port: number }[] }[];
      };
    }
  >(overlay, 'NetworkPolicy', 'spark-driver-cleaner');

  it('the Service reaches the pods on the named HTTP port (metrics and dashboard)', () => {
    expect(selects(service.spec.selector, podLabels)).toBe(true);
    expect(service.spec.ports.map((p) => p.targetPort)).toEqual(['http']);
  });

  it('the PodDisruptionBudget covers the pods and lets one go at a time', () => {
    expect(selects(pdb.spec.selector.matchLabels, podLabels)).toBe(true);
    expect(pdb.spec.maxUnavailable).toBe(1);
  });

  it('the NetworkPolicy covers the pods and admits the HTTP port', () => {
    expect(selects(policy.spec.podSelector.matchLabels, podLabels)).toBe(true);
    expect(policy.spec.ingress.flatMap((r) => r.ports.map((p) => p.port))).toEqual([
      Number(config.SDC_HTTP_PORT),
    ]);
  });

  it('everything but the Namespace itself is namespaced explicitly (nothing lands in `default`)', () => {
    const loose = overlay
      .filter((o) => o.kind !== 'Namespace' && !o.metadata.namespace)
      .map((o) => `${o.kind}/${o.metadata.name}`);
    expect(loose).toEqual([]);
  });
});
