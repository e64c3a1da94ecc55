/**
 * `Status` error bodies exactly as kube-apiserver writes them (k8s.io/apimachinery/pkg/api/errors):
 * `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":…,"reason":…,"details":…,"code":…}`.
 * Clients (client-node's ApiException.body, kubectl) parse these, so field order and wording matter.
 */

/** The `details` of a Status: which object the failure is about. */
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: { reason?: string; message?: string; field?: string }[];
  retryAfterSeconds?: number;
}

/** A Kubernetes `metav1.Status` body with `status: "Failure"`. */
export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  /** ListMeta: empty, except the `continue` token of a 410 on a paged list. */
  metadata: { continue?: string };
  status: 'Failure';
  message: string;
  reason: string;
  details?: StatusDetails;
  code: number;
}

/**
 * An API failure that the HTTP layer turns into a Status response with `status.code` as HTTP code.
 * Thrown by the pod store (in-process callers see it too) and by request parsing.
 */
export class KubeStatusError extends Error {
  override name = 'KubeStatusError';
  readonly status: KubeStatus;
  /** Extra response headers, e.g. `Retry-After` for 429. */
  readonly headers: Record<string, string>;
  constructor(status: KubeStatus, headers: Record<string, string> = {}) {
    super(status.message);
    this.status = status;
    this.headers = headers;
  }
  get code(): number {
    return this.status.code;
  }
}

function status(code: number, reason: string, message: string, details?: StatusDetails): KubeStatus {
  // Key order as kube-apiserver marshals metav1.Status: details (when present) comes before code.
  return details === undefined
    ? { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }
    : { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code };
}

/** 404 `pods "x" not found` (errors.NewNotFound). */
export function notFound(name: string, resource = 'pods'): KubeStatusError {
  return new KubeStatusError(
    status(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource }),
  );
}

/** 409 `pods "x" already exists` (errors.NewAlreadyExists); `resource` names another resource. */
export function alreadyExists(name: string, resource = 'pods'): KubeStatusError {
  return new KubeStatusError(
    status(409, 'AlreadyExists', `${resource} "${name}" already exists`, { name, kind: resource }),
  );
}

/**
 * 409 Conflict (errors.NewConflict). `resource` is `Pod` for delete preconditions: rest.BeforeDelete
 * builds the GroupResource from the object's Kind, so kube-apiserver really says `on Pod "x"` there,
 * and `pods` for update conflicts.
 */
export function conflict(name: string, reason: string, resource = 'pods'): KubeStatusError {
  return new KubeStatusError(
    status(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": ${reason}`, {
      name,
      kind: resource,
    }),
  );
}

/** 400 BadRequest with a free message (malformed body, bad selector, bad query value). */
export function badRequest(message: string): KubeStatusError {
  return new KubeStatusError(status(400, 'BadRequest', message));
}

/** 422 Invalid (errors.NewInvalid) for a pod that fails validation. */
export function invalid(name: string, field: string, message: string): KubeStatusError {
  return new KubeStatusError(
    status(422, 'Invalid', `Pod "${name}" is invalid: ${field}: ${message}`, {
      name,
      kind: 'Pod',
      causes: [{ reason: 'FieldValueInvalid', message, field }],
    }),
  );
}

/** One field error of an options validation (apimachinery's field.Error): its cause type, path and body. */
export interface FieldError {
  /** Cause type: FieldValueForbidden, FieldValueNotSupported, FieldValueInvalid. */
  type: string;
  field: string;
  /** ErrorBody(): `Forbidden: …`, `Unsupported value: "x": supported values: …`. */
  body: string;
}

/**
 * 422 Invalid for query options that fail validation, as handlers/get.go and delete.go answer it:
 * errors.NewInvalid(GroupKind{meta.k8s.io, kind}, "", errs) — `ListOptions.meta.k8s.io "" is invalid: f: …`,
 * several errors aggregated as `[a, b]`, one cause per error.
 */
export function invalidOptions(kind: string, errs: FieldError[]): KubeStatusError {
  const messages = [...new Set(errs.map((e) => `${e.field}: ${e.body}`))];
  const agg = messages.length === 1 ? messages[0] : `[${messages.join(', ')}]`;
  return new KubeStatusError(
    status(422, 'Invalid', `${kind}.meta.k8s.io "" is invalid: ${agg}`, {
      group: 'meta.k8s.io',
      kind,
      causes: errs.map((e) => ({ reason: e.type, message: e.body, field: e.field })),
    }),
  );
}

/**
 * 504 Timeout for a list whose minimum resourceVersion the server has not reached (storage/errors.go
 * NewTooLargeResourceVersionError): `Timeout: Too large resource version: R, current: C`, cause
 * ResourceVersionTooLarge, and `retryAfterSeconds` (1 from the watch cache; 0, omitted, from etcd).
 */
export function tooLargeResourceVersion(requested: number, current: number, retryAfterSeconds: number) {
  return new KubeStatusError(
    status(504, 'Timeout', `Timeout: Too large resource version: ${requested}, current: ${current}`, {
      causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
      ...(retryAfterSeconds > 0 ? { retryAfterSeconds } : {}),
    }),
  );
}

/** 410 Expired for a list read at a compacted resourceVersion (etcd3/store.go interpretListError). */
export function listExpired(): KubeStatusError {
  return new KubeStatusError(status(410, 'Expired', 'The resourceVersion for the provided list is too old.'));
}

/**
 * An error kube-apiserver answers without a Status of its own (responsewriters.ErrorToAPIStatus: code 500,
 * reason "" — omitted — and the error's text), e.g. the watch cache's resourceVersion parse error.
 */
export function unknownError(message: string): KubeStatusError {
  return new KubeStatusError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    code: 500,
  } as unknown as KubeStatus);
}

/** 415 as written by the apiserver's negotiation (UnsupportedMediaType). */
export function unsupportedMediaType(contentType: string): KubeStatusError {
  return new KubeStatusError(
    status(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: ${contentType}`,
    ),
  );
}

/** 404 for a path no handler serves (the generic "could not find the requested resource"). */
export function pathNotFound(): KubeStatusError {
  return new KubeStatusError(status(404, 'NotFound', 'the server could not find the requested resource', {}));
}

/** 405 for a verb the path does not support. */
export function methodNotAllowed(): KubeStatusError {
  return new KubeStatusError(
    status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {}),
  );
}

/** 401 Unauthorized (no or wrong bearer token). */
export function unauthorized(): KubeStatusError {
  return new KubeStatusError(status(401, 'Unauthorized', 'Unauthorized'));
}

/**
 * 410 Expired for a list page whose continue token's resourceVersion has been compacted
 * (etcd3/errors.go `handleCompactedErrorForPaging`, errors.NewResourceExpired): the message says to
 * start a new list, and `metadata.continue` carries a token (`rv: -1`) that reads the rest of the list at
 * the latest resourceVersion — an inconsistent list, which a client that needs a consistent one ignores.
 */
export function continueExpired(inconsistentToken: string): KubeStatusError {
  return new KubeStatusError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: { continue: inconsistentToken },
    status: 'Failure',
    message:
      'The provided continue parameter is too old to display a consistent list result. You can start a new ' +
      'list without the continue parameter, or use the continue token in this response to retrieve the ' +
      'remainder of the results. Continuing with the provided token results in an inconsistent list - ' +
      'objects that were created, modified, or deleted between the time the first chunk was returned and ' +
      'now may show up in the list.',
    reason: 'Expired',
    code: 410,
  });
}

/** 410 Expired: the watch's resourceVersion is older than the retained event window. */
export function expired(requested: number, oldest: number): KubeStatusError {
  return new KubeStatusError(status(410, 'Expired', `too old resource version: ${requested} (${oldest})`));
}

/**
 * The Status an injected fault answers with, worded like the real thing: 403 from RBAC, 429 from
 * API Priority and Fairness (with Retry-After), 500 internal error, 503 unavailable, 409 conflict.
 */
export function faultStatus(
  code: number,
  verb: string,
  namespace: string | undefined,
  name: string | undefined,
  retryAfterSeconds?: number,
): KubeStatusError {
  switch (code) {
    case 401:
      return unauthorized();
    case 403: {
      const where = namespace ? ` in the namespace "${namespace}"` : ' at the cluster scope';
      const subject = name ? `pods "${name}" is forbidden` : 'pods is forbidden';
      return new KubeStatusError(
        status(
          403,
          'Forbidden',
          `${subject}: User "system:serviceaccount:spark:cleaner" cannot ${verb} resource "pods" in API group ""${where}`,
          name ? { name, kind: 'pods' } : { kind: 'pods' },
        ),
      );
    }
    case 409:
      return conflict(
        name ?? '',
        'the object has been modified; please apply your changes to the latest version and try again',
      );
    case 429: {
      const after = retryAfterSeconds ?? 1;
      return new KubeStatusError(
        status(429, 'TooManyRequests', 'Too many requests, please try again later.', {
          retryAfterSeconds: after,
        }),
        { 'Retry-After': String(after) },
      );
    }
    case 500:
      return new KubeStatusError(
        status(500, 'InternalError', 'Internal error occurred: injected fault', {
          causes: [{ message: 'injected fault' }],
        }),
      );
    case 503: {
      const headers: Record<string, string> =
        retryAfterSeconds !== undefined ? { 'Retry-After': String(retryAfterSeconds) } : {};
      return new KubeStatusError(
        status(503, 'ServiceUnavailable', 'The server is currently unable to handle the request', {}),
        headers,
      );
    }
    default:
      return new KubeStatusError(status(code, 'InternalError', `injected fault ${code}`));
  }
}
