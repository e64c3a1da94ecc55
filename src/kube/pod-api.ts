/**
 * The two pod calls the cleanup handler makes — GET and DELETE with `preconditions` — over our HTTP
 * transport (src/kube/kube-http.ts), rate-limited per context, with a client timeout, and with every
 * failure turned into a {@link KubeApiError} carrying the API's Status (reason, code, message) and
 * `Retry-After`.
 *
 * Why the UID precondition: a pod re-created with the same name has a new UID; the API server answers
 * 409 Conflict instead of deleting the new pod. It also makes a second DELETE of the same pod harmless:
 * the pod is gone (404) or being deleted (returned unchanged). A `resourceVersion` precondition goes
 * further: the API server deletes only the very version the caller checked, atomically (409 otherwise) —
 * DeleteOptions.preconditions, k8s.io/apimachinery/pkg/apis/meta/v1 `Preconditions`.
 */
import { systemClock } from '../clock.ts';
import { KubeApiError, statusError } from './api-status.ts';
import { type DriverPod, trimPod } from './driver-pod.ts';
import type { KubeHttp, KubeRequestOptions } from './kube-http.ts';
import type { RateLimiter } from './rate-limiter.ts';

/**
 * Outcome of a DELETE: sent and accepted, or a no-op the API server told us about: the pod is gone (404),
 * or a precondition failed (409: another UID — a re-created pod —, or another resourceVersion).
 */
export type DeleteResult = 'accepted' | 'not-found' | 'conflict';

/** DeleteOptions.preconditions: the API server deletes the pod only if both match. */
export interface DeletePreconditions {
  readonly uid: string;
  /** The version the caller checked; omitted → any version of that UID. */
  readonly resourceVersion?: string;
}

/** GET and DELETE of one pod. Both reject with {@link KubeApiError} on real failures, or the signal's reason. */
export interface PodApi {
  /** Reads a pod, trimmed (src/kube/driver-pod.ts); `undefined` when it does not exist (404). */
  get(namespace: string, name: string, signal?: AbortSignal): Promise<DriverPod | undefined>;
  /**
   * DELETE with `preconditions`: 404 → `not-found`, 409 → `conflict`.
   * @param signal cancels the DELETE (rejecting with its reason) until the request leaves; once it has left,
   *   its answer is awaited `answerGraceMs` more, then given up: rejects with {@link DeleteAnswerAbandonedError}.
   * @param gates the caller's last checks (the handler's leadership): see {@link DeleteGates}.
   */
  delete(
    namespace: string,
    name: string,
    preconditions: DeletePreconditions,
    signal?: AbortSignal,
    gates?: DeleteGates,
  ): Promise<DeleteResult>;
}

/**
 * The caller's last checks before a DELETE leaves. What either throws cancels the request, and is rethrown as is
 * (the request never left).
 */
export interface DeleteGates {
  /**
   * Awaited after the rate limiter's wait, before the request is handed to the transport: the handler confirms
   * its leadership with the backend there (a remote read), since the wait may have been long — or the whole
   * machine paused in it, which no clock of this process measures.
   */
  readonly afterWait?: () => Promise<void>;
  /**
   * Called synchronously once the connection is established, as the request is written
   * (src/kube/kube-http.ts): no await separates it from the bytes leaving, a new connection's TCP and TLS
   * handshakes included.
   */
  readonly beforeSend?: () => void;
}

/** One GET or DELETE as a {@link PodCallObserver} sees it. */
export interface PodCall {
  readonly verb: 'GET' | 'DELETE';
  readonly namespace: string;
  readonly pod: string;
  /** The UID precondition of a DELETE. */
  readonly uid?: string;
  /** The resourceVersion precondition of a DELETE, when it has one. */
  readonly resourceVersion?: string;
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
  /** The context's transport. */
  http: KubeHttp;
  limiter: RateLimiter;
  /** Client timeout of one request, ms (default 10 000). */
  timeoutMs?: number;
  /** Clock for `Retry-After` dates, epoch ms (default the system clock). */
  now?: () => number;
  /** Told about every request (telemetry); optional. */
  observer?: PodCallObserver;
  /**
   * How long a DELETE that has left still waits for its answer once the caller's signal aborts, ms (default
   * {@link DELETE_ANSWER_GRACE_MS}, never longer than `timeoutMs`).
   */
  answerGraceMs?: number;
}

/**
 * Default of `PodApiOptions.answerGraceMs`, ms. Aborting a DELETE that has left takes nothing back: the API
 * server may apply it all the same. Waiting a little for its answer lets the outcome (and its log line and
 * metric) be the true one when leadership is lost or the replica stops; the bound keeps a stop within its
 * deadline (15 s in total, src/commands/run.ts) when the API server does not answer.
 */
export const DELETE_ANSWER_GRACE_MS = 2_000;

/**
 * A DELETE left, but its caller's signal aborted and its answer did not come within the grace
 * (`PodApiOptions.answerGraceMs`): the API server may have applied it. Not a {@link KubeApiError}: nothing
 * failed, the answer was given up.
 */
export class DeleteAnswerAbandonedError extends Error {
  override readonly name = 'DeleteAnswerAbandonedError';
  constructor(graceMs: number) {
    super(
      `the DELETE was sent; its answer was given up ${graceMs} ms after leadership was lost or the stop began`,
    );
  }
}

/** Turns a transport failure into a {@link KubeApiError}. Abort reasons are rethrown as they are. */
export function toKubeApiError(err: unknown, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason;
  if (err instanceof KubeApiError) return err;
  const e = err as {
    name?: string;
    message?: string;
    code?: string;
    cause?: { code?: string; message?: string };
  };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return new KubeApiError('the API server did not answer within the client timeout', undefined, 'Timeout');
  }
  // The kubeconfig's credential plugin failed: no request was sent (src/kube/exec-credential.ts).
  if (e?.name === 'ExecPluginError')
    return new KubeApiError(e.message ?? String(err), undefined, 'ExecPluginFailed');
  const code = e?.cause?.code ?? e?.code ?? 'NetworkError';
  return new KubeApiError(e?.cause?.message ?? e?.message ?? String(err), undefined, code);
}

/**
 * A 2xx answer that is not what the API server sends: reason `InvalidResponse`, so the call counts as failed
 * (warned, retried), never as done.
 */
function invalidResponse(
  verb: 'GET' | 'DELETE',
  code: number,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): KubeApiError {
  return new KubeApiError(
    `${verb} answered ${code} without a ${verb === 'GET' ? 'pod object' : 'pod or Status object'} (content-type ${String(headers['content-type'] ?? 'none')})`,
    code,
    'InvalidResponse',
  );
}

/**
 * True for what kube-apiserver answers a successful pod DELETE with: the pod (being deleted, or as it was) or
 * a Status that is not a failure (k8s.io/apiserver `DeleteResource`: the object, or `Status{status: Success}`).
 * The body is parsed only when its content-type is JSON (src/kube/kube-http.ts): an HTML page stays a string.
 */
export function isDeleteAnswer(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const o = body as { kind?: unknown; status?: unknown };
  return o.kind === 'Pod' || (o.kind === 'Status' && o.status !== 'Failure');
}

const podPath = (namespace: string, name: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`;

/** Creates the pod API of one context. */
export function createPodApi(opts: PodApiOptions): PodApi {
  const { http } = opts;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const answerGraceMs = Math.min(timeoutMs, opts.answerGraceMs ?? DELETE_ANSWER_GRACE_MS);
  const now = opts.now ?? systemClock;
  const withTimeout = (signal: AbortSignal | undefined) =>
    signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);

  /**
   * Sends one request under the observer, which starts as the request leaves (after the auth headers and
   * `beforeSend`); resolves with the answer, rejects with a KubeApiError, the abort reason, or what
   * `beforeSend` threw (as is: the request never left).
   */
  const send = async (
    call: PodCall,
    signal: AbortSignal | undefined,
    options: Omit<KubeRequestOptions, 'signal' | 'beforeSend'>,
    beforeSend?: () => void,
  ) => {
    let end: ReturnType<PodCallObserver['start']> | undefined;
    let vetoed: { err: unknown } | undefined;
    try {
      const res = await http.request(call.verb, podPath(call.namespace, call.pod), {
        ...options,
        signal: withTimeout(signal),
        beforeSend: () => {
          try {
            beforeSend?.();
          } catch (err) {
            vetoed = { err };
            throw err;
          }
          end = opts.observer?.start(call);
        },
      });
      end?.(
        res.statusCode,
        res.statusCode >= 400 ? statusError(res.statusCode, res.body, res.headers, now()) : undefined,
      );
      return res;
    } catch (err) {
      if (vetoed) throw vetoed.err; // the request never left
      const mapped = toKubeApiError(err, signal);
      end?.(undefined, mapped);
      throw mapped;
    }
  };

  return {
    async get(namespace, name, signal) {
      await opts.limiter.take(signal);
      const res = await send({ verb: 'GET', namespace, pod: name }, signal, {});
      if (res.statusCode === 404) return undefined;
      if (res.statusCode >= 300) throw statusError(res.statusCode, res.body, res.headers, now());
      const pod = trimPod(res.body);
      // A 2xx that is not a pod (an HTML page from a proxy, say) must not read as "re-created": fail the GET.
      if (!pod.metadata?.uid) throw invalidResponse('GET', res.statusCode, res.headers);
      return pod;
    },
    async delete(namespace, name, preconditions, signal, gates = {}) {
      await opts.limiter.take(signal);
      signal?.throwIfAborted();
      await gates.afterWait?.();
      signal?.throwIfAborted();
      // The caller's abort cancels the DELETE until it leaves; after that, its answer gets answerGraceMs more.
      const cut = new AbortController();
      let left = false;
      let grace: NodeJS.Timeout | undefined;
      const onAbort = () => {
        if (!left) cut.abort(signal?.reason);
        else
          grace ??= setTimeout(() => cut.abort(new DeleteAnswerAbandonedError(answerGraceMs)), answerGraceMs);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      let res: Awaited<ReturnType<typeof send>>;
      try {
        res = await send(
          { verb: 'DELETE', namespace, pod: name, ...preconditions },
          cut.signal,
          { body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions } },
          () => {
            gates.beforeSend?.();
            left = true;
          },
        );
      } finally {
        signal?.removeEventListener('abort', onAbort);
        clearTimeout(grace);
      }
      if (res.statusCode === 404) return 'not-found';
      if (res.statusCode === 409) return 'conflict';
      if (res.statusCode >= 300) throw statusError(res.statusCode, res.body, res.headers, now());
      // A 2xx from something in front of the API server (an auth proxy's login page) deleted nothing: counted
      // as accepted, the job would complete and the pod stay for a day. The API answers with the pod or a
      // Status; anything else is a failed DELETE, retried.
      if (!isDeleteAnswer(res.body)) throw invalidResponse('DELETE', res.statusCode, res.headers);
      return 'accepted';
    },
  };
}
