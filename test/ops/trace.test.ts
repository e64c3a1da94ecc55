/**
 * One trace from the informer event and enqueue on replica A to the GET and DELETE on leader B: two
 * in-process replicas with etcd leadership, each exporting to its own in-memory span exporter, joined
 * only through the `traceparent` stored in the BullMQ job.
 */
import { SpanKind } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { createTerminatedDriver, type OpsEnv, startOpsEnv } from './ops-env.ts';

let env: OpsEnv;
beforeAll(async () => {
  env = await startOpsEnv(['alpha'], { etcd: true });
}, 60_000);
afterAll(async () => {
  await env?.stop();
});

const ns = 'traced';
const settings = {
  SDC_TARGETS: `alpha:${ns}`,
  SDC_QUEUE_PREFIX: 'trace',
  SDC_RECHECK: 'live', // the trace below includes the GET of `live`
  // Long enough for A to hand over to B before the deadline: B, not A, must send the DELETE.
  SDC_RETENTION: '6s',
};
const byUid = (spans: readonly ReadableSpan[], name: string, uid: string) =>
  spans.filter((s) => s.name === name && s.attributes['k8s.pod.uid'] === uid);

describe('traces', () => {
  it('one trace runs from the enqueue on replica A to the DELETE on leader B', async () => {
    const server = env.servers.alpha;
    if (!server) throw new Error('no sandbox server');
    const a = await env.startReplica('replica-a', settings, { traces: true });
    await waitFor('A elected', () => a.replica.cleaners[0]?.isLeader, 20_000);

    const pod = createTerminatedDriver(server, ns, 'traced-app');
    const uid = pod.metadata?.uid ?? '';
    const producer = await waitFor('A enqueued the pod', () =>
      byUid(a.spans.getFinishedSpans(), 'enqueue cleanup job', uid).find(
        (s) => s.attributes['cleanup.enqueue.result'] === 'added',
      ),
    );
    // Copy A's spans now: stopping A shuts its exporter down, which empties it.
    const spansOfA = [...a.spans.getFinishedSpans()];

    const b = await env.startReplica('replica-b', settings, { traces: true });
    await waitFor('B synced', () => b.replica.cleaners[0]?.informer.synced, 20_000);
    await a.stop(); // resigns: B is elected at once
    await waitFor('B elected', () => b.replica.cleaners[0]?.isLeader, 20_000);
    const del = await waitFor(
      'B sent the DELETE',
      () => byUid(b.spans.getFinishedSpans(), 'DELETE', uid)[0],
      30_000,
    );

    // A: informer event → producer, the producer carrying the pod's attributes.
    const event = byUid(spansOfA, 'informer event', uid)[0];
    expect(event).toBeDefined();
    expect(producer.kind).toBe(SpanKind.PRODUCER);
    expect(producer.parentSpanContext?.spanId).toBe(event?.spanContext().spanId);
    expect(producer.attributes).toMatchObject({
      'k8s.pod.name': pod.metadata?.name,
      'k8s.namespace.name': ns,
      'cleanup.context': 'alpha',
      'messaging.system': 'bullmq',
    });
    const traceId = producer.spanContext().traceId;

    // B: consumer (child of A's producer) → GET and DELETE (children of the consumer), same trace.
    const spansOfB = b.spans.getFinishedSpans();
    const consumer = byUid(spansOfB, 'process cleanup job', uid).find(
      (s) => s.attributes['cleanup.outcome'] === 'accepted',
    );
    expect(consumer?.kind).toBe(SpanKind.CONSUMER);
    expect(consumer?.spanContext().traceId).toBe(traceId);
    expect(consumer?.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
    const get = byUid(spansOfB, 'GET', uid).find((s) => s.spanContext().traceId === traceId);
    expect(get?.kind).toBe(SpanKind.CLIENT);
    expect(get?.parentSpanContext?.spanId).toBe(consumer?.spanContext().spanId);
    expect(get?.attributes['http.response.status_code']).toBe(200);
    expect(del.kind).toBe(SpanKind.CLIENT);
    expect(del.spanContext().traceId).toBe(traceId);
    expect(del.parentSpanContext?.spanId).toBe(consumer?.spanContext().spanId);
    expect(del.attributes).toMatchObject({
      'k8s.pod.uid': uid,
      'k8s.pod.name': pod.metadata?.name,
      'k8s.namespace.name': ns,
      'cleanup.context': 'alpha',
      'http.request.method': 'DELETE',
    });
    expect([200, 202]).toContain(del.attributes['http.response.status_code']);
    // B's own enqueue of the same pod found the job: a separate trace, not the one processed.
    const bProducer = byUid(spansOfB, 'enqueue cleanup job', uid)[0];
    expect(bProducer?.attributes['cleanup.enqueue.result']).toBe('exists');

    // The log line of the accepted DELETE carries the trace; the API server saw one DELETE.
    const line = b.logs.lines.find((l) => l.msg === 'driver pod deleted' && l.uid === uid);
    expect(line).toMatchObject({ trace_id: traceId, span_id: consumer?.spanContext().spanId });
    expect(server.requests.deletesByUid().get(uid)?.length).toBe(1);
  }, 90_000);
});
