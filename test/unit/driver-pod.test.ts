import { describe, expect, it } from 'vitest';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { type AppStateSettings, KYUUBI_STATE_DEFAULTS, podState } from '../../src/kube/application-state.ts';
import { DRIVER_CONTAINER, trimPod } from '../../src/kube/driver-pod.ts';
import { decide, malformedReason } from '../../src/rules/decision.ts';
import { allFixturePods, expected } from '../helpers/fixtures.ts';

const selectors = [parseLabelSelector('spark-role=driver,kyuubi-unique-tag'), parseLabelSelector('')];

describe('trimPod keeps every decision of the full pod, under both state sources', () => {
  const pods = allFixturePods();
  it('has the fixtures of both files', () => expect(pods.length).toBeGreaterThanOrEqual(26));
  for (const pod of pods) {
    it(`${pod.metadata?.name} (${expected(pod, 'case')})`, () => {
      const trimmed = trimPod(structuredClone(pod));
      const container = expected(pod, 'state-container') ?? DRIVER_CONTAINER;
      const settings: AppStateSettings[] = [
        { source: 'POD', container },
        { source: 'CONTAINER', container },
        { source: 'CONTAINER', container: DRIVER_CONTAINER },
      ];
      for (const appState of settings) expect(podState(trimmed, appState)).toEqual(podState(pod, appState));
      expect(malformedReason(trimmed)).toBe(malformedReason(pod));
      for (const selector of selectors)
        for (const policy of ['ALL', 'COMPLETED'] as const)
          for (const appState of settings)
            expect(decide(trimmed, { selector, policy, appState })).toEqual(
              decide(pod, { selector, policy, appState }),
            );
      // What the API and the logs read survives too.
      expect(trimmed.metadata?.labels).toEqual(pod.metadata?.labels);
      for (const k of [
        'name',
        'namespace',
        'uid',
        'resourceVersion',
        'creationTimestamp',
        'deletionTimestamp',
      ])
        expect(trimmed.metadata?.[k as 'name']).toBe(pod.metadata?.[k as 'name']);
      // Nothing else is kept: no spec, no managedFields, no annotations, no image, no container ids.
      const json = JSON.stringify(trimmed);
      expect(json).not.toMatch(/"spec"|managedFields|annotations|imageID|containerID|lastState|startedAt/);
      expect(json.length).toBeLessThan(JSON.stringify(pod).length / 2);
    });
  }
});

describe('trimPod', () => {
  it('keeps every container status, each trimmed to its name and state (the state container is a setting)', () => {
    const full = JSON.parse(
      JSON.stringify(
        sparkDriverPod({ namespace: 'ns', phase: 'Failed', failureReason: 'OOMKilled', nowMs: 1e12 }),
      ),
    );
    full.status.containerStatuses.push(
      { name: 'istio-proxy', image: 'proxyv2', state: { running: { startedAt: '2001-09-09T01:46:40Z' } } },
      { name: 'log-shipper', state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off' } } },
      { state: { running: {} } },
    );
    const t = trimPod(full);
    expect(t.status?.containerStatuses).toEqual([
      {
        name: DRIVER_CONTAINER,
        state: { terminated: { exitCode: 137, reason: 'OOMKilled', finishedAt: '2001-09-09T01:46:40Z' } },
      },
      { name: 'istio-proxy', state: { running: {} } },
      { name: 'log-shipper', state: { waiting: { reason: 'CrashLoopBackOff' } } },
      null,
    ]);
    expect(Object.keys(t)).toEqual(['metadata', 'status']);
  });
  it('keeps a finishedAt that is not a timestamp, for the state mapping to name it', () => {
    const t = trimPod({
      status: {
        phase: 'Succeeded',
        containerStatuses: [{ name: 'd', state: { terminated: { exitCode: 0, finishedAt: 17 } } }],
      },
    });
    expect(t.status?.containerStatuses?.[0]?.state?.terminated?.finishedAt).toBe('17');
    expect(podState(t, { source: 'CONTAINER', container: 'd' }).unreadable).toEqual([
      'finishedAt of container d "17" is not a timestamp: the retention counts from when the pod was first seen terminal',
    ]);
  });
  it('accepts Date timestamps (client-node objects) and never throws on junk', () => {
    const at = new Date('2024-05-01T10:00:00Z');
    expect(trimPod({ metadata: { name: 'p', deletionTimestamp: at } }).metadata?.deletionTimestamp).toBe(
      '2024-05-01T10:00:00.000Z',
    );
    for (const junk of [null, undefined, 42, 'x', [], { metadata: 'x', status: [] }])
      expect(() => trimPod(junk)).not.toThrow();
    // A malformed containerStatuses is passed through for podState to treat as "no driver status".
    const odd = trimPod({ metadata: { name: 'p' }, status: { phase: 'Running', containerStatuses: 'oops' } });
    expect(odd.status?.containerStatuses).toBe('oops');
    expect(podState(odd, KYUUBI_STATE_DEFAULTS).state).toBe('RUNNING');
  });
  it('keeps only the condition that changed last (a finish time when the driver container has none)', () => {
    const t = trimPod({
      metadata: { name: 'p' },
      status: {
        phase: 'Failed',
        conditions: [
          { type: 'PodScheduled', status: 'True', lastTransitionTime: '2026-12-01T09:00:00Z', reason: 'x' },
          { type: 'Ready', status: 'False', lastTransitionTime: new Date('2026-12-01T09:30:00Z') },
          { type: 'DisruptionTarget', status: 'True', lastTransitionTime: 'not a time' },
          null,
        ],
      },
    });
    expect(t.status?.conditions).toEqual([
      { type: 'Ready', status: 'False', lastTransitionTime: '2026-12-01T09:30:00.000Z' },
    ]);
    expect(trimPod({ status: { phase: 'Failed', conditions: 'oops' } }).status).not.toHaveProperty(
      'conditions',
    );
  });
  it('shortens a long status message', () => {
    const t = trimPod({ status: { phase: 'Failed', message: 'x'.repeat(5000) } });
    expect(t.status?.message?.length).toBeLessThanOrEqual(513);
  });
});
