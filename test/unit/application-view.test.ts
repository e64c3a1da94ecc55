import { describe, expect, it } from 'vitest';
import { type ApplicationView, applicationView } from '../../src/http/api-routes.ts';
import type { DriverPod } from '../../src/kube/driver-pod.ts';

const DELETED_AT = '2026-12-01T12:00:00Z';
const target = { cluster: 'prod-1', context: 'prod', namespace: 'spark' };

function pod(phase: string, o: { exitCode?: number; deleting?: boolean } = {}): DriverPod {
  return {
    metadata: {
      name: 'etl-driver',
      namespace: 'spark',
      uid: 'u1',
      labels: { 'spark-role': 'driver', 'spark-app-selector': 'spark-1', 'spark-app-name': 'etl' },
      ...(o.deleting ? { deletionTimestamp: DELETED_AT } : {}),
    },
    status: {
      phase,
      containerStatuses:
        o.exitCode === undefined
          ? []
          : [
              {
                name: 'spark-kubernetes-driver',
                state: { terminated: { exitCode: o.exitCode, finishedAt: '2026-12-01T11:00:00Z' } },
              },
            ],
    },
  };
}

describe('applicationView: a pod being deleted', () => {
  const cases: [string, DriverPod, Partial<ApplicationView>][] = [
    [
      'Running, not deleting → RUNNING',
      pod('Running'),
      { state: 'RUNNING', deleting: false, deletionTimestamp: null },
    ],
    [
      'Running with deletionTimestamp (grace period or finalizers) → KILLED, the deletion as error',
      pod('Running', { deleting: true }),
      {
        state: 'KILLED',
        error: `pod is being deleted (deletionTimestamp ${DELETED_AT})`,
        deleting: true,
        deletionTimestamp: DELETED_AT,
      },
    ],
    [
      'Pending with deletionTimestamp → KILLED',
      pod('Pending', { deleting: true }),
      { state: 'KILLED', deleting: true },
    ],
    [
      'driver finished (exit 0), then deleted → stays FINISHED, marked deleting',
      pod('Succeeded', { exitCode: 0, deleting: true }),
      { state: 'FINISHED', error: null, deleting: true, deletionTimestamp: DELETED_AT },
    ],
    [
      'driver failed (exit 1), then deleted → stays FAILED with its own error',
      pod('Failed', { exitCode: 1, deleting: true }),
      { state: 'FAILED', error: 'Error (exit code 1)', deleting: true },
    ],
  ];
  for (const [name, p, want] of cases) it(name, () => expect(applicationView(p, target)).toMatchObject(want));
});
