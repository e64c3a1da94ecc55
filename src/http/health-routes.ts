/**
 * Probes. `/healthz` (liveness): fails only when the event loop has been blocked longer than a threshold —
 * restarting the process is then the cure. An informer that cannot list or watch (the API server down, RBAC
 * missing) is not: a restart would not fix the API, and every replica restarting at once during an API
 * outage, then backing off (CrashLoopBackOff), would leave none running when it comes back. So an informer
 * down longer than a threshold is listed in `/healthz`'s body. `/readyz` (readiness): the replica serves no
 * traffic, so ready means "this process is up and can work on at least one target" (its informer synced and
 * up); the targets it cannot clean now (the target cleaner's `ready`) are listed (`notReady`) without failing
 * the probe while others are ready — leadership of those goes to replicas that can clean them. A target the
 * self-check stepped this replica down from for want of progress is listed too (also in `steppedDown`) but
 * never fails the probe: the cause may be Redis, shared by every replica, as below. Redis and etcd
 * are not readiness conditions: they are shared, so their outage would make every replica unready at once,
 * which helps no one and, with the PodDisruptionBudget counting unready pods, blocks node drains. `/readyz`
 * reports them in its body (`redis`, `etcd`: information), `/healthz` as the last `/readyz` found them
 * (`backends`), and so does the `sdc_backend_up` gauge. A replica
 * that is not ready still runs and recovers by itself, it just should not be counted on.
 */
import type { FastifyInstance } from 'fastify';
import type { MonotonicClock } from '../clock.ts';
import { targetLabel } from '../queue/job-identity.ts';
import { type BackendHealth, checkBackends } from './backend-health.ts';
import type { ServedReplica } from './served-replica.ts';

/** Options of {@link registerHealthRoutes}. */
export interface HealthOptions {
  replica: ServedReplica;
  /** The monotonic clock, ms (src/clock.ts): how long an informer is down, event-loop stalls. */
  monotonicNow: MonotonicClock;
  /**
   * An informer down longer than this is listed by /healthz and /readyz (`informersDown`, information only:
   * whether a target can be cleaned is the target cleaner's `ready`), ms (default 120 000).
   */
  informerDownThresholdMs?: number;
  /** An event-loop stall longer than this (seen in the last minute) fails /healthz, ms (default 10 000). */
  eventLoopStallThresholdMs?: number;
  /** Longest wait for Redis's PING and the leadership backend's answer reported by the probes, ms (default 1000). */
  backendTimeoutMs?: number;
}

/**
 * Measures how late a 1 s timer fires: a blocked event loop delays it by the length of the block. Keeps
 * the worst stall of the last minute (a probe arrives after the block, when the loop is free again).
 */
function watchEventLoop(now: MonotonicClock): { worstRecentStallMs(): number; stop(): void } {
  const periodMs = 1000;
  const stalls: { at: number; ms: number }[] = [];
  let expected = now() + periodMs;
  const timer = setInterval(() => {
    const t = now();
    const late = t - expected;
    expected = t + periodMs;
    if (late > 50) stalls.push({ at: t, ms: late });
    while (stalls.length > 0 && (stalls[0]?.at ?? 0) < t - 60_000) stalls.shift();
  }, periodMs);
  timer.unref();
  return {
    worstRecentStallMs: () => Math.round(stalls.reduce((m, s) => Math.max(m, s.ms), 0)),
    stop: () => clearInterval(timer),
  };
}

/** Adds `/healthz` and `/readyz` (open: no authentication, probes must reach them). */
export function registerHealthRoutes(app: FastifyInstance, opts: HealthOptions): void {
  const { replica, monotonicNow } = opts;
  const downThreshold = opts.informerDownThresholdMs ?? 120_000;
  const stallThreshold = opts.eventLoopStallThresholdMs ?? 10_000;
  const loop = watchEventLoop(monotonicNow);
  app.addHook('onClose', async () => loop.stop());

  const informersDown = () =>
    replica.cleaners
      .filter((c) => {
        const since = c.informer.downSinceMs;
        return since !== undefined && monotonicNow() - since > downThreshold;
      })
      .map((c) => targetLabel(c.target));

  const backendTimeoutMs = opts.backendTimeoutMs ?? 1000;
  // /healthz shows the backends as the last /readyz found them: liveness stays quick (its probes' timeout
  // is short, a startup probe's 1 s) when a hung backend takes the whole timeout to answer.
  let lastBackends: BackendHealth | undefined;

  app.get('/healthz', async (_req, reply) => {
    const down = informersDown();
    const stallMs = loop.worstRecentStallMs();
    const ok = stallMs <= stallThreshold;
    return reply.code(ok ? 200 : 503).send({
      ok,
      ...(down.length > 0 ? { informersDown: down } : {}),
      eventLoopStallMs: stallMs,
      // Information (as the last /readyz found them): a restart would not bring a backend back.
      ...(lastBackends ? { backends: lastBackends } : {}),
    });
  });

  app.get('/readyz', async (_req, reply) => {
    const unsynced = replica.cleaners.filter((c) => !c.informer.synced).map((c) => targetLabel(c.target));
    const notReady = replica.cleaners.filter((c) => !c.ready).map((c) => targetLabel(c.target));
    const steppedDown = replica.cleaners
      .filter((c) => c.notReadyReasons.includes('stepped-down'))
      .map((c) => targetLabel(c.target));
    const down = informersDown();
    // Some target to work on: one broken target (RBAC of one namespace) must not take the replica out.
    const informersReady = replica.cleaners.filter((c) => !c.notReadyReasons.includes('informer'));
    const targetsReady = replica.cleaners.length === 0 || informersReady.length > 0;
    lastBackends = await checkBackends(replica, backendTimeoutMs);
    return reply.code(targetsReady ? 200 : 503).send({
      ok: targetsReady,
      targetsReady,
      // Information: Redis answering, etcd answering (when configured).
      ...lastBackends,
      // Information: every informer synced, none down past the threshold.
      informersSynced: unsynced.length === 0,
      informersUp: down.length === 0,
      ...(notReady.length ? { notReady } : {}),
      ...(steppedDown.length ? { steppedDown } : {}),
      ...(unsynced.length ? { unsynced } : {}),
      ...(down.length ? { informersDown: down } : {}),
      // Information: the namespaces discovered per `context:*` target (none matched is ready, with no target).
      ...(replica.discovery ? { discovery: replica.discovery() } : {}),
    });
  });
}
