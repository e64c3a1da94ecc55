/**
 * How to reach and authenticate to one context's API server: what a kubeconfig context (or the in-cluster
 * service account) resolves to. Built by `loadClusterAccess` (src/kube/kubeconfig.ts), used by the HTTP
 * transport (src/kube/kube-http.ts).
 */

/** TLS settings of the connection, as node:tls `connect` options. */
export interface ClusterTls {
  /** CA bundle (PEM); undefined → the system's CAs. */
  readonly ca?: Buffer;
  /** Client certificate and key (PEM), for certificate authentication. */
  readonly cert?: Buffer;
  readonly key?: Buffer;
  /** false for `insecure-skip-tls-verify: true`; undefined otherwise (Node's default, verify). */
  readonly rejectUnauthorized?: boolean;
  /** `tls-server-name`: the name to verify the server's certificate against. */
  readonly servername?: string;
}

/** One context's API server and credentials. */
export interface ClusterAccess {
  /** The context's name (`in-cluster` for the service account). */
  readonly context: string;
  /** The API server URL (`https://host:port[/path]`), no trailing slash. */
  readonly server: string;
  readonly tls: ClusterTls;
  /** `proxy-url` of the cluster (http/https proxies), when set. */
  readonly proxyUrl?: string;
  /**
   * Headers that authenticate the next request (lower-case names: `authorization: Bearer …` / `Basic …`,
   * `impersonate-user`; `impersonate-group` and `impersonate-extra-*` are lists: one header line per value).
   * Re-reads token files and re-runs exec credential plugins when their token expires, so call it per request.
   * Rejects when a credential plugin fails (the message names the plugin and its error).
   */
  headers(): Promise<Record<string, string | string[]>>;
  /**
   * Told that the API server answered 401 Unauthorized: drop cached credentials (an exec plugin's token is
   * fetched again, a token file re-read) so the next {@link headers} call gets fresh ones.
   */
  unauthorized?(): void;
}
