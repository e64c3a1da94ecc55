/**
 * The informer side's once-per-pod lines (src/cleaner/pod-notes.ts): fields Kyuubi's state rule cannot read
 * are warned about once per pod, not per event; a driver kept by the POD state source is noted once at debug.
 */
import { describe, expect, it } from 'vitest';
import { createPodNotes } from '../../src/cleaner/pod-notes.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import { trimPod } from '../../src/kube/driver-pod.ts';
import { decide } from '../../src/rules/decision.ts';
import { expected, fixturePods, kyuubiStatePods } from '../helpers/fixtures.ts';
import { memoryLogger } from '../helpers/log.ts';

const rules = {
  selector: parseLabelSelector('spark-role=driver,kyuubi-unique-tag'),
  policy: 'ALL' as const,
  appState: KYUUBI_STATE_DEFAULTS,
};

describe('pod notes', () => {
  it('one warn line per pod with unreadable fields, whatever the number of events; again after the pod went', () => {
    const mem = memoryLogger();
    const notes = createPodNotes(mem.log, rules);
    const hostile = kyuubiStatePods()
      .filter((p) => expected(p, 'unreadable') === 'true')
      .map((p) => trimPod(p));
    expect(hostile).toHaveLength(2);
    for (let i = 0; i < 5; i++)
      for (const pod of hostile) notes.observed(pod, decide(pod, rules), i === 0 ? 'added' : 'updated');
    const warned = mem.lines.filter((l) => l.level === 'warn');
    expect(warned.map((l) => l.uid)).toEqual(hostile.map((p) => p.metadata?.uid));
    expect(warned[0]).toMatchObject({
      event: 'added',
      msg: 'pod fields the cleaner cannot read: judged as Kyuubi would, see unreadable',
    });
    // A pod that went and (as far as a UID can) came back is warned about again.
    notes.forget(hostile[0]?.metadata?.uid ?? '');
    notes.observed(hostile[0] as never, decide(hostile[0] as never, rules), 'added');
    expect(mem.lines.filter((l) => l.level === 'warn')).toHaveLength(3);
  });

  it('well-formed pods write nothing at warn; the sidecar driver kept by POD is noted once at debug', () => {
    const mem = memoryLogger();
    const notes = createPodNotes(mem.log, rules);
    const pods = fixturePods()
      .filter((p) => !expected(p, 'case')?.startsWith('malformed'))
      .map((p) => trimPod(p));
    for (let i = 0; i < 3; i++) for (const pod of pods) notes.observed(pod, decide(pod, rules), 'updated');
    expect(mem.lines.filter((l) => l.level === 'warn')).toEqual([]);
    const kept = mem.lines.filter((l) =>
      String(l.msg).startsWith('driver container ended but the pod runs on'),
    );
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatchObject({
      level: 'debug',
      container: 'spark-kubernetes-driver',
      exitCode: 0,
      phase: 'Running',
      running: ['istio-proxy'],
    });
  });
});
