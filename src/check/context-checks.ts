/**
 * The checks of one Kubernetes context: reachable, TLS, the server's version, its clock against ours, the
 * credentials, and — per target namespace — the permissions the replicas need, asked with
 * `SelfSubjectAccessReview` (src/check/access-review.ts), never by trying a DELETE:
 *
 * - namespace-scope informers (`informerScope: namespace`): `get`, `list`, `watch`, `delete` on pods in each
 *   target namespace (infra/k8s/overlays/example/targets/target-namespaces.yaml);
 * - `informerScope: cluster`: `list`, `watch` on pods at the cluster scope, `get`, `delete` per namespace
 *   (infra/k8s/overlays/cluster-scope);
 * - discovered namespaces (`context:*`): `list`, `watch` on namespaces at the cluster scope, then the above for
 *   each namespace the selector matches now (infra/k8s/overlays/namespace-discovery).
 *
 * A context that does not answer gets `unreachable` and its other checks are skipped.
 *
 * One file, long, because every check of one context (API reachable, version, access reviews per verb, clock skew)
 * shares its client and its result list, and reads in the order `check` prints them.
 */

import { type CheckResult, firstLine, resultsOf } from '../check-result.ts';
import type { ClusterAccess } from '../kube/cluster-access.ts';
import type { KubeHttp } from '../kube/kube-http.ts';
import type { RateLimiter } from '../kube/rate-limiter.ts';
import { type AccessAnswer, type AccessAttributes, reviewAccess } from './access-review.ts';
import { provenSkewMs } from './clock-skew.ts';

/** Above this many namespaces whose permissions all pass, they share one line (failures keep one each). */
export const MAX_LINES_PER_NAMESPACE = 10;

/** The oldest Kubernetes minor the deployment supports (README, "Prerequisites"). */
export const MIN_KUBERNETES = { major: 1, minor: 27 } as const;

/** One context, opened: its access (server, TLS), transport and rate limiter. */
export interface OpenedContext {
  readonly access: ClusterAccess;
  readonly http: KubeHttp;
  readonly limiter: RateLimiter;
}

/** What the replicas need of one context. */
export interface ContextNeeds {
  /** The fixed target namespaces of this context. */
  readonly namespaces: readonly string[];
  readonly informerScope: 'namespace' | 'cluster';
  /** With a `context:*` target: the label selector of the namespaces it cleans. */
  readonly namespaceSelector?: string;
}

/** Options of {@link checkContext}. */
export interface ContextCheckOptions {
  /** Largest proven clock skew accepted, ms. */
  readonly maxClockSkewMs: number;
  /** How long each request may take, ms. */
  readonly timeoutMs: number;
  /** Our wall clock, epoch ms. */
  readonly now: () => number;
}

/** The version `/version` reports, parsed (`minor` may carry a `+`, as managed clusters report it). */
export function parseServerVersion(body: unknown): { major: number; minor: number; git: string } | undefined {
  const b = body as { major?: unknown; minor?: unknown; gitVersion?: unknown } | undefined;
  const major = Number.parseInt(String(b?.major ?? ''), 10);
  const minor = Number.parseInt(String(b?.minor ?? ''), 10);
  if (!Number.isInteger(major) || !Number.isInteger(minor)) return undefined;
  return { major, minor, git: typeof b?.gitVersion === 'string' ? b.gitVersion : `v${major}.${minor}` };
}

/** How a request failed before any answer: TLS refused, credentials unavailable, or no answer at all. */
export function transportFailure(err: unknown): {
  kind: 'tls' | 'credentials' | 'unreachable';
  text: string;
} {
  const e0 = err as { name?: unknown; message?: unknown; cause?: { name?: unknown } } | undefined;
  if (e0?.name === 'TimeoutError' || e0?.cause?.name === 'TimeoutError')
    return { kind: 'unreachable', text: 'timed out' };
  const seen = new Set<unknown>();
  let e: unknown = err;
  const parts: string[] = [];
  while (e && !seen.has(e)) {
    seen.add(e);
    const x = e as { code?: unknown; message?: unknown; name?: unknown; cause?: unknown };
    parts.push(
      `${typeof x.code === 'string' ? `${x.code} ` : ''}${typeof x.message === 'string' ? x.message : ''}`,
    );
    e = x.cause;
  }
  const text = parts.join(': ').replace(/\s+/g, ' ').trim();
  if (/CERT|certificate|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL|self.signed|alert/i.test(text))
    return { kind: 'tls', text };
  if (/credential plugin|exec plugin|token file|\bexec\b.*(failed|exited)/i.test(text))
    return { kind: 'credentials', text };
  return { kind: 'unreachable', text: text || 'no answer' };
}

/** The verbs on pods one namespace needs, and the cluster-scope ones, by informer scope. */
function podVerbs(scope: ContextNeeds['informerScope']): { perNamespace: string[]; clusterWide: string[] } {
  return scope === 'cluster'
    ? { perNamespace: ['get', 'delete'], clusterWide: ['list', 'watch'] }
    : { perNamespace: ['get', 'list', 'watch', 'delete'], clusterWide: [] };
}

/**
 * Runs the checks of one context (see the module comment).
 * @returns one result per check, in the order a reader follows them. Never rejects.
 */
export async function checkContext(
  ctx: OpenedContext,
  needs: ContextNeeds,
  opts: ContextCheckOptions,
): Promise<CheckResult[]> {
  const name = ctx.access.context;
  const r = resultsOf(`context ${name}`);
  const server = ctx.access.server;
  const out: CheckResult[] = [];
  const signal = () => AbortSignal.timeout(opts.timeoutMs);

  // 1. Reachable, TLS, version, clock: one GET /version (served to every authenticated or anonymous user).
  const sentAtMs = opts.now();
  const started = performance.now();
  let version: Awaited<ReturnType<KubeHttp['request']>>;
  try {
    await ctx.limiter.take();
    version = await ctx.http.request('GET', '/version', { signal: signal() });
  } catch (err) {
    const f = transportFailure(err);
    const later = 'skipped: the API server did not answer';
    if (f.kind === 'tls')
      out.push(
        r.fail('context.tls', `TLS: ${server} refused: ${f.text}`, {
          fix: "the kubeconfig's certificate-authority(-data) must hold the CA that signed the API server's certificate, and tls-server-name match it",
          details: { server },
        }),
      );
    else if (f.kind === 'credentials')
      out.push(
        r.fail('context.auth', `credentials: none could be obtained: ${f.text}`, {
          fix: "fix the kubeconfig user's credential plugin or token file (kubectl --context with the same kubeconfig shows the same error)",
        }),
      );
    else
      out.push(
        r.unreachable(
          'context.reachable',
          `reachable: ${server} does not answer${f.text === 'timed out' ? ` within ${opts.timeoutMs} ms` : `: ${f.text}`}`,
          {
            fix: "check the kubeconfig's server address, and that the NetworkPolicy lets the pods reach the API server (443/6443)",
            details: { server, timeoutMs: opts.timeoutMs },
          },
        ),
      );
    out.push(r.skip('context.permissions', `permissions: ${later}`));
    return out;
  }
  const receivedAtMs = opts.now();
  const elapsedMs = Math.round(performance.now() - started);
  if (version.statusCode === 401) {
    out.push(
      r.fail('context.auth', 'credentials: the API server refused them (401 Unauthorized)', {
        fix: "the kubeconfig user's token or certificate is expired, revoked or for another cluster; in a pod, the ServiceAccount token is mounted (automountServiceAccountToken)",
      }),
    );
    out.push(r.skip('context.permissions', 'permissions: skipped: the credentials were refused'));
    return out;
  }
  out.push(
    r.pass('context.reachable', `reachable: ${server} answered GET /version in ${elapsedMs} ms`, {
      details: { server, elapsedMs },
    }),
  );
  if (server.startsWith('http:'))
    out.push(
      r.warn('context.tls', 'TLS: none (http://): credentials and pods travel unencrypted', {
        fix: "use the API server's https:// address",
      }),
    );
  else if (ctx.access.tls.rejectUnauthorized === false)
    out.push(
      r.warn('context.tls', "TLS: the server's certificate is not verified (insecure-skip-tls-verify)", {
        fix: "set the cluster's certificate-authority(-data) instead of insecure-skip-tls-verify",
      }),
    );
  else out.push(r.pass('context.tls', "TLS: the API server's certificate is verified"));

  const v = version.statusCode === 200 ? parseServerVersion(version.body) : undefined;
  if (!v)
    out.push(
      r.warn('context.version', `version: /version answered ${version.statusCode} without a version`, {
        fix: `make sure the server runs Kubernetes ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor} or later`,
      }),
    );
  else if (
    v.major < MIN_KUBERNETES.major ||
    (v.major === MIN_KUBERNETES.major && v.minor < MIN_KUBERNETES.minor)
  )
    out.push(
      r.fail(
        'context.version',
        `version: Kubernetes ${v.git} is older than ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor}`,
        {
          fix: `upgrade the cluster to ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor} or later (README, "Prerequisites")`,
          details: { gitVersion: v.git },
        },
      ),
    );
  else
    out.push(
      r.pass(
        'context.version',
        `version: Kubernetes ${v.git} (${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor} or later)`,
        {
          details: { gitVersion: v.git },
        },
      ),
    );

  const skewMs = provenSkewMs({ dateHeader: version.headers.date, sentAtMs, receivedAtMs });
  if (skewMs === undefined)
    out.push(r.warn('context.clock', 'clock: the answer had no Date header; the skew is unknown'));
  else if (Math.abs(skewMs) > opts.maxClockSkewMs)
    out.push(
      r.fail(
        'context.clock',
        `clock: the API server's clock is at least ${(Math.abs(skewMs) / 1000).toFixed(1)} s ${skewMs > 0 ? 'ahead of' : 'behind'} ours (at most ${opts.maxClockSkewMs / 1000} s accepted)`,
        {
          fix: 'synchronize this host and the cluster with NTP (chrony, systemd-timesyncd): deadlines are Kubernetes timestamps, and a skewed replica deletes late or, when the server is skewed too, early',
          details: { skewMs, maxClockSkewMs: opts.maxClockSkewMs },
        },
      ),
    );
  else
    out.push(
      r.pass(
        'context.clock',
        `clock: within ${Math.max(1, Math.ceil(Math.abs(skewMs) / 1000))} s of ours (at most ${opts.maxClockSkewMs / 1000} s accepted)`,
        {
          details: { skewMs, maxClockSkewMs: opts.maxClockSkewMs },
        },
      ),
    );

  // 2. Credentials and permissions: SelfSubjectAccessReviews.
  const ask = (attrs: AccessAttributes) => reviewAccess(ctx.http, ctx.limiter, attrs, opts.timeoutMs);
  let first: AccessAnswer;
  try {
    first = await ask({ verb: 'get', resource: 'pods', namespace: needs.namespaces[0] ?? '' });
  } catch (err) {
    out.push(
      r.unreachable(
        'context.auth',
        `credentials: the access review got no answer: ${transportFailure(err).text}`,
        {
          fix: 'the API server stopped answering: check it and the network, then run check again',
        },
      ),
    );
    return out;
  }
  if (!first.answered) {
    out.push(
      first.code === 401
        ? r.fail('context.auth', 'credentials: the API server refused them (401 Unauthorized)', {
            fix: "the kubeconfig user's token or certificate is expired, revoked or for another cluster",
          })
        : r.fail(
            'context.auth',
            `credentials: the access review was refused (${first.code}: ${first.message})`,
            {
              fix: 'the identity needs to create selfsubjectaccessreviews (the system:basic-user ClusterRole every authenticated user has)',
            },
          ),
    );
    return out;
  }
  out.push(r.pass('context.auth', 'credentials: accepted (a SelfSubjectAccessReview was answered)'));

  const { perNamespace, clusterWide } = podVerbs(needs.informerScope);
  const refusedOf = async (checks: { verb: string; resource: string; namespace: string }[]) => {
    const answers = await Promise.all(checks.map((c) => ask(c).catch((err: unknown) => err as Error)));
    const errors = answers.filter((a): a is Error => a instanceof Error);
    if (errors.length > 0) throw errors[0];
    return checks.filter((_, i) => {
      const a = answers[i] as AccessAnswer;
      return !(a.answered && a.allowed);
    });
  };
  try {
    let namespaces = [...needs.namespaces];
    if (needs.namespaceSelector !== undefined) {
      const refused = await refusedOf(
        ['list', 'watch'].map((verb) => ({ verb, resource: 'namespaces', namespace: '' })),
      );
      if (refused.length > 0)
        out.push(
          r.fail(
            'context.permissions',
            `permissions: ${refused.map((c) => c.verb).join(', ')} on namespaces at the cluster scope refused: discovered namespaces (${name}:*) cannot be found`,
            {
              fix: 'bind the ClusterRole of infra/k8s/overlays/namespace-discovery (list, watch on namespaces) to the cleaner',
              details: { refused: refused.map((c) => c.verb), resource: 'namespaces' },
            },
          ),
        );
      else {
        const found = await discoveredNamespaces(ctx, needs.namespaceSelector, opts.timeoutMs);
        out.push(
          r.pass(
            'context.discovery',
            `discovery: ${found.length} namespace${found.length === 1 ? '' : 's'} match ${needs.namespaceSelector}${found.length > 0 ? ` (${found.slice(0, 5).join(', ')}${found.length > 5 ? ', …' : ''})` : ''}`,
            { details: { namespaceSelector: needs.namespaceSelector, namespaces: found } },
          ),
        );
        namespaces = [...new Set([...namespaces, ...found])];
      }
    }
    if (clusterWide.length > 0) {
      const refused = await refusedOf(clusterWide.map((verb) => ({ verb, resource: 'pods', namespace: '' })));
      out.push(
        refused.length > 0
          ? r.fail(
              'context.permissions',
              `permissions: ${refused.map((c) => c.verb).join(', ')} on pods at the cluster scope refused (informerScope: cluster)`,
              {
                fix: 'bind the ClusterRole of infra/k8s/overlays/cluster-scope (list, watch on pods) to the cleaner, or set informerScope: namespace',
                details: { refused: refused.map((c) => c.verb), namespace: '' },
              },
            )
          : r.pass(
              'context.permissions',
              `permissions at the cluster scope: ${clusterWide.join(', ')} on pods`,
            ),
      );
    }
    const perTarget = await Promise.all(
      namespaces.map(async (namespace) => ({
        namespace,
        refused: await refusedOf(perNamespace.map((verb) => ({ verb, resource: 'pods', namespace }))),
      })),
    );
    // One line per namespace, in order; when many all pass (hundreds of targets), they share one line.
    const allowed = perTarget.filter((t) => t.refused.length === 0).map((t) => t.namespace);
    const verbs = `${perNamespace.join(', ')} on pods`;
    const grouped = allowed.length > MAX_LINES_PER_NAMESPACE;
    for (const { namespace, refused } of perTarget) {
      if (refused.length > 0)
        out.push(
          r.fail(
            'context.permissions',
            `permissions in ${namespace}: ${refused.map((c) => c.verb).join(', ')} on pods refused (SelfSubjectAccessReview)`,
            {
              fix: `grant ${verbs} in ${namespace} to the cleaner's identity: a Role and RoleBinding per target namespace (infra/k8s/overlays/example/targets/target-namespaces.yaml)`,
              details: { namespace, refused: refused.map((c) => c.verb), needed: perNamespace },
            },
          ),
        );
      else if (!grouped)
        out.push(
          r.pass('context.permissions', `permissions in ${namespace}: ${verbs}`, {
            details: { namespace, needed: perNamespace },
          }),
        );
    }
    if (grouped)
      out.push(
        r.pass(
          'context.permissions',
          `permissions in ${allowed.length} target namespaces (${allowed.slice(0, 3).join(', ')}, …): ${verbs}`,
          { details: { namespaces: allowed, needed: perNamespace } },
        ),
      );
  } catch (err) {
    out.push(
      r.unreachable(
        'context.permissions',
        `permissions: the API server stopped answering: ${firstLine(err)}`,
        {
          fix: 'check the API server and the network, then run check again',
        },
      ),
    );
  }
  return out;
}

/** The names of the namespaces matching `selector`, sorted. @throws when the list fails. */
async function discoveredNamespaces(
  ctx: OpenedContext,
  selector: string,
  timeoutMs: number,
): Promise<string[]> {
  await ctx.limiter.take();
  const signal = AbortSignal.timeout(timeoutMs);
  const res = await ctx.http.request(
    'GET',
    `/api/v1/namespaces?labelSelector=${encodeURIComponent(selector)}`,
    {
      signal,
    },
  );
  if (res.statusCode !== 200) throw new Error(`listing namespaces answered ${res.statusCode}`);
  const items = (res.body as { items?: { metadata?: { name?: string } }[] })?.items ?? [];
  return items
    .map((i) => i.metadata?.name ?? '')
    .filter(Boolean)
    .sort();
}
