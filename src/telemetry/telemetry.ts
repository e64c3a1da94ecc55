/**
 * One replica's telemetry: its tracing (OTEL_* configured, no-op when not) and its Prometheus metrics,
 * handed to the core as one object ({@link Telemetry}) from which the replica takes the per-target seams
 * and the per-context pod-call observer.
 */
import type { PodCallObserver } from '../kube/pod-api.ts';
import type { TargetRef } from '../queue/job-identity.ts';
import { type CleanerMetrics, createMetrics } from './metrics.ts';
import { createPodCallObserver, createTargetTelemetry, type TargetTelemetry } from './target-telemetry.ts';
import { createTracing, type Tracing, type TracingOptions } from './tracing.ts';

/** Options of {@link createTelemetry}. */
export interface TelemetryOptions extends TracingOptions {
  /** Export Node's process metrics too (default true). */
  processMetrics?: boolean;
  /** The configured leadership lease TTL, s (exported as `sdc_election_ttl_seconds`). */
  electionTtlSeconds?: number;
  /** The replica's dry-run setting (exported as `sdc_dry_run`). */
  dryRun?: boolean;
}

/** Tracing and metrics of one replica. */
export interface Telemetry {
  readonly tracing: Tracing;
  readonly metrics: CleanerMetrics;
  /** The seams of one target's cleaner (spans and metrics of enqueue, processing and reconcile). */
  forTarget(target: TargetRef): TargetTelemetry;
  /** The observer of one context's pod GETs and DELETEs; `cluster`: the name of the cluster it reaches. */
  podCalls(context: string, cluster: string): PodCallObserver;
  /** Flushes and stops the span export. Idempotent. */
  shutdown(): Promise<void>;
}

/** Creates a replica's telemetry; tracing follows `OTEL_*` (see tracing.ts). Never rejects. */
export async function createTelemetry(opts: TelemetryOptions): Promise<Telemetry> {
  const tracing = await createTracing(opts);
  const metrics = createMetrics({
    processMetrics: opts.processMetrics,
    electionTtlSeconds: opts.electionTtlSeconds,
    dryRun: opts.dryRun,
  });
  return {
    tracing,
    metrics,
    forTarget: (target) => createTargetTelemetry(target, tracing.tracer, metrics),
    podCalls: (context, cluster) => createPodCallObserver(context, cluster, tracing.tracer, metrics),
    shutdown: () => tracing.shutdown(),
  };
}
