/**
 * Kubeconfig loading without @kubernetes/client-node (its import loads every generated API and model; the
 * cost: bench/README.md, "Measurements behind design choices"): one
 * {@link ClusterAccess} per context, following kubectl/client-go (k8s.io/client-go/tools/clientcmd):
 *
 * - `$KUBECONFIG`-style lists (`a:b`) merge as kubectl merges them: the first file to define a cluster, user
 *   or context name wins, and the first file's `current-context` wins. Every listed file must be readable.
 * - Relative paths in a file (`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`, and an
 *   exec `command` containing a `/`) are resolved against the directory of the file that defined them.
 * - Clusters: `server` (`http://` allowed), `certificate-authority(-data)`, `insecure-skip-tls-verify`,
 *   `tls-server-name`, `proxy-url` (http/https only).
 * - Users: `token`, `tokenFile` (re-read at most once a minute, as client-go's cached file token source),
 *   `client-certificate(-data)` + `client-key(-data)` (read at load), `username`/`password` (Basic),
 *   `as`/`as-uid`/`as-groups`/`as-user-extra` (impersonation) and `exec` credential plugins (see
 *   exec-credential.ts; a plugin's client certificate is taken from its run at load only, since the transport
 *   builds its TLS connection pool once). `auth-provider` is not supported (client-go removed gcp and azure
 *   in 1.26): use an exec plugin.
 * - Without a kubeconfig: the in-cluster service account (`KUBERNETES_SERVICE_HOST`/`_PORT`, its token re-read
 *   at most once a minute since bound tokens rotate, its `ca.crt`).
 *
 * As client-go, a user with a token, Basic credentials or a client certificate ignores its exec plugin, and
 * `token` + `tokenFile` prefer the file's content (the token is the fallback while the file is unreadable).
 *
 * One file, long, because kubeconfig merging, context resolution and every credential kind (token, token file,
 * client certificate, exec plugin, in-cluster) follow client-go's one loader.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { createSecureContext } from 'node:tls';
import { parse as parseYaml } from 'yaml';
import { type Clock, type MonotonicClock, monotonicClock, systemClock } from '../clock.ts';
import type { ClusterAccess, ClusterTls } from './cluster-access.ts';
import {
  createExecCredentialSource,
  EXEC_API_VERSIONS,
  type ExecCredentialSource,
  ExecPluginError,
} from './exec-credential.ts';

/** The name we give the in-cluster (service account) context. */
export const IN_CLUSTER_CONTEXT = 'in-cluster';

/** Where a pod's service account is mounted. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Token files (`tokenFile`, the service account's) are re-read at most this often, as client-go. */
export const TOKEN_FILE_REREAD_MS = 60_000;

/** A kubeconfig that cannot be used (unreadable, a missing context, an unsupported setting). Configuration error (exit 2). */
export class KubeconfigError extends Error {
  override name = 'KubeconfigError';
}

/** Options of {@link loadClusterAccess}, for tests. */
export interface LoadClusterAccessOptions {
  /** The in-cluster service account directory (default {@link SERVICE_ACCOUNT_DIR}). */
  serviceAccountDir?: string;
  /** KUBERNETES_SERVICE_HOST/PORT come from here, and exec plugins inherit it (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Wall clock, epoch ms, for exec token expiry times (default the system clock). */
  now?: Clock;
  /**
   * Monotonic clock, ms, for intervals: token-file re-reads and the exec plugin's failure backoff (default the
   * system's monotonic clock).
   */
  monotonicNow?: MonotonicClock;
  /** Exec plugin timeout (default 30 s). */
  execTimeoutMs?: number;
}

/** Where the kubeconfig comes from: an explicit path, `~/.kube/config`, or the in-cluster service account. */
export function kubeconfigPath(explicit: string | undefined): string | undefined {
  if (explicit) return explicit;
  const home = join(homedir(), '.kube', 'config');
  return existsSync(home) ? home : undefined;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One named cluster/user/context and the file (directory) that defined it. */
interface Named {
  readonly body: Obj;
  readonly file: string;
  readonly dir: string;
}

interface Merged {
  clusters: Map<string, Named>;
  users: Map<string, Named>;
  contexts: Map<string, Named>;
  currentContext?: string;
}

const firstLine = (s: string) => s.split('\n')[0] ?? '';

function readKubeconfigFile(file: string): Obj {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KubeconfigError(`--kubeconfig ${file}: cannot load (${firstLine((err as Error).message)})`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new KubeconfigError(
      `--kubeconfig ${file}: cannot load (not valid YAML: ${firstLine((err as Error).message)})`,
    );
  }
  if (doc === null || doc === undefined) return {}; // an empty file is an empty config, as for kubectl
  if (!isObj(doc)) {
    throw new KubeconfigError(
      `--kubeconfig ${file}: cannot load (expected a kubeconfig: a mapping with clusters, users, contexts)`,
    );
  }
  return doc;
}

function addNamed(
  into: Map<string, Named>,
  doc: Obj,
  list: 'clusters' | 'users' | 'contexts',
  item: 'cluster' | 'user' | 'context',
  file: string,
): void {
  const entries = doc[list];
  if (entries === undefined || entries === null) return;
  if (!Array.isArray(entries)) {
    throw new KubeconfigError(`--kubeconfig ${file}: ${list} must be a list of {name, ${item}}`);
  }
  const seen = new Set<string>();
  for (const [i, entry] of entries.entries()) {
    if (!isObj(entry) || typeof entry.name !== 'string' || entry.name === '') {
      throw new KubeconfigError(`--kubeconfig ${file}: ${list}[${i}] has no name; expected {name, ${item}}`);
    }
    const body = entry[item] ?? {};
    if (!isObj(body)) {
      throw new KubeconfigError(
        `--kubeconfig ${file}: ${list}[${i}] ("${entry.name}"): ${item} must be a mapping`,
      );
    }
    if (seen.has(entry.name)) {
      throw new KubeconfigError(
        `--kubeconfig ${file}: ${list} names "${entry.name}" twice; names must be unique`,
      );
    }
    seen.add(entry.name);
    // kubectl's merge: the first file to define a name wins.
    if (!into.has(entry.name)) into.set(entry.name, { body, file, dir: dirname(resolve(file)) });
  }
}

function mergeFiles(files: readonly string[]): Merged {
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const file of files) {
    const doc = readKubeconfigFile(file);
    addNamed(merged.clusters, doc, 'clusters', 'cluster', file);
    addNamed(merged.users, doc, 'users', 'user', file);
    addNamed(merged.contexts, doc, 'contexts', 'context', file);
    const current = doc['current-context'];
    if (current !== undefined && current !== null && typeof current !== 'string') {
      throw new KubeconfigError(`--kubeconfig ${file}: current-context must be a string`);
    }
    if (current && merged.currentContext === undefined) merged.currentContext = current;
  }
  return merged;
}

/** Typed field access with errors naming the field (`where` = `--kubeconfig f: user "u"`). */
function fields(body: Obj, where: string) {
  const str = (key: string): string | undefined => {
    const v = body[key];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new KubeconfigError(`${where}: ${key} must be a string (quote it)`);
    return v;
  };
  const bool = (key: string): boolean => {
    const v = body[key];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw new KubeconfigError(`${where}: ${key} must be true or false`);
    return v;
  };
  const strList = (key: string): string[] => {
    const v = body[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) {
      throw new KubeconfigError(`${where}: ${key} must be a list of strings`);
    }
    return v as string[];
  };
  /** `<key>-data` (base64) or `<key>` (a file, relative to `dir`): both set is an error, as in client-go. */
  const dataOrFile = (key: string, dir: string): Buffer | undefined => {
    const data = str(`${key}-data`);
    const file = str(key);
    if (data !== undefined && file !== undefined) {
      throw new KubeconfigError(`${where}: both ${key} and ${key}-data are set; keep one`);
    }
    if (data !== undefined) {
      if (!/^[A-Za-z0-9+/=\s_-]*$/.test(data)) {
        throw new KubeconfigError(`${where}: ${key}-data is not base64; expected the base64 of a PEM file`);
      }
      return Buffer.from(data, 'base64');
    }
    if (file !== undefined) {
      const path = isAbsolute(file) ? file : resolve(dir, file);
      try {
        return readFileSync(path);
      } catch (err) {
        throw new KubeconfigError(
          `${where}: ${key} ${path}: cannot read (${(err as NodeJS.ErrnoException).code ?? firstLine((err as Error).message)}); fix the path or use ${key}-data`,
        );
      }
    }
    return undefined;
  };
  return { str, bool, strList, dataOrFile };
}

/** Checks a CA bundle: at least one PEM certificate, each parseable. */
function checkCaBundle(pem: Buffer, where: string, field: string): void {
  const blocks = pem.toString('utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
  if (!blocks) throw new KubeconfigError(`${where}: ${field} holds no PEM certificate`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw new KubeconfigError(
        `${where}: ${field} has an unreadable certificate (${(err as Error).message})`,
      );
    }
  }
}

function checkKeyPair(cert: Buffer, key: Buffer, where: string, what: string): void {
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new KubeconfigError(
      `${where}: ${what} are not a usable PEM certificate and key (${(err as Error).message})`,
    );
  }
}

function redactUrl(u: string): string {
  try {
    const url = new URL(u);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return u;
  }
}

interface ResolvedCluster {
  server: string;
  tls: { ca?: Buffer; rejectUnauthorized?: boolean; servername?: string };
  proxyUrl?: string;
  /** spec.cluster of KUBERNETES_EXEC_INFO (client.authentication.k8s.io Cluster). */
  execCluster: Obj;
}

function resolveCluster(name: string, c: Named): ResolvedCluster {
  const where = `--kubeconfig ${c.file}: cluster "${name}"`;
  const f = fields(c.body, where);
  const rawServer = f.str('server');
  if (!rawServer) {
    throw new KubeconfigError(`${where}: no server; set server to the API server's URL (https://host:port)`);
  }
  // client-go defaults a server without a scheme to https.
  const server = (/^[a-z][a-z0-9+.-]*:\/\//i.test(rawServer) ? rawServer : `https://${rawServer}`).replace(
    /\/+$/,
    '',
  );
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeconfigError(`${where}: server ${rawServer} is not a URL; expected https://host[:port]`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new KubeconfigError(
      `${where}: server ${rawServer}: unsupported scheme; expected https:// or http://`,
    );
  }
  const insecure = f.bool('insecure-skip-tls-verify');
  const ca = f.dataOrFile('certificate-authority', c.dir);
  if (ca) {
    if (insecure) {
      throw new KubeconfigError(
        `${where}: insecure-skip-tls-verify is set together with a certificate-authority; remove one (client-go refuses both)`,
      );
    }
    checkCaBundle(ca, where, 'certificate-authority');
  }
  const servername = f.str('tls-server-name');
  const proxy = f.str('proxy-url');
  let proxyUrl: string | undefined;
  if (proxy !== undefined) {
    let p: URL;
    try {
      p = new URL(proxy);
    } catch {
      throw new KubeconfigError(
        `${where}: proxy-url ${redactUrl(proxy)} is not a URL; expected http(s)://host:port`,
      );
    }
    if (p.protocol.startsWith('socks')) {
      throw new KubeconfigError(
        `${where}: proxy-url ${redactUrl(proxy)}: SOCKS proxies are unsupported; use an http:// or https:// proxy, or remove proxy-url`,
      );
    }
    if (p.protocol !== 'http:' && p.protocol !== 'https:') {
      throw new KubeconfigError(
        `${where}: proxy-url ${redactUrl(proxy)}: unsupported scheme ${p.protocol}; expected http:// or https://`,
      );
    }
    proxyUrl = proxy;
  }
  const tls: ResolvedCluster['tls'] = {};
  if (ca) tls.ca = ca;
  if (insecure) tls.rejectUnauthorized = false;
  if (servername) tls.servername = servername;

  const execCluster: Obj = { server };
  if (servername) execCluster['tls-server-name'] = servername;
  if (insecure) execCluster['insecure-skip-tls-verify'] = true;
  if (ca) execCluster['certificate-authority-data'] = ca.toString('base64');
  if (proxyUrl) execCluster['proxy-url'] = proxyUrl;
  if (c.body['disable-compression'] === true) execCluster['disable-compression'] = true;
  const extensions = c.body.extensions;
  if (Array.isArray(extensions)) {
    const ext = extensions.find((e) => isObj(e) && e.name === 'client.authentication.k8s.io/exec');
    if (isObj(ext) && ext.extension !== undefined) execCluster.config = ext.extension;
  }
  return { server, tls, proxyUrl, execCluster };
}

/** Reads a token file: trimmed, non-empty. */
function readTokenFile(path: string): string {
  const token = readFileSync(path, 'utf8').trim();
  if (!token) throw new Error(`read empty token from file ${path}`);
  return token;
}

/**
 * A token read from `path` at most every {@link TOKEN_FILE_REREAD_MS} (of the monotonic clock `now`), starting
 * from `first` (read at `now()`,
 * or, when `firstIsFallback`, the kubeconfig's `token`: the file is then tried again on the next call). While
 * the file is unreadable the previous token is used, as client-go's cached file token source.
 */
function fileToken(
  path: string,
  first: string,
  now: () => number,
  firstIsFallback = false,
): { current: () => string; stale: () => void } {
  let token = first;
  let readAt = firstIsFallback ? Number.NEGATIVE_INFINITY : now();
  return {
    current: () => {
      if (now() - readAt >= TOKEN_FILE_REREAD_MS) {
        try {
          token = readTokenFile(path);
          readAt = now();
        } catch {
          // keep the previous token; retried on the next call
        }
      }
      return token;
    },
    // A 401: the file may hold a rotated token already; read it on the next call.
    stale: () => {
      readAt = Number.NEGATIVE_INFINITY;
    },
  };
}

/** Escapes a user-extra key for an `Impersonate-Extra-` header name, as client-go (percent-encoding). */
function headerKeyEscape(key: string): string {
  let out = '';
  for (const ch of key) {
    if (/^[!#$&'*+\-.^_`|~0-9A-Za-z]$/.test(ch)) out += ch;
    else for (const b of Buffer.from(ch, 'utf8')) out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

interface ResolvedUser {
  cert?: Buffer;
  key?: Buffer;
  headers(): Promise<Record<string, string | string[]>>;
  /** {@link ClusterAccess.unauthorized}. */
  unauthorized?(): void;
}

function resolveUser(
  name: string | undefined,
  u: Named | undefined,
  cluster: ResolvedCluster,
  opts: Required<Pick<LoadClusterAccessOptions, 'now' | 'monotonicNow' | 'env'>> & { execTimeoutMs?: number },
): ResolvedUser {
  if (!name || !u) return { headers: async () => ({}) }; // a context without a user: anonymous
  const where = `--kubeconfig ${u.file}: user "${name}"`;
  const f = fields(u.body, where);

  const authProvider = u.body['auth-provider'];
  if (authProvider !== undefined && authProvider !== null) {
    const provider =
      isObj(authProvider) && typeof authProvider.name === 'string' ? ` "${authProvider.name}"` : '';
    throw new KubeconfigError(
      `${where}: auth-provider${provider} is not supported (client-go removed the gcp and azure providers in 1.26); ` +
        'use an exec credential plugin instead, e.g. gke-gcloud-auth-plugin (GKE), kubelogin (AKS, OIDC), aws eks get-token (EKS)',
    );
  }

  const staticHeaders: Record<string, string | string[]> = {};
  const as = f.str('as');
  const asUid = f.str('as-uid');
  const asGroups = f.strList('as-groups');
  const extra = u.body['as-user-extra'];
  if (extra !== undefined && extra !== null && !isObj(extra)) {
    throw new KubeconfigError(`${where}: as-user-extra must be a mapping of key: [values]`);
  }
  const extraEntries = Object.entries(extra ?? {});
  if ((asGroups.length > 0 || extraEntries.length > 0 || asUid) && !as) {
    throw new KubeconfigError(
      `${where}: as-groups, as-uid or as-user-extra without as; set as (the user to impersonate)`,
    );
  }
  if (as) staticHeaders['impersonate-user'] = as;
  if (asUid) staticHeaders['impersonate-uid'] = asUid;
  if (asGroups.length > 0) staticHeaders['impersonate-group'] = asGroups;
  for (const [k, v] of extraEntries) {
    const values = Array.isArray(v) ? v : [v];
    if (values.some((s) => typeof s !== 'string')) {
      throw new KubeconfigError(`${where}: as-user-extra.${k} must be a list of strings`);
    }
    staticHeaders[`impersonate-extra-${headerKeyEscape(k).toLowerCase()}`] = values as string[];
  }

  const token = f.str('token');
  const tokenFile = f.str('tokenFile');
  const username = f.str('username');
  const password = f.str('password');
  if ((token || tokenFile) && (username || password)) {
    throw new KubeconfigError(
      `${where}: more than one authentication method (token and username/password); keep one`,
    );
  }
  const cert = f.dataOrFile('client-certificate', u.dir);
  const key = f.dataOrFile('client-key', u.dir);
  if (cert && !key) {
    throw new KubeconfigError(
      `${where}: client-certificate without client-key; set client-key or client-key-data`,
    );
  }
  if (key && !cert) {
    throw new KubeconfigError(
      `${where}: client-key without client-certificate; set client-certificate or client-certificate-data`,
    );
  }
  if (cert && key) checkKeyPair(cert, key, where, 'client-certificate and client-key');

  const withAuth = (authorization: string | undefined) => {
    const h: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(staticHeaders)) h[k] = Array.isArray(v) ? [...v] : v;
    if (authorization) h.authorization = authorization;
    return h;
  };

  if (tokenFile) {
    const path = isAbsolute(tokenFile) ? tokenFile : resolve(u.dir, tokenFile);
    let first: string;
    let fallback = false;
    try {
      first = readTokenFile(path);
    } catch (err) {
      if (!token) {
        const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        throw new KubeconfigError(
          `${where}: tokenFile ${path}: cannot read (${reason}); fix the path or use token`,
        );
      }
      first = token;
      fallback = true;
    }
    const file = fileToken(path, first, opts.monotonicNow, fallback);
    return { cert, key, headers: async () => withAuth(`Bearer ${file.current()}`), unauthorized: file.stale };
  }
  if (token) return { cert, key, headers: async () => withAuth(`Bearer ${token}`) };
  if (username || password) {
    const basic = `Basic ${Buffer.from(`${username ?? ''}:${password ?? ''}`).toString('base64')}`;
    return { cert, key, headers: async () => withAuth(basic) };
  }
  if (cert) return { cert, key, headers: async () => withAuth(undefined) };

  const exec = u.body.exec;
  if (exec === undefined || exec === null) return { headers: async () => withAuth(undefined) };
  const source = execSource(name, u, exec, where, cluster, opts);
  let loaded: { cert?: Buffer; key?: Buffer } = {};
  try {
    const status = source.runSync();
    if (status.clientCertificateData && status.clientKeyData) {
      const pair = {
        cert: Buffer.from(status.clientCertificateData),
        key: Buffer.from(status.clientKeyData),
      };
      checkKeyPair(pair.cert, pair.key, where, "the exec plugin's clientCertificateData and clientKeyData");
      loaded = pair;
    }
  } catch (err) {
    // A missing command is a configuration error; any other failure may pass: headers() retries it.
    if (err instanceof ExecPluginError && err.notFound) {
      throw new KubeconfigError(`--kubeconfig ${u.file}: ${err.message}`);
    }
    if (err instanceof KubeconfigError) throw err;
  }
  return {
    ...loaded,
    unauthorized: () => source.invalidate(),
    headers: async () => {
      const t = await source.token();
      if (!t && !loaded.cert) {
        throw new ExecPluginError(
          `user "${name}": exec plugin ${JSON.stringify(source.command)} returned only a client certificate, ` +
            'which is used only when the plugin succeeds at start; restart the replica',
        );
      }
      return withAuth(t ? `Bearer ${t}` : undefined);
    },
  };
}

function execSource(
  user: string,
  u: Named,
  exec: unknown,
  where: string,
  cluster: ResolvedCluster,
  opts: Required<Pick<LoadClusterAccessOptions, 'now' | 'monotonicNow' | 'env'>> & { execTimeoutMs?: number },
): ExecCredentialSource {
  if (!isObj(exec))
    throw new KubeconfigError(`${where}: exec must be a mapping (command, args, apiVersion, …)`);
  const f = fields(exec, `${where}: exec`);
  const apiVersion = f.str('apiVersion');
  if (!apiVersion) {
    throw new KubeconfigError(
      `${where}: exec.apiVersion is not set; expected one of ${EXEC_API_VERSIONS.join(', ')}`,
    );
  }
  if (!EXEC_API_VERSIONS.includes(apiVersion)) {
    throw new KubeconfigError(
      `${where}: exec.apiVersion ${apiVersion} is not supported; expected one of ${EXEC_API_VERSIONS.join(', ')}`,
    );
  }
  const command = f.str('command');
  if (!command)
    throw new KubeconfigError(`${where}: exec.command is not set; set the credential plugin's command`);
  const args = f.strList('args');
  const rawEnv = exec.env;
  if (rawEnv !== undefined && rawEnv !== null && !Array.isArray(rawEnv)) {
    throw new KubeconfigError(`${where}: exec.env must be a list of {name, value}`);
  }
  const env = (rawEnv ?? []).map((e: unknown, i: number) => {
    if (!isObj(e) || typeof e.name !== 'string' || e.name === '') {
      throw new KubeconfigError(`${where}: exec.env[${i}] has no name; expected {name, value}`);
    }
    if (e.value !== undefined && e.value !== null && typeof e.value !== 'string') {
      throw new KubeconfigError(`${where}: exec.env[${i}] (${e.name}): value must be a string (quote it)`);
    }
    return { name: e.name, value: (e.value as string | undefined) ?? '' };
  });
  const installHint = f.str('installHint');
  const provideClusterInfo = f.bool('provideClusterInfo');
  // client-go defaults interactiveMode to IfAvailable for v1beta1 and requires it for v1.
  const mode = f.str('interactiveMode') ?? (apiVersion.endsWith('/v1beta1') ? 'IfAvailable' : undefined);
  if (mode === undefined) {
    throw new KubeconfigError(
      `${where}: exec.interactiveMode is not set (required by ${apiVersion}); set it to Never (the cleaner has no terminal)`,
    );
  }
  if (mode === 'Always') {
    throw new KubeconfigError(
      `${where}: exec.interactiveMode is Always, but the cleaner never has a terminal; set it to Never or IfAvailable with a plugin that needs no prompt`,
    );
  }
  if (mode !== 'Never' && mode !== 'IfAvailable') {
    throw new KubeconfigError(
      `${where}: exec.interactiveMode ${mode} is not one of Never, IfAvailable, Always`,
    );
  }
  // client-go resolves the command against the kubeconfig's directory only when it is a path, not a PATH lookup.
  const resolvedCommand = command.includes(sep) && !isAbsolute(command) ? resolve(u.dir, command) : command;
  const spec: Obj = { interactive: false };
  if (provideClusterInfo) spec.cluster = cluster.execCluster;
  const execInfo = JSON.stringify({ kind: 'ExecCredential', apiVersion, spec });
  return createExecCredentialSource(
    { user, command: resolvedCommand, args, env, apiVersion, installHint, execInfo },
    { env: opts.env, now: opts.now, monotonicNow: opts.monotonicNow, timeoutMs: opts.execTimeoutMs },
  );
}

/** The in-cluster API server URL and CA (`ca.crt`; absent or unreadable → the system's CAs, as client-go). */
function inClusterEndpoint(opts: LoadClusterAccessOptions): ClusterEndpoint {
  const env = opts.env ?? process.env;
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new KubeconfigError(
      'no kubeconfig and not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set; set --kubeconfig',
    );
  }
  const dir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const tls: ClusterTls = {};
  try {
    const ca = readFileSync(join(dir, 'ca.crt'));
    checkCaBundle(ca, 'in-cluster', 'ca.crt');
    Object.assign(tls, { ca });
  } catch {
    // As client-go: without a readable ca.crt, the system's CAs.
  }
  return {
    context: IN_CLUSTER_CONTEXT,
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    tls,
  };
}

function inClusterAccess(opts: LoadClusterAccessOptions): ClusterAccess {
  const monotonicNow = opts.monotonicNow ?? monotonicClock;
  const endpoint = inClusterEndpoint(opts);
  const dir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const tokenPath = join(dir, 'token');
  let first: string;
  try {
    first = readTokenFile(tokenPath);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new KubeconfigError(
      `in-cluster: cannot read the service account token ${tokenPath} (${reason}); mount one (automountServiceAccountToken) or set --kubeconfig`,
    );
  }
  const file = fileToken(tokenPath, first, monotonicNow);
  return {
    ...endpoint,
    headers: async () => ({ authorization: `Bearer ${file.current()}` }),
    unauthorized: file.stale,
  };
}

/** The context named `context` (undefined: the current one) of the merged files. @throws KubeconfigError */
function pickContext(
  merged: Merged,
  file: string,
  context: string | undefined,
): { readonly name: string; readonly ctx: Named } {
  const known = [...merged.contexts.keys()].join(', ') || '(none)';
  const name = context ?? merged.currentContext;
  if (!name) {
    throw new KubeconfigError(
      `--targets: no context given and ${file} has no current-context; name one (context:namespace), one of: ${known}`,
    );
  }
  const ctx = merged.contexts.get(name);
  if (!ctx) {
    throw new KubeconfigError(`--targets: context "${name}" is not in ${file}; expected one of: ${known}`);
  }
  return { name, ctx };
}

/**
 * The name `context` resolves to (undefined = the kubeconfig's current context, or `in-cluster` when there is
 * no file), read from the files alone: no user is loaded, no credential plugin runs, nothing is contacted.
 * @throws KubeconfigError when a file is unreadable or has no such context (the message lists the known ones).
 */
export function resolveContextName(path: string | undefined, context: string | undefined): string {
  const files = [...new Set((path ?? '').split(':').filter(Boolean))];
  if (files.length === 0) {
    if (context && context !== IN_CLUSTER_CONTEXT) {
      throw new KubeconfigError(`context "${context}": no kubeconfig found (set --kubeconfig or KUBECONFIG)`);
    }
    return IN_CLUSTER_CONTEXT;
  }
  return pickContext(mergeFiles(files), files.join(':'), context).name;
}

/** Where a context's API server is and which CA it presents: what its cluster's identity is derived from. */
export interface ClusterEndpoint {
  readonly context: string;
  readonly server: string;
  readonly tls: ClusterTls;
}

/** A context's entries in the merged files, resolved far enough to know its cluster. */
interface ResolvedContext {
  readonly name: string;
  readonly where: string;
  readonly file: string;
  readonly merged: Merged;
  readonly fields: ReturnType<typeof fields>;
  readonly cluster: ResolvedCluster;
}

/** Resolves `context` (undefined: the current one) to its cluster; undefined when there is no kubeconfig file. */
function resolveContext(path: string | undefined, context: string | undefined): ResolvedContext | undefined {
  const files = [...new Set((path ?? '').split(':').filter(Boolean))];
  if (files.length === 0) {
    if (context && context !== IN_CLUSTER_CONTEXT) {
      throw new KubeconfigError(`context "${context}": no kubeconfig found (set --kubeconfig or KUBECONFIG)`);
    }
    return undefined;
  }
  const file = files.join(':');
  const merged = mergeFiles(files);
  const { name, ctx } = pickContext(merged, file, context);
  const where = `--kubeconfig ${ctx.file}: context "${name}"`;
  const f = fields(ctx.body, where);
  const clusterName = f.str('cluster');
  const knownClusters = [...merged.clusters.keys()].join(', ') || '(none)';
  if (!clusterName)
    throw new KubeconfigError(`${where}: no cluster; set cluster to one of: ${knownClusters}`);
  const clusterEntry = merged.clusters.get(clusterName);
  if (!clusterEntry) {
    throw new KubeconfigError(
      `${where}: cluster "${clusterName}" is not in ${file}; expected one of: ${knownClusters}`,
    );
  }
  return { name, where, file, merged, fields: f, cluster: resolveCluster(clusterName, clusterEntry) };
}

/**
 * Resolves `context` as {@link loadClusterAccess} does, but only to its API server URL and CA: no user, no
 * credential plugin run, no token read. What `status` and `explain` derive a cluster's identity from.
 * @throws KubeconfigError as {@link loadClusterAccess} does for the context and its cluster.
 */
export function loadClusterEndpoint(
  path: string | undefined,
  context: string | undefined,
  options: LoadClusterAccessOptions = {},
): ClusterEndpoint {
  const r = resolveContext(path, context);
  if (!r) return inClusterEndpoint(options);
  return { context: r.name, server: r.cluster.server, tls: r.cluster.tls };
}

/**
 * Resolves `context` (undefined = the kubeconfig's current context, or in-cluster when there is no file) to
 * how to reach and authenticate to its API server. `path` may list several files separated by `:` as
 * $KUBECONFIG does: they are merged as kubectl merges them. An exec plugin runs once here (its client
 * certificate, if any, feeds the TLS settings); when that run fails for another reason than a missing
 * command, `headers()` retries it and rejects with its error.
 * @throws KubeconfigError when a file is unreadable, has no such context (the message lists the known ones),
 *   or the context's cluster or user cannot be used (the message names the field and the fix).
 */
export function loadClusterAccess(
  path: string | undefined,
  context: string | undefined,
  options: LoadClusterAccessOptions = {},
): ClusterAccess {
  const r = resolveContext(path, context);
  if (!r) return inClusterAccess(options);
  const { name, where, file, merged, cluster } = r;
  const f = r.fields;
  const userName = f.str('user');
  const userEntry = userName ? merged.users.get(userName) : undefined;
  if (userName && !userEntry) {
    const knownUsers = [...merged.users.keys()].join(', ') || '(none)';
    throw new KubeconfigError(
      `${where}: user "${userName}" is not in ${file}; expected one of: ${knownUsers}`,
    );
  }
  const user = resolveUser(userName, userEntry, cluster, {
    now: options.now ?? systemClock,
    monotonicNow: options.monotonicNow ?? monotonicClock,
    env: options.env ?? process.env,
    execTimeoutMs: options.execTimeoutMs,
  });
  const tls: ClusterTls = {
    ...cluster.tls,
    ...(user.cert && user.key ? { cert: user.cert, key: user.key } : {}),
  };
  const access: ClusterAccess = {
    context: name,
    server: cluster.server,
    tls,
    headers: user.headers,
    ...(user.unauthorized ? { unauthorized: user.unauthorized } : {}),
  };
  return cluster.proxyUrl ? { ...access, proxyUrl: cluster.proxyUrl } : access;
}
