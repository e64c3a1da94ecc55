/**
 * The canary pods of `check --canary`: driver pods the fleet must clean like any other — selected by the
 * configured `labelSelector`, a driver container named `spark-kubernetes-driver` (the one the cleaner reads
 * the end from), `restartPolicy: Never` — running an image that exits at once, and marked by
 * {@link CANARY_LABEL} (its value the run's id) so that the command finds and deletes its own, and only its
 * own. They meet the `restricted` Pod Security Standard, ask for little, and get no ServiceAccount token.
 * Pure: the objects are built here, sent elsewhere (src/check/canary.ts).
 */
import type { LabelSelector } from '../config/label-selector.ts';
import { DRIVER_CONTAINER } from '../kube/driver-pod.ts';

/** The label that marks a canary pod; its value is the run's id. */
export const CANARY_LABEL = 'spark-driver-cleaner/canary';

/** The default canary image: small, and its `true` exits 0 at once. */
export const DEFAULT_CANARY_IMAGE = 'docker.io/library/busybox:1.37';

/** The selector can select no pod we could create (it requires a label both present and absent). */
export class CanaryLabelsError extends Error {
  override name = 'CanaryLabelsError';
}

/**
 * Labels that `selector` selects, plus the driver labels Spark and Kyuubi set (`spark-role=driver`,
 * `spark-app-name`, `kyuubi-unique-tag`) where the selector allows them, and {@link CANARY_LABEL}. Pure.
 * @param tag a unique value (the run id and the pod's index): `kyuubi-unique-tag` and any `key` the selector
 *   only requires to exist
 * @throws CanaryLabelsError when no label set matches the selector.
 */
export function canaryLabels(selector: LabelSelector, runId: string, tag: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const r of selector.requirements) {
    if (r.op === 'in') labels[r.key] = r.values[0] ?? '';
    else if (r.op === 'exists') labels[r.key] = tag;
  }
  const extras: Record<string, string> = {
    'spark-role': 'driver',
    'spark-app-name': 'sdc-canary',
    'kyuubi-unique-tag': tag,
    [CANARY_LABEL]: runId,
  };
  for (const [k, v] of Object.entries(extras)) {
    if (k in labels) continue;
    const withIt = { ...labels, [k]: v };
    if (selector.matches(withIt) || k === CANARY_LABEL) Object.assign(labels, { [k]: v });
  }
  if (!selector.matches(labels))
    throw new CanaryLabelsError(
      `labelSelector "${selector.text}" selects no pod a canary can be (it needs a label both set and unset): fix labelSelector`,
    );
  return labels;
}

/** What a canary pod is made of. */
export interface CanaryPodSpec {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly image: string;
}

/** The canary pod object, as POSTed to `/api/v1/namespaces/{namespace}/pods`. Pure. */
export function canaryPod(spec: CanaryPodSpec): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: spec.name,
      namespace: spec.namespace,
      labels: spec.labels,
      annotations: {
        'spark-driver-cleaner/canary-purpose':
          'created by spark-driver-cleaner check --canary: the cleaner must delete it after its retention; deleted by the command at the end',
      },
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65534,
        runAsGroup: 65534,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: DRIVER_CONTAINER,
          image: spec.image,
          command: ['true'],
          resources: {
            requests: { cpu: '10m', memory: '16Mi' },
            limits: { cpu: '100m', memory: '16Mi' },
          },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  };
}
