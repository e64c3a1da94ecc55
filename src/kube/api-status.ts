/**
 * Reading the Kubernetes API's error answers: the `Status` object (k8s.io/apimachinery/pkg/apis/meta/v1
 * `Status`: code, reason, message) of a non-2xx body or a watch ERROR event, the Status reason kube-apiserver
 * gives each HTTP code, and `Retry-After`; and the one error they become ({@link KubeApiError},
 * {@link statusError}). Shared by the pod API (src/kube/pod-api.ts) and the informers (src/kube/pod-reflector.ts).
 */

/** The fields of a Status object we read; each only when it has the right type. */
export interface StatusFields {
  readonly code?: number;
  readonly reason?: string;
  readonly message?: string;
}

/**
 * A Status from a parsed body, a JSON text, or any other text (its first 300 characters as the message).
 * Never throws; `{}` when there is nothing to read.
 */
export function statusOf(body: unknown): StatusFields {
  let value = body;
  if (typeof body === 'string') {
    if (!body) return {};
    try {
      value = JSON.parse(body);
    } catch {
      return { message: body.slice(0, 300) };
    }
  }
  if (typeof value !== 'object' || value === null) return {};
  const s = value as { code?: unknown; reason?: unknown; message?: unknown };
  return {
    code: typeof s.code === 'number' ? s.code : undefined,
    reason: typeof s.reason === 'string' ? s.reason : undefined,
    message: typeof s.message === 'string' ? s.message : undefined,
  };
}

/** kube-apiserver's Status reasons by HTTP code (k8s.io/apimachinery/pkg/apis/meta/v1 StatusReason). */
export const STATUS_REASONS: Readonly<Record<number, string>> = {
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

/**
 * `Retry-After` (delta-seconds or an HTTP date; RFC 9110 §10.2.3) in ms, from a header value as undici gives
 * it (a string, or an array when repeated: the first counts). Undefined when absent or unreadable.
 * @param nowMs epoch ms, for HTTP dates
 */
export function retryAfterMs(header: string | string[] | undefined, nowMs: number): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return undefined;
  const secs = Number(value);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}

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

/**
 * The one mapper from a non-2xx answer to an error, for the pod calls and the informer's list and watch: a
 * {@link KubeApiError} with the Status body's reason and message and `Retry-After`. Without a Status body (a
 * proxy's answer) the reason is the HTTP code's (STATUS_REASONS) and the message `fallbackMessage`, else the
 * reason. A watch's ERROR event is read the same way, its Status as the body (no HTTP code, no headers).
 * @param code the HTTP code, or the ERROR event Status' code (undefined when it has none)
 * @param nowMs epoch ms, for a `Retry-After` date
 */
export function statusError(
  code: number | undefined,
  body: unknown,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  nowMs: number,
  fallbackMessage?: string,
): KubeApiError {
  const status = statusOf(body);
  // Proxies and some errors answer without a Status body: fall back to the HTTP code's reason.
  const reason = status.reason || (code === undefined ? undefined : STATUS_REASONS[code]) || 'Unknown';
  return new KubeApiError(
    status.message || fallbackMessage || reason,
    code,
    reason,
    retryAfterMs(headers['retry-after'], nowMs),
  );
}
