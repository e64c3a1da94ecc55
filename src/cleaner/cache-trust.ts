/**
 * Whether the informer's cache may back the cleanup handler's re-check (`recheck: cache` and
 * `resource-version` read the informer's copy of the pod instead of GETting it).
 *
 * An informer whose list or watch keeps failing stops seeing changes: its copy of a pod may miss a relabel
 * out of the selector, a `deletionTimestamp`, a deletion and re-creation — or the pod altogether (created
 * while the watch was down, enqueued by another replica). In `cache` mode a DELETE would then go out on the
 * strength of a stale copy, or a missing copy would complete the job as `already-absent` and leak the pod.
 * So once the informer has been down longer than a threshold, the handler re-checks with a live GET.
 *
 * Why a live GET rather than resigning the target: the informer is down because the API server refuses or
 * drops its list or watch (a broken watch path, a proxy, RBAC `watch` missing); other replicas talk to the
 * same API server and would most likely fail the same way, so leadership would just move around while no
 * one cleans. GETs usually still work when only the watch is broken, so cleaning goes on (at one more
 * request per pod); when they fail too, the jobs fail and are retried with backoff like any API failure.
 */
import type { PodInformer } from '../kube/pod-informer.ts';
import type { Logger } from '../log.ts';

/**
 * True when the cache may be trusted: the informer is up, or down for at most `staleAfterMs`.
 * @param downSinceMs when the informer went down, by the monotonic clock (undefined while it is up).
 * @param nowMs the monotonic clock now, ms (same time base as `downSinceMs`).
 * @param staleAfterMs how long it may be down before its cache is no longer trusted, ms.
 */
export function cacheTrusted(downSinceMs: number | undefined, nowMs: number, staleAfterMs: number): boolean {
  return downSinceMs === undefined || nowMs - downSinceMs <= staleAfterMs;
}

/** Options of {@link createCacheTrust}. */
export interface CacheTrustOptions {
  informer: Pick<PodInformer, 'downSinceMs'>;
  /** Monotonic clock, ms (`performance.now()`): the informer's `downSinceMs` time base. */
  monotonicNow: () => number;
  /** How long the informer may be down before its cache is no longer trusted, ms. */
  staleAfterMs: number;
  log: Logger;
}

/** The cache-trust state of one target's informer, asked once per cleanup job. */
export interface CacheTrust {
  /** True when the re-check must GET the pod: the informer has been down longer than the threshold. */
  untrusted(): boolean;
}

/** Creates the cache-trust state of one target; it logs when the handler switches to live GETs and back. */
export function createCacheTrust(opts: CacheTrustOptions): CacheTrust {
  let wasUntrusted = false;
  return {
    untrusted() {
      const since = opts.informer.downSinceMs;
      const now = opts.monotonicNow();
      const untrusted = !cacheTrusted(since, now, opts.staleAfterMs);
      if (untrusted && !wasUntrusted) {
        opts.log.warn(
          { downForMs: Math.round(now - (since ?? now)), staleAfterMs: opts.staleAfterMs },
          'informer down: its cache is not trusted, pods are re-checked with a live GET until it is back',
        );
      } else if (!untrusted && wasUntrusted) {
        opts.log.info('informer back: pods are re-checked from its cache again');
      }
      wasUntrusted = untrusted;
      return untrusted;
    },
  };
}
