/**
 * Samples, about once a second, what the overdue invariant compares: how many pods of each target are in
 * fact overdue (the sandbox's store, judged by invariants.ts) and what `sdc_overdue_pods` each live
 * replica's /metrics reports for that target. A frozen or restarting replica simply does not answer. In a
 * two-cluster world a target is a cluster's namespace: its facts from that cluster's server, its reports from
 * that cluster's replicas.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { type OverdueSample, overduePods } from '../helpers/invariants.ts';
import type { NemesisWorld, ReplicaSlot } from './world.ts';

/** The self-check gauge the replicas export (per context and namespace). */
export const OVERDUE_METRIC = 'sdc_overdue_pods';

/** Options of {@link startOverdueSampler}. */
export interface OverdueSamplerOptions {
  context: string;
  namespaces: readonly string[];
  retentionMs: number;
  /** The product's grace before a pod counts as overdue, ms. */
  graceMs: number;
  /** Time between two samples, ms. */
  everyMs: number;
}

/** A running sampler. */
export interface OverdueSampler {
  readonly samples: OverdueSample[];
  /** True once any replica's /metrics carried {@link OVERDUE_METRIC}. */
  readonly metricSeen: boolean;
  /** One scrape now: the gauge per replica and target (`r0` → `ns` → value), for the final check. */
  scrape(): Promise<Record<string, Record<string, number>>>;
  stop(): Promise<void>;
}

/**
 * Values of `metric` by namespace label in a Prometheus text exposition, for one context.
 * Pure, exported for its unit test.
 */
export function parseGauge(text: string, metric: string, context: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const m = /^[^{]+\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries(
      [...(m[1] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    if (labels.context !== context || labels.namespace === undefined) continue;
    out[labels.namespace] = Number(m[2]);
  }
  return out;
}

function urlOf(slot: ReplicaSlot): string | undefined {
  const line = slot.current?.lines.find((l) => l.msg === 'http server listening');
  return line ? String(line.url) : undefined;
}

/** Starts sampling `world` until `stop()`. */
export function startOverdueSampler(world: NemesisWorld, opts: OverdueSamplerOptions): OverdueSampler {
  const samples: OverdueSample[] = [];
  let metricSeen = false;
  let stopped = false;

  const scrape = async (): Promise<Record<string, Record<string, number>>> => {
    const out: Record<string, Record<string, number>> = {};
    await Promise.all(
      world.slots.map(async (slot) => {
        const url = urlOf(slot);
        if (!url || slot.frozen) return;
        try {
          const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(1000) });
          const text = await res.text();
          if (text.includes(`${OVERDUE_METRIC}{`) || text.includes(`# TYPE ${OVERDUE_METRIC} `))
            metricSeen = true;
          out[slot.id] = parseGauge(text, OVERDUE_METRIC, opts.context);
        } catch {
          // down, frozen or restarting: no answer this time
        }
      }),
    );
    return out;
  };

  const tick = async () => {
    const atMs = world.server.clock.now();
    const actual = world.servers.map((server) => {
      const byNs = new Map<string, number>();
      for (const ns of opts.namespaces) {
        const pods: V1Pod[] = server.pods.list(ns);
        byNs.set(
          ns,
          overduePods(pods, { retentionMs: opts.retentionMs, graceMs: opts.graceMs, nowMs: atMs }).length,
        );
      }
      return byNs;
    });
    const reported = await scrape();
    const clusterOf = new Map(world.slots.map((s) => [s.id, s.cluster]));
    for (const [c, server] of world.servers.entries())
      for (const ns of opts.namespaces) {
        const perReplica: Record<string, number> = {};
        for (const [replica, values] of Object.entries(reported)) {
          const v = values[ns];
          if (v !== undefined && clusterOf.get(replica) === c) perReplica[replica] = v;
        }
        samples.push({
          atMs,
          target: world.servers.length > 1 ? `${server.clusterName}/${ns}` : `${opts.context}:${ns}`,
          actual: actual[c]?.get(ns) ?? 0,
          reported: perReplica,
        });
      }
  };

  const loop = (async () => {
    while (!stopped) {
      const started = performance.now();
      await tick();
      await new Promise((r) => setTimeout(r, Math.max(0, opts.everyMs - (performance.now() - started))));
    }
  })();

  return {
    samples,
    get metricSeen() {
      return metricSeen;
    },
    scrape,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
