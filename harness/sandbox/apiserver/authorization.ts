/**
 * Authorization as kube-apiserver's RBAC authorizer decides it, from a permission table per bearer token, and
 * the `SelfSubjectAccessReview` endpoint that asks it (authorization.k8s.io/v1,
 * `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, answered 201 with `status.allowed`).
 *
 * - Each token of the table is one user (`name`, e.g. `system:serviceaccount:ns:sa`) with RBAC-style rules:
 *   verbs, resources (`pods`, `pods/status`, `namespaces`; `*` for any) and, for a Role bound in some
 *   namespaces, those namespaces (absent: a ClusterRole bound cluster-wide, which also covers cluster-scoped
 *   requests). A request is allowed when one rule covers its verb, resource and namespace
 *   (rbac/authorizer `RuleAllows`, `VerbMatches`, `ResourceMatches`).
 * - A namespace object is judged in its own namespace, as kube's RequestInfo sets it for
 *   `/api/v1/namespaces/{name}` (a Role in `ns` may get `namespaces` `ns`); the collection is cluster-scoped.
 * - A refusal is kube's 403 Forbidden Status, worded as `forbiddenMessage` (apiserver/endpoints/handlers/
 *   responsewriters `forbiddenMessage`): `pods "x" is forbidden: User "u" cannot delete resource "pods" in API
 *   group "" in the namespace "ns"`.
 * - Discovery, health and `SelfSubjectAccessReview` itself are allowed to every authenticated user, as the
 *   default `system:discovery`, `system:public-info-viewer` and `system:basic-user` ClusterRoles allow them.
 *
 * Without a table every authenticated request is allowed and every review answers `allowed: true`: the
 * sandbox stays as permissive as it was for the tests that do not ask for RBAC.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mediaType, parseJsonBody, readBodyBytes, sendJson } from './http-io.ts';
import { decodeSelfSubjectAccessReview, PROTOBUF_MEDIA_TYPE } from './protobuf.ts';
import { badRequest, KubeStatusError } from './status.ts';

/** One rule of a user's grants: RBAC's `PolicyRule`, bound in `namespaces` (absent: cluster-wide). */
export interface SandboxRule {
  /** Verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`) or `*`. */
  readonly verbs: readonly string[];
  /** Resources (`pods`, `pods/status`, `namespaces`) or `*`; the core group only. */
  readonly resources: readonly string[];
  /** The namespaces a Role is bound in; absent: bound cluster-wide (a ClusterRoleBinding). */
  readonly namespaces?: readonly string[];
}

/** The user a token authenticates as, and its grants. */
export interface SandboxUser {
  /** The user name in Forbidden messages, e.g. `system:serviceaccount:spark-driver-cleaner:spark-driver-cleaner`. */
  readonly name: string;
  readonly rules: readonly SandboxRule[];
}

/** The permission table: bearer token → user. */
export type PermissionTable = Readonly<Record<string, SandboxUser>>;

/** What one request asks to do: the attributes RBAC judges (apiserver's `authorizer.Attributes`). */
export interface RequestAttributes {
  readonly verb: string;
  readonly resource: string;
  /** `status` for `pods/status`; '' otherwise. */
  readonly subresource: string;
  /** '' for a cluster-scoped request. */
  readonly namespace: string;
  /** '' for a collection. */
  readonly name: string;
}

const matches = (allowed: readonly string[], value: string) =>
  allowed.includes('*') || allowed.includes(value);

/** True when `user`'s rules allow `attrs`. Pure. */
export function allows(user: SandboxUser, attrs: RequestAttributes): boolean {
  const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  return user.rules.some(
    (r) =>
      matches(r.verbs, attrs.verb) &&
      matches(r.resources, resource) &&
      (r.namespaces === undefined || (attrs.namespace !== '' && r.namespaces.includes(attrs.namespace))),
  );
}

/**
 * kube's 403 for a refused request (responsewriters.forbiddenMessage, errors.NewForbidden): details name the
 * object and `kind` is the resource.
 */
export function forbidden(user: string, attrs: RequestAttributes): KubeStatusError {
  const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const subject = attrs.name ? `${resource} "${attrs.name}"` : resource;
  const where = attrs.namespace ? ` in the namespace "${attrs.namespace}"` : ' at the cluster scope';
  return new KubeStatusError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `${subject} is forbidden: User "${user}" cannot ${attrs.verb} resource "${resource}" in API group ""${where}`,
    reason: 'Forbidden',
    details: attrs.name ? { name: attrs.name, kind: attrs.resource } : { kind: attrs.resource },
    code: 403,
  });
}

/** The authorization of one server: who a token is, and whether it may make a request. */
export interface Authorization {
  /**
   * The user `authorizationHeader` authenticates, or undefined (401) when a token is required and it does not
   * name one. Without a table or a token every request is anonymous and allowed (`system:anonymous`).
   */
  authenticate(authorizationHeader: string | undefined): SandboxUser | undefined;
  /** @throws KubeStatusError 403 when `user` may not do `attrs` (never without a table). */
  authorize(user: SandboxUser, attrs: RequestAttributes): void;
  /** True when a table decides (else everything is allowed). */
  readonly enforcing: boolean;
}

const EVERYTHING: SandboxUser = { name: 'system:anonymous', rules: [{ verbs: ['*'], resources: ['*'] }] };

/**
 * The authorization of a server started with `token` (the kubeconfig's, optional) and `table` (optional).
 * @throws TypeError when `token` is given with a table that does not name it.
 */
export function createAuthorization(
  token: string | undefined,
  table: PermissionTable | undefined,
): Authorization {
  if (table && token !== undefined && !(token in table))
    throw new TypeError('the sandbox token must be one of the permission table tokens');
  return {
    enforcing: table !== undefined,
    authenticate(header) {
      const given = header?.startsWith('Bearer ') ? header.slice('Bearer '.length) : undefined;
      if (table) return given !== undefined && Object.hasOwn(table, given) ? table[given] : undefined;
      if (token === undefined) return EVERYTHING;
      return given === token ? { ...EVERYTHING, name: 'sandbox' } : undefined;
    },
    authorize(user, attrs) {
      if (table && !allows(user, attrs)) throw forbidden(user.name, attrs);
    },
  };
}

/** The path of the review endpoint. */
export const ACCESS_REVIEW_PATH = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';

interface ReviewSpec {
  resourceAttributes?: {
    namespace?: string;
    verb?: string;
    group?: string;
    resource?: string;
    subresource?: string;
    name?: string;
  };
  nonResourceAttributes?: { path?: string; verb?: string };
}

/**
 * Answers one `SelfSubjectAccessReview` POST: 201 with the review and its `status` (`allowed`, and `reason`
 * as the RBAC authorizer words it), as kube-apiserver's selfsubjectaccessreview REST storage does.
 * Non-resource URLs (discovery, health) are allowed. A group other than the core group is denied (the sandbox
 * serves no other).
 * @throws KubeStatusError 400 for a body that is not a review, 405 for another method.
 */
export async function handleAccessReview(
  req: IncomingMessage,
  res: ServerResponse,
  user: SandboxUser,
  authz: Authorization,
): Promise<void> {
  if (req.method !== 'POST')
    throw new KubeStatusError({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'the server does not allow this method on the requested resource',
      reason: 'MethodNotAllowed',
      details: {},
      code: 405,
    });
  // kubectl auth can-i sends protobuf (a typed clientset); other clients JSON.
  const bytes = await readBodyBytes(req);
  const body = (
    mediaType(req) === PROTOBUF_MEDIA_TYPE
      ? decodeSelfSubjectAccessReview(bytes)
      : parseJsonBody(req, bytes.toString('utf8'), ['application/json', PROTOBUF_MEDIA_TYPE])
  ) as { kind?: string; spec?: ReviewSpec };
  if (typeof body !== 'object' || body === null || typeof body.spec !== 'object' || body.spec === null)
    throw badRequest('the request body must be a SelfSubjectAccessReview with a spec');
  const ra = body.spec.resourceAttributes;
  if (!ra && !body.spec.nonResourceAttributes)
    throw new KubeStatusError({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified]',
      reason: 'Invalid',
      details: { group: 'authorization.k8s.io', kind: 'SelfSubjectAccessReview' },
      code: 422,
    });
  let allowed = true;
  let reason = '';
  if (ra) {
    const attrs: RequestAttributes = {
      verb: ra.verb ?? '',
      resource: ra.resource ?? '',
      subresource: ra.subresource ?? '',
      namespace: ra.namespace ?? '',
      name: ra.name ?? '',
    };
    const coreGroup = (ra.group ?? '') === '';
    allowed = !authz.enforcing || (coreGroup && allows(user, attrs));
    reason = allowed && authz.enforcing ? `RBAC: allowed for user "${user.name}"` : '';
  }
  sendJson(
    res,
    201,
    JSON.stringify({
      kind: 'SelfSubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec: body.spec,
      status: reason ? { allowed, reason } : { allowed },
    }),
  );
}
