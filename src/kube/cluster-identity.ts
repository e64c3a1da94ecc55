/**
 * Which cluster a context reaches: the identity every shared name of a target is built from (queues and their
 * keys, elections, membership, metrics, logs; src/queue/job-identity.ts). A context is only how a cluster is
 * reached: inside a pod every context is `in-cluster`, whatever the cluster, and two contexts may reach one
 * cluster. So several clusters can share one Redis, one etcd or one ZooKeeper without sharing a queue or an
 * election.
 *
 * The name is, in this order:
 * - explicit: `clusterNames` (`context=name`) for a named context, or `clusterName` for the default context
 *   (the kubeconfig's current context, or in-cluster without a kubeconfig) — for readable names;
 * - derived from the cluster's CA certificate, which every in-cluster pod (the service account's `ca.crt`) and
 *   every kubeconfig with TLS has: `ca-` and 12 hex digits of the SHA-256 of the oldest certificate of the
 *   bundle (earliest `notBefore`), so that a CA rotation's bundle phase (old and new CA side by side) keeps
 *   the name and only dropping the old CA changes it;
 * - else (no CA: the system's CAs, `insecure-skip-tls-verify`, plain http) derived from the API server URL:
 *   `api-` and 12 hex digits of its SHA-256. In-cluster that URL is the same in every cluster (the `kubernetes`
 *   Service), which is why the CA comes first.
 *
 * Its **fingerprints** (one per CA certificate, or the URL's) tell two clusters given the same explicit name
 * apart (src/cleaner/cluster-claims.ts). Names go into Redis keys, etcd keys, ZooKeeper paths and metric labels:
 * an explicit name is a DNS label (RFC 1123, src/config/schema.ts `CLUSTER_NAME`), as derived names are.
 */
import { createHash, X509Certificate } from 'node:crypto';
import type { ClusterAccess } from './cluster-access.ts';

/** How many hex digits of a SHA-256 a fingerprint and a derived name keep (48 bits). */
const HEX = 12;

/** Where a cluster's name came from. */
export type ClusterNameSource = 'clusterName' | 'clusterNames' | 'certificate-authority' | 'server';

/** A cluster's identity. */
export interface ClusterIdentity {
  /** The name every shared name is built from ({@link CLUSTER_NAME}). */
  readonly name: string;
  /** Where `name` came from: an explicit setting, the CA certificate or the server URL. */
  readonly source: ClusterNameSource;
  /**
   * The cluster's fingerprints, sorted: `ca:<12 hex>` per certificate of its CA bundle, or `server:<12 hex>`
   * of its API server URL when there is no CA. Two sets that share one are the same cluster (a CA rotation
   * shows both CAs for a while).
   */
  readonly fingerprints: readonly string[];
}

/** The explicit cluster names of the configuration (src/config/schema.ts). */
export interface ClusterNaming {
  /** `clusterName`: the name of the default context's cluster. */
  readonly clusterName?: string | undefined;
  /** `clusterNames`: the name of each named context's cluster. */
  readonly clusterNames: readonly { readonly context: string; readonly name: string }[];
}

/** An explicit name and the setting it came from (named in errors). */
export interface ExplicitName {
  readonly name: string;
  readonly field: 'clusterName' | 'clusterNames';
}

const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex').slice(0, HEX);

/** The certificates of a PEM bundle, unreadable blocks skipped (the kubeconfig loader refuses those). */
function certificates(pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
  const out: X509Certificate[] = [];
  for (const block of blocks ?? []) {
    try {
      out.push(new X509Certificate(block));
    } catch {
      // not a certificate: not part of the identity
    }
  }
  return out;
}

/**
 * The identity of the cluster `access` reaches. Pure (reads no file: the CA bundle is in `access`).
 * @param access the context's API server URL and TLS settings (src/kube/kubeconfig.ts `loadClusterAccess`)
 * @param explicit the configured name, if any ({@link explicitClusterName})
 */
export function clusterIdentity(
  access: Pick<ClusterAccess, 'server'> & { readonly tls: { readonly ca?: Buffer } },
  explicit?: ExplicitName,
): ClusterIdentity {
  const certs = access.tls.ca ? certificates(access.tls.ca) : [];
  const byAge = certs
    .map((c) => ({ fp: sha(c.raw), notBefore: new Date(c.validFrom).getTime() }))
    .sort((a, b) => a.notBefore - b.notBefore || (a.fp < b.fp ? -1 : a.fp > b.fp ? 1 : 0));
  const oldest = byAge[0];
  const fingerprints = oldest
    ? [...new Set(byAge.map((c) => `ca:${c.fp}`))].sort()
    : [`server:${sha(access.server)}`];
  if (explicit) return { name: explicit.name, source: explicit.field, fingerprints };
  return oldest
    ? { name: `ca-${oldest.fp}`, source: 'certificate-authority', fingerprints }
    : { name: `api-${sha(access.server)}`, source: 'server', fingerprints };
}

/**
 * The explicit name of `context`'s cluster: `clusterNames` names it, or it is the default context and
 * `clusterName` is set. Both set for one context with different names was refused by the caller
 * ({@link namingConflict}).
 * @param defaultContext the resolved name of the default context (undefined when unknown)
 */
export function explicitClusterName(
  context: string,
  naming: ClusterNaming,
  defaultContext: string | undefined,
): ExplicitName | undefined {
  const named = naming.clusterNames.find((n) => n.context === context);
  if (named) return { name: named.name, field: 'clusterNames' };
  if (naming.clusterName !== undefined && context === defaultContext)
    return { name: naming.clusterName, field: 'clusterName' };
  return undefined;
}

/**
 * Why `clusterName` and `clusterNames` disagree about the default context (both name it, differently), or
 * undefined.
 */
export function namingConflict(naming: ClusterNaming, defaultContext: string): string | undefined {
  const named = naming.clusterNames.find((n) => n.context === defaultContext);
  if (!named || naming.clusterName === undefined || named.name === naming.clusterName) return undefined;
  return (
    `clusterName (--cluster-name, SDC_CLUSTER_NAME) is ${naming.clusterName} and clusterNames ` +
    `(--cluster-names, SDC_CLUSTER_NAMES) names the same context, ${defaultContext} (the default context), ` +
    `${named.name}: a cluster has one name; set one of them`
  );
}

/** How the identity was chosen, for the start line and errors: `clusterName`, `CA certificate ca:…`, … */
export function describeIdentity(id: ClusterIdentity): string {
  switch (id.source) {
    case 'clusterName':
    case 'clusterNames':
      return `${id.name} (set by ${id.source}; fingerprints ${id.fingerprints.join(',')})`;
    case 'certificate-authority':
      return `${id.name} (derived from the CA certificate; fingerprints ${id.fingerprints.join(',')})`;
    default:
      return `${id.name} (derived from the API server URL: no CA certificate)`;
  }
}

/**
 * The fingerprints to claim for a cluster now (src/cleaner/cluster-claims.ts): those it started with, plus
 * those of its CA as `load` reads it now, re-read at most every `everyMs` (a mounted `ca.crt` or kubeconfig is
 * updated in place during a CA rotation: claiming both links the old CA to the new one). A failed read keeps
 * the last answer.
 * @param load reads the context's endpoint again (src/kube/kubeconfig.ts `loadClusterEndpoint`)
 * @param monotonicNow the monotonic clock, ms
 */
export function fingerprintsNow(
  started: ClusterIdentity,
  load: () => Pick<ClusterAccess, 'server'> & { readonly tls: { readonly ca?: Buffer } },
  monotonicNow: () => number,
  everyMs = 30_000,
): () => readonly string[] {
  let last: readonly string[] = started.fingerprints;
  let readAt = monotonicNow();
  return () => {
    if (monotonicNow() - readAt >= everyMs) {
      readAt = monotonicNow();
      try {
        last = [...new Set([...started.fingerprints, ...clusterIdentity(load()).fingerprints])].sort();
      } catch {
        // unreadable now (being replaced): the last answer stands
      }
    }
    return last;
  };
}
