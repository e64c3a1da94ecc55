/**
 * Asking the API server what this identity may do, without doing it: a `SelfSubjectAccessReview`
 * (authorization.k8s.io/v1), the request behind `kubectl auth can-i`. The API server runs its authorizers
 * (RBAC, webhooks) on the attributes and answers `status.allowed`; nothing is changed, and no pod is touched.
 * https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access
 */
import type { KubeHttp } from '../kube/kube-http.ts';
import type { RateLimiter } from '../kube/rate-limiter.ts';

/** The attributes of one review: a verb on a core-group resource, in a namespace ('' = cluster scope / all). */
export interface AccessAttributes {
  readonly verb: string;
  readonly resource: string;
  readonly namespace: string;
}

/** The answer of one review. */
export type AccessAnswer =
  | { readonly answered: true; readonly allowed: boolean; readonly reason?: string }
  /** The review itself was refused or failed: `code` is the HTTP status (401: the credentials were refused). */
  | { readonly answered: false; readonly code: number; readonly message: string };

/** The review endpoint (authorization.k8s.io/v1, cluster-scoped). */
export const ACCESS_REVIEW_PATH = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';

/**
 * Asks one review, once the rate limiter lets it go.
 * @param timeoutMs how long the API server has to answer, ms (counted once the request may leave)
 * @param signal aborts the wait and the request (Ctrl-C); optional
 * @throws what the transport throws (network errors, a timeout, the signal's reason): no answer.
 */
export async function reviewAccess(
  http: KubeHttp,
  limiter: RateLimiter,
  attrs: AccessAttributes,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<AccessAnswer> {
  await limiter.take(signal);
  const timeout = AbortSignal.timeout(timeoutMs);
  const res = await http.request('POST', ACCESS_REVIEW_PATH, {
    signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { group: '', ...attrs } },
    },
  });
  const body = res.body as
    | { status?: { allowed?: unknown; reason?: unknown }; message?: unknown }
    | undefined;
  if (res.statusCode === 201 || res.statusCode === 200) {
    const reason =
      typeof body?.status?.reason === 'string' && body.status.reason ? body.status.reason : undefined;
    return { answered: true, allowed: body?.status?.allowed === true, ...(reason ? { reason } : {}) };
  }
  const message = typeof body?.message === 'string' ? body.message : `HTTP ${res.statusCode}`;
  return { answered: false, code: res.statusCode, message };
}
