/**
 * Lookups over rendered objects, shared by the deployment tests.
 */
import type { KubeObject } from './validate-object.ts';

/** Thrown when a lookup does not find exactly the one object it expects. */
export class ObjectNotFoundError extends Error {
  override name = 'ObjectNotFoundError';
}

/**
 * The single object of `kind` (and `name`, when given).
 *
 * @throws {ObjectNotFoundError} when there are none or several.
 */
export function findOne<T extends KubeObject = KubeObject>(
  objects: readonly KubeObject[],
  kind: string,
  name?: string,
): T {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found.length !== 1)
    throw new ObjectNotFoundError(`${found.length} ${kind}${name ? `/${name}` : ''}, want 1`);
  return found[0] as T;
}

/** Minimal shapes of the fields the tests read (the schema check covers the rest). */
export interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } };
  }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string; optional?: boolean } }[];
  ports?: { name?: string; containerPort: number }[];
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    readOnlyRootFilesystem?: boolean;
    runAsNonRoot?: boolean;
    runAsUser?: number;
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
  };
  volumeMounts?: { name: string; mountPath: string }[];
}

export interface PodSpec {
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
  affinity?: { podAntiAffinity?: Record<string, unknown[]> };
  containers: Container[];
  volumes?: { name: string; emptyDir?: object }[];
}

export interface Workload extends KubeObject {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

/**
 * The environment a container gets from its `envFrom` ConfigMaps, later sources winning as in
 * Kubernetes. Secrets are not rendered, so they contribute nothing.
 *
 * @throws {ObjectNotFoundError} when a referenced ConfigMap is not among `objects`.
 */
export function configMapEnv(objects: readonly KubeObject[], container: Container): Record<string, string> {
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    if (source.configMapRef === undefined) continue;
    const cm = findOne(objects, 'ConfigMap', source.configMapRef.name) as KubeObject & {
      data?: Record<string, string>;
    };
    Object.assign(env, cm.data);
  }
  return env;
}

/**
 * The environment the configuration loader sees in the pod: {@link configMapEnv}, then the container's own `env`
 * (a literal value as written; a `secretKeyRef` as a stand-in `secret:<name>/<key>`, since Secrets are not
 * rendered and the pod does not start without them; a `fieldRef` left out).
 *
 * @throws {ObjectNotFoundError} when a referenced ConfigMap is not among `objects`.
 */
export function podEnv(objects: readonly KubeObject[], container: Container): Record<string, string> {
  const env = configMapEnv(objects, container);
  for (const e of container.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    if (e.value !== undefined) env[e.name] = e.value;
    else if (ref) env[e.name] = `secret:${ref.name}/${ref.key}`;
  }
  return env;
}

/** `ctx:ns,ns2` → `['ns', 'ns2']`: the namespaces of SDC_TARGETS (a bare entry is a namespace). */
export function targetNamespaces(targets: string): string[] {
  return targets
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '')
    .map((t) => t.slice(t.lastIndexOf(':') + 1));
}
