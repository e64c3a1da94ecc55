/**
 * Spans and metrics of one target's cleanup, as the seams of the core call them:
 *
 *   informer event (internal) → enqueue (producer) ⇢ job data `traceparent` ⇢ process (consumer)
 *   → GET / DELETE (client)
 *
 * The consumer span's parent is the producer span of the replica that *added* the job (read back from
 * the job's `traceparent`), so one trace runs from the informer on replica A to the DELETE on leader B.
 * A job processed several times (retries, not-yet, fenced) gets one consumer span per attempt in the same
 * trace. Attribute names follow OpenTelemetry's semantic conventions (k8s.*, messaging.*, http.*); the
 * kubeconfig context is `cleanup.context` because it names a client configuration, not a cluster, and the
 * cluster's name (src/kube/cluster-identity.ts) is `cleanup.cluster`.
 */
import {
  context,
  createContextKey,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { type MonotonicClock, monotonicClock } from '../clock.ts';
import type { PodCall, PodCallObserver } from '../kube/pod-api.ts';
import type { EnqueueResult } from '../queue/cleanup-queue.ts';
import type { DataLossReason } from '../queue/data-marker.ts';
import { queueName, type TargetRef } from '../queue/job-identity.ts';
import type { CleanupJobData } from '../rules/job-data.ts';
import type { Outcome } from '../rules/outcome.ts';
import type { CleanerMetrics, DeletedByOthersSeen } from './metrics.ts';
import { contextFromTraceparent, traceparentOf } from './tracing.ts';

/** What made a replica enqueue a pod: an informer event, or the leader's reconcile. */
export type EnqueueTrigger = 'added' | 'updated' | 'reconcile';

/** The telemetry seams of one target's cleaner (passed through `TargetCleanerOptions.telemetry`). */
export interface TargetTelemetry {
  /**
   * Runs one enqueue inside an informer-event span (for informer triggers) and a producer span, and hands
   * `send` the job data with `traceparent` set to the producer span. Returns what `send` returns.
   */
  enqueue(
    trigger: EnqueueTrigger,
    data: CleanupJobData,
    send: (data: CleanupJobData) => Promise<EnqueueResult>,
  ): Promise<EnqueueResult>;
  /**
   * Runs one processing attempt of a job inside a consumer span continuing the job's trace; records the
   * outcome on the span and in `sdc_cleanup_outcomes_total` (and the lateness of an accepted DELETE).
   * Rethrows what `run` throws (a bug), with the span marked as an error.
   */
  process(data: CleanupJobData, run: () => Promise<Outcome>): Promise<Outcome>;
  /** Counts one reconcile run and what it enqueued. */
  reconciled(counts: { added: number; retried: number }): void;
  /** Counts one loss of the target's Redis data seen by its leader (src/cleaner/data-loss-watch.ts). */
  redisDataLost(reason: DataLossReason): void;
  /**
   * Counts one driver pod deleted by another client before its cleanup job ran: its deletion seen by the
   * informer while the job was still pending (`deletion-seen`). The job outcomes `already-absent` and
   * `already-deleting` are counted by {@link TargetTelemetry.process} itself.
   */
  deletedByOthers(seen: DeletedByOthersSeen): void;
}

/** The UID of the job being processed, so that the GET (which has only a name) is labelled with it too. */
const JOB_UID = createContextKey('spark-driver-cleaner job uid');

const podAttributes = (target: TargetRef, d: { namespace: string; pod: string; uid?: string }) => ({
  'k8s.namespace.name': d.namespace,
  'k8s.pod.name': d.pod,
  ...(d.uid ? { 'k8s.pod.uid': d.uid } : {}),
  'cleanup.context': target.context,
  'cleanup.cluster': target.cluster,
});

function endWithError(span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
  span.end();
}

/** Creates the seams of one target. */
export function createTargetTelemetry(
  target: TargetRef,
  tracer: Tracer,
  metrics: CleanerMetrics,
): TargetTelemetry {
  const queue = queueName(target);
  const messaging = (operation: 'send' | 'process', uid: string) => ({
    'messaging.system': 'bullmq',
    'messaging.operation.type': operation,
    'messaging.destination.name': queue,
    'messaging.message.id': uid,
  });

  async function produce(
    data: CleanupJobData,
    trigger: EnqueueTrigger,
    send: (data: CleanupJobData) => Promise<EnqueueResult>,
  ): Promise<EnqueueResult> {
    const span = tracer.startSpan('enqueue cleanup job', {
      kind: SpanKind.PRODUCER,
      attributes: {
        ...podAttributes(target, data),
        ...messaging('send', data.uid),
        'cleanup.trigger': trigger,
      },
    });
    const ctx = trace.setSpan(context.active(), span);
    const traceparent = traceparentOf(ctx);
    try {
      const result = await context.with(ctx, () => send(traceparent ? { ...data, traceparent } : data));
      span.setAttribute('cleanup.enqueue.result', result);
      span.end();
      return result;
    } catch (err) {
      endWithError(span, err);
      throw err;
    }
  }

  return {
    enqueue(trigger, data, send) {
      if (trigger === 'reconcile') return produce(data, trigger, send);
      const event = tracer.startSpan('informer event', {
        kind: SpanKind.INTERNAL,
        attributes: { ...podAttributes(target, data), 'k8s.event.type': trigger },
      });
      return context
        .with(trace.setSpan(context.active(), event), () => produce(data, trigger, send))
        .then(
          (result) => {
            event.end();
            return result;
          },
          (err: unknown) => {
            endWithError(event, err);
            throw err;
          },
        );
    },
    async process(data, run) {
      const span = tracer.startSpan(
        'process cleanup job',
        {
          kind: SpanKind.CONSUMER,
          attributes: { ...podAttributes(target, data), ...messaging('process', data.uid) },
        },
        contextFromTraceparent(data.traceparent),
      );
      let outcome: Outcome;
      try {
        outcome = await context.with(trace.setSpan(context.active(), span).setValue(JOB_UID, data.uid), run);
      } catch (err) {
        endWithError(span, err);
        throw err;
      }
      span.setAttribute('cleanup.outcome', outcome.outcome);
      if (outcome.outcome === 'failed') {
        span.setStatus({ code: SpanStatusCode.ERROR, message: `${outcome.step} ${outcome.reason}` });
      }
      span.end();
      metrics.outcome(target, outcome);
      const seen = deletedByOthersSeen(data, outcome);
      if (seen) metrics.deletedByOthers(target, seen);
      return outcome;
    },
    reconciled(counts) {
      metrics.reconciled(target, counts);
    },
    redisDataLost(reason) {
      metrics.redisDataLost(target, reason);
    },
    deletedByOthers(seen) {
      metrics.deletedByOthers(target, seen);
    },
  };
}

/**
 * Whether a job's outcome shows another client deleting the pod: found absent or already being deleted,
 * unless the deletion may be this cleaner's own — a DELETE this replica saw accepted (`ours`), or one a previous
 * run sent without reading the answer (`liveRecheck`).
 */
function deletedByOthersSeen(data: CleanupJobData, o: Outcome): DeletedByOthersSeen | undefined {
  if (data.liveRecheck) return undefined;
  if (o.outcome === 'already-absent') return 'already-absent';
  if (o.outcome === 'already-deleting' && !o.ours) return 'already-deleting';
  return undefined;
}

/**
 * The observer of one context's pod calls: a client span per GET/DELETE (child of the active consumer
 * span) and `sdc_kube_request_duration_seconds`. Targets share a context's pod API, so the target is
 * rebuilt from the call's namespace. `nowMs` times the calls (the monotonic clock, ms).
 */
export function createPodCallObserver(
  contextName: string,
  clusterName: string,
  tracer: Tracer,
  metrics: CleanerMetrics,
  nowMs: MonotonicClock = monotonicClock,
): PodCallObserver {
  return {
    start(call: PodCall) {
      const target = { cluster: clusterName, context: contextName, namespace: call.namespace };
      const jobUid = context.active().getValue(JOB_UID);
      const uid = call.uid ?? (typeof jobUid === 'string' ? jobUid : undefined);
      const span = tracer.startSpan(call.verb, {
        kind: SpanKind.CLIENT,
        attributes: { ...podAttributes(target, { ...call, uid }), 'http.request.method': call.verb },
      });
      const started = nowMs();
      return (statusCode, err) => {
        metrics.apiRequest(target, call.verb, statusCode, (nowMs() - started) / 1000);
        if (statusCode !== undefined) span.setAttribute('http.response.status_code', statusCode);
        // 404 and 409 are answers the handler expects (already absent, replaced), not errors of the call.
        if (err !== undefined && statusCode !== 404 && statusCode !== 409) {
          span.setAttribute(
            'error.type',
            statusCode ? String(statusCode) : ((err as Error)?.name ?? 'Error'),
          );
          endWithError(span, err);
          return;
        }
        span.end();
      };
    },
  };
}
