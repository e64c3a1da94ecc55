/**
 * Probes. `/healthz` (liveness): fails only when the event loop has been blocked longer than a threshold —
 * restarting the process is then the cure. An informer that cannot list or watch (the API server down, RBAC
 * missing) is not: a restart would not fix the API, and every replica restarting at once during an API
 * outage, then backing off (CrashLoopBackOff), would leave none running when it comes back. So an informer
 * down longer than a threshold is listed in `/healthz`'s body. `/readyz` (readiness): Redis reachable, etcd
 * answering when configured, and at least one target this replica can clean (its informer synced and up, the
 * target cleaner's `ready`); the targets it cannot clean now are listed (`notReady`) without failing the probe
 * while others are ready — leadership of those goes to replicas that can clean them. A replica that is not
 * ready still runs and recovers by itself, it just should not be counted on.
 */
import type { FastifyInstance } from 'fastify';
import type { MonotonicClock } from '../clock.ts';
import { targetLabel } from '../queue/job-identity.ts';
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
  /** Longest wait for etcd's status answer in /readyz, ms (default 1000). */
  etcdTimeoutMs?: number;
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

  app.get('/healthz', async (_req, reply) => {
    const down = informersDown();
    const stallMs = loop.worstRecentStallMs();
    const ok = stallMs <= stallThreshold;
    return reply.code(ok ? 200 : 503).send({
      ok,
      ...(down.length > 0 ? { informersDown: down } : {}),
      eventLoopStallMs: stallMs,
    });
  });

  app.get('/readyz', async (_req, reply) => {
    const unsynced = replica.cleaners.filter((c) => !c.informer.synced).map((c) => targetLabel(c.target));
    const notReady = replica.cleaners.filter((c) => !c.ready).map((c) => targetLabel(c.target));
    // status 'ready' alone misses a hung Redis (paused, partitioned): the socket stays open. Ask it.
    let redisTimer: NodeJS.Timeout | undefined;
    const redis =
      replica.redis.status === 'ready' &&
      (await Promise.race([
        replica.redis.ping().then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((r) => {
          redisTimer = setTimeout(() => r(false), opts.etcdTimeoutMs ?? 1000);
        }),
      ]).finally(() => clearTimeout(redisTimer)));
    const down = informersDown();
    const checks: Record<string, boolean> = {
      // Some target to work on: one broken target (RBAC of one namespace) must not take the replica out.
      targetsReady: replica.cleaners.length === 0 || notReady.length < replica.cleaners.length,
      redis,
    };
    if (replica.etcd) {
      let timer: NodeJS.Timeout | undefined;
      checks.etcd = await Promise.race([
        replica.etcd.maintenance
          .status()
          .then(() => true)
          .catch(() => false),
        new Promise<boolean>((r) => {
          timer = setTimeout(() => r(false), opts.etcdTimeoutMs ?? 1000);
        }),
      ]).finally(() => clearTimeout(timer));
    }
    const ok = Object.values(checks).every(Boolean);
    return reply.code(ok ? 200 : 503).send({
      ok,
      ...checks,
      // Information: every informer synced, none down past the threshold.
      informersSynced: unsynced.length === 0,
      informersUp: down.length === 0,
      ...(notReady.length ? { notReady } : {}),
      ...(unsynced.length ? { unsynced } : {}),
      ...(down.length ? { informersDown: down } : {}),
    });
  });
}
