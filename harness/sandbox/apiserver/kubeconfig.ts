/**
 * Kubeconfig files for sandbox servers: one cluster, user and context per server, named after the
 * context, so two sandbox servers can stand for two clusters in one kubeconfig.
 */
import { stringify } from 'yaml';

/** What a kubeconfig entry needs to know about one server. */
export interface KubeconfigEntry {
  /** Context (and cluster and user) name. */
  contextName: string;
  /** `http://…` or `https://…`. */
  url: string;
  /** PEM CA certificate for HTTPS. */
  caCertPem?: string;
  /** Bearer token, if the server requires one. */
  token?: string;
  /** The context's default namespace. */
  namespace?: string;
}

/**
 * A kubeconfig YAML with one context per entry; `current-context` is `currentContext` or the first.
 * @throws TypeError when `entries` is empty or has duplicate context names.
 */
export function buildKubeconfig(entries: KubeconfigEntry[], currentContext?: string): string {
  const first = entries[0];
  if (!first) throw new TypeError('buildKubeconfig needs at least one entry');
  const names = new Set(entries.map((e) => e.contextName));
  if (names.size !== entries.length) throw new TypeError('buildKubeconfig: context names must be unique');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    preferences: {},
    clusters: entries.map((e) => ({
      name: e.contextName,
      cluster: {
        server: e.url,
        // client-node 2.x refuses plain http:// unless the cluster skips TLS verification.
        ...(e.url.startsWith('http:') ? { 'insecure-skip-tls-verify': true } : {}),
        ...(e.caCertPem ? { 'certificate-authority-data': Buffer.from(e.caCertPem).toString('base64') } : {}),
      },
    })),
    users: entries.map((e) => ({ name: e.contextName, user: e.token ? { token: e.token } : {} })),
    contexts: entries.map((e) => ({
      name: e.contextName,
      context: {
        cluster: e.contextName,
        user: e.contextName,
        ...(e.namespace ? { namespace: e.namespace } : {}),
      },
    })),
    'current-context': currentContext ?? first.contextName,
  });
}
