/**
 * The two pod calls the cleanup handler makes — GET and DELETE with `preconditions.uid` — over
 * @kubernetes/client-node's CoreV1Api, rate-limited per context, with a client timeout, and with every
 * failure turned into a {@link KubeApiError} carrying the API's Status (reason, code, message) and
 * `Retry-After`.
 *
 * Why the UID precondition: a pod re-created with the same name has a new UID; the API server answers
 * 409 Conflict instead of deleting the new pod. It also makes a second DELETE of the same pod harmless:
 * the pod is gone (404) or being deleted (returned unchanged).
 */
import { ApiException, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
// client-node's object-parameter API takes Observable-style middleware (its own minimal stub).
import type { RequestContext } from '@kubernetes/client-node/dist/gen/http/http.js';
import { of } from '@kubernetes/client-node/dist/gen/rxjsStub.js';
import type { Dispatcher } from 'undici';
import { systemClock } from '../clock.ts';
import type { RateLimiter } from './rate-limiter.ts';

/** A failed API call: an HTTP error Status from the API server, a timeout, or a network error. */
export class KubeApiError extends Error {
  override name = 'KubeApiError';
  /** HTTP status code; undefined for network errors and timeouts. */
  readonly code: number | undefined;
  /** Status `reason` (Forbidden, TooManyRequests, InternalError, …), or `Timeout` / the socket error code. */
  readonly reason: string;
  /** `Retry-After` in ms, when the server sent one (429, 503). */
  readonly retryAfterMs: number | undefined;
  constructor(message: string, code: number | undefined, reason: string, retryAfterMs?: number) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.retryAfterMs = retryAfterMs;
  }
}

/** Outcome of a DELETE: sent and accepted, or a no-op the API server told us about. */
export type DeleteResult = 'accepted' | 'not-found' | 'uid-mismatch';

/** GET and DELETE of one pod. Both reject with {@link KubeApiError} on real failures, or the signal's reason. */
export interface PodApi {
  /** Reads a pod; `undefined` when it does not exist (404). */
  get(namespace: string, name: string, signal?: AbortSignal): Promise<V1Pod | undefined>;
  /**
   * DELETE with `preconditions.uid`: 404 → `not-found`, 409 → `uid-mismatch`.
   * @param beforeSend called after the rate limiter's wait, right before the request leaves; what it
   *   throws cancels the request and is rethrown as is (the handler re-checks its leadership there).
   */
  delete(
    namespace: string,
    name: string,
    uid: string,
    signal?: AbortSignal,
    beforeSend?: () => void,
  ): Promise<DeleteResult>;
}

/** One GET or DELETE as a {@link PodCallObserver} sees it. */
export interface PodCall {
  readonly verb: 'GET' | 'DELETE';
  readonly namespace: string;
  readonly pod: string;
  /** The UID precondition of a DELETE. */
  readonly uid?: string;
}

/**
 * Watches each call (metrics, client spans). `start` is called after the rate limiter, as the request
 * leaves; it returns the function called once with the HTTP status code (undefined when no response came:
 * timeout, network error, abort) and the error the call failed with, if any.
 */
export interface PodCallObserver {
  start(call: PodCall): (statusCode: number | undefined, err?: unknown) => void;
}

/** Options of {@link createPodApi}. */
export interface PodApiOptions {
  kc: KubeConfig;
  limiter: RateLimiter;
  /** Client timeout of one request, ms (default 10 000). */
  timeoutMs?: number;
  /** Clock for `Retry-After` dates, epoch ms (default the system clock). */
  now?: () => number;
  /** Told about every request (telemetry); optional. */
  observer?: PodCallObserver;
}

interface StatusBody {
  reason?: string;
  message?: string;
  code?: number;
}

function parseStatus(body: unknown): StatusBody {
  if (typeof body === 'object' && body !== null) return body as StatusBody;
  if (typeof body !== 'string') return {};
  try {
    const parsed = JSON.parse(body);
    return typeof parsed === 'object' && parsed ? (parsed as StatusBody) : {};
  } catch {
    return { message: body.slice(0, 300) };
  }
}

/** kube-apiserver's Status reasons by HTTP code (k8s.io/apimachinery/pkg/apis/meta/v1 StatusReason). */
const STATUS_REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Expired',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** Parses `Retry-After` (delta-seconds or an HTTP date) into ms. */
export function retryAfterMs(header: string | undefined, nowMs: number): number | undefined {
  if (!header) return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const at = Date.parse(header);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}

/** Turns anything client-node throws into a {@link KubeApiError}. Abort reasons are rethrown as they are. */
export function toKubeApiError(err: unknown, signal: AbortSignal | undefined, nowMs: number): unknown {
  if (signal?.aborted) return signal.reason;
  if (err instanceof ApiException) {
    const status = parseStatus(err.body);
    const headers = (err.headers ?? {}) as Record<string, string>;
    // client-node drops the body of some answers (401 among them): fall back to the HTTP code's reason.
    const reason = status.reason ?? STATUS_REASONS[err.code] ?? 'Unknown';
    return new KubeApiError(
      status.message ?? reason,
      err.code,
      reason,
      retryAfterMs(headers['retry-after'], nowMs),
    );
  }
  const e = err as {
    name?: string;
    message?: string;
    code?: string;
    cause?: { code?: string; message?: string };
  };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return new KubeApiError('the API server did not answer within the client timeout', undefined, 'Timeout');
  }
  const code = e?.cause?.code ?? e?.code ?? 'NetworkError';
  return new KubeApiError(e?.cause?.message ?? e?.message ?? String(err), undefined, code);
}

/** Creates the pod API of one context. */
export function createPodApi(opts: PodApiOptions): PodApi {
  const api = opts.kc.makeApiClient(CoreV1Api);
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const now = opts.now ?? systemClock;
  // client-node builds a new undici Agent for every request whenever the cluster has TLS settings (a CA,
  // a client certificate, or insecure-skip-tls-verify): every GET and DELETE would open a new connection
  // (and a new TLS handshake). Keep the first Agent of this context and reuse it: connections stay alive.
  let sharedDispatcher: Dispatcher | undefined;
  const reuseDispatcher = (ctx: RequestContext) => {
    const fresh = ctx.getDispatcher();
    if (!fresh) return;
    if (!sharedDispatcher) {
      sharedDispatcher = fresh;
      return;
    }
    if (fresh !== sharedDispatcher) {
      void fresh.close().catch(() => undefined); // never used: nothing to drain
      ctx.setDispatcher(sharedDispatcher);
    }
  };
  const withSignal = (signal: AbortSignal | undefined, onStatus?: (code: number) => void) => {
    const s = signal
      ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)])
      : AbortSignal.timeout(timeoutMs);
    return {
      middleware: [
        {
          pre: (ctx: RequestContext) => {
            ctx.setSignal(s);
            reuseDispatcher(ctx);
            return of(ctx);
          },
          post: <T extends { httpStatusCode?: number }>(ctx: T) => {
            if (ctx.httpStatusCode !== undefined) onStatus?.(ctx.httpStatusCode);
            return of(ctx);
          },
        },
      ],
      middlewareMergeStrategy: 'append' as const,
    };
  };
  /** Runs one request under the observer, which learns the status code from the middleware's `post`. */
  const observed = async <T>(call: PodCall, run: (onStatus: (code: number) => void) => Promise<T>) => {
    const end = opts.observer?.start(call);
    if (!end) return run(() => {});
    let code: number | undefined;
    try {
      const result = await run((c) => {
        code = c;
      });
      end(code);
      return result;
    } catch (err) {
      end(code ?? (err instanceof ApiException ? err.code : undefined), err);
      throw err;
    }
  };
  return {
    async get(namespace, name, signal) {
      await opts.limiter.take(signal);
      try {
        return await observed({ verb: 'GET', namespace, pod: name }, (onStatus) =>
          // biome-ignore lint/suspicious/noExplicitAny: client-node's option type is generic over middleware
          api.readNamespacedPod({ namespace, name }, withSignal(signal, onStatus) as any),
        );
      } catch (err) {
        if (err instanceof ApiException && err.code === 404) return undefined;
        throw toKubeApiError(err, signal, now());
      }
    },
    async delete(namespace, name, uid, signal, beforeSend) {
      await opts.limiter.take(signal);
      signal?.throwIfAborted();
      beforeSend?.();
      try {
        await observed({ verb: 'DELETE', namespace, pod: name, uid }, (onStatus) =>
          api.deleteNamespacedPod(
            { namespace, name, body: { preconditions: { uid } } },
            // biome-ignore lint/suspicious/noExplicitAny: as above
            withSignal(signal, onStatus) as any,
          ),
        );
        return 'accepted';
      } catch (err) {
        if (err instanceof ApiException && err.code === 404) return 'not-found';
        if (err instanceof ApiException && err.code === 409) return 'uid-mismatch';
        throw toKubeApiError(err, signal, now());
      }
    },
  };
}
