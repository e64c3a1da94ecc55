/**
 * Server-side printing for kubectl: when a request's Accept asks for `as=Table` (kubectl get does),
 * kube-apiserver answers a meta.k8s.io/v1 Table with the pod columns of pkg/printers/internalversion
 * (NAME, READY, STATUS, RESTARTS, AGE, and IP, NODE, NOMINATED NODE, READINESS GATES for -o wide).
 */
import type { IncomingMessage } from 'node:http';
import type { V1Pod } from '@kubernetes/client-node';

/** True when the client asked for a Table rendering (Accept contains `as=Table`). */
export function wantsTable(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.includes('as=Table');
}

const COLUMNS = [
  {
    name: 'Name',
    type: 'string',
    format: 'name',
    description: 'Name must be unique within a namespace.',
    priority: 0,
  },
  {
    name: 'Ready',
    type: 'string',
    format: '',
    description: 'The aggregate readiness state of this pod for accepting traffic.',
    priority: 0,
  },
  {
    name: 'Status',
    type: 'string',
    format: '',
    description: 'The aggregate status of the containers in this pod.',
    priority: 0,
  },
  {
    name: 'Restarts',
    type: 'string',
    format: '',
    description:
      'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.',
    priority: 0,
  },
  {
    name: 'Age',
    type: 'string',
    format: '',
    description:
      'CreationTimestamp is a timestamp representing the server time when this object was created.',
    priority: 0,
  },
  {
    name: 'IP',
    type: 'string',
    format: '',
    description:
      'IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.',
    priority: 1,
  },
  {
    name: 'Node',
    type: 'string',
    format: '',
    description: 'NodeName is a request to schedule this pod onto a specific node.',
    priority: 1,
  },
  {
    name: 'Nominated Node',
    type: 'string',
    format: '',
    description: 'nominatedNodeName is set only when this pod preempts other pods on the node.',
    priority: 1,
  },
  {
    name: 'Readiness Gates',
    type: 'string',
    format: '',
    description: 'If specified, all readiness gates will be evaluated for pod readiness.',
    priority: 1,
  },
];

/** kubectl's short duration: 45s, 12m, 5h, 3d (duration.HumanDuration, simplified). */
export function humanAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/** The STATUS column as printPod computes it: phase, then container reasons, then Terminating. */
function podStatus(pod: V1Pod): string {
  let reason = pod.status?.reason ?? pod.status?.phase ?? 'Unknown';
  for (const c of pod.status?.containerStatuses ?? []) {
    const waiting = c.state?.waiting?.reason;
    const terminated = c.state?.terminated;
    if (waiting) reason = waiting;
    else if (terminated?.reason) reason = terminated.reason;
    else if (terminated)
      reason = terminated.signal ? `Signal:${terminated.signal}` : `ExitCode:${terminated.exitCode}`;
  }
  if (pod.metadata?.deletionTimestamp) reason = pod.status?.reason === 'NodeLost' ? 'Unknown' : 'Terminating';
  return reason;
}

/** One Table row for a pod; `object` carries the whole pod (includeObject=Object). */
export function tableRow(pod: V1Pod, nowMs: number): unknown {
  const statuses = pod.status?.containerStatuses ?? [];
  const total = pod.spec?.containers?.length ?? 0;
  const ready = statuses.filter((c) => c.ready).length;
  const restarts = statuses.reduce((n, c) => n + (c.restartCount ?? 0), 0);
  const created = Date.parse(String(pod.metadata?.creationTimestamp ?? ''));
  return {
    cells: [
      pod.metadata?.name ?? '',
      `${ready}/${total}`,
      podStatus(pod),
      String(restarts),
      Number.isNaN(created) ? '<unknown>' : humanAge(nowMs - created),
      pod.status?.podIP ?? '<none>',
      pod.spec?.nodeName ?? '<none>',
      pod.status?.nominatedNodeName ?? '<none>',
      '<none>',
    ],
    object: { kind: 'Pod', apiVersion: 'v1', ...pod },
  };
}

/** A Table of pods; `resourceVersion` and `continueToken` go to the list metadata. */
export function podTable(
  pods: V1Pod[],
  nowMs: number,
  resourceVersion: number,
  continueToken?: string,
): unknown {
  const metadata: Record<string, string> = { resourceVersion: String(resourceVersion) };
  if (continueToken) metadata.continue = continueToken;
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata,
    columnDefinitions: COLUMNS,
    rows: pods.map((p) => tableRow(p, nowMs)),
  };
}
