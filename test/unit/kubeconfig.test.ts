/**
 * Kubeconfig loading without client-node (src/kube/kubeconfig.ts): kubectl's merge of several files,
 * relative paths, every auth kind's headers, token-file re-reads, exec credential plugins (a fake plugin
 * run by this Node binary), in-cluster access, and the configuration errors (exit 2) for what we refuse.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { generateServingCertificate, type ServingCertificate } from '../../harness/sandbox/apiserver/tls.ts';
import { openContexts } from '../../src/kube/context-clients.ts';
import {
  EXEC_FAILURE_BACKOFF_INITIAL_MS,
  EXEC_FAILURE_BACKOFF_MAX_MS,
  execFailureBackoffMs,
  STDERR_DETAIL_MAX_CHARS,
  stderrDetail,
} from '../../src/kube/exec-credential.ts';
import { KubeconfigError, loadClusterAccess, TOKEN_FILE_REREAD_MS } from '../../src/kube/kubeconfig.ts';

let pki: ServingCertificate;
let other: ServingCertificate;
beforeAll(async () => {
  [pki, other] = await Promise.all([
    generateServingCertificate('127.0.0.1'),
    generateServingCertificate('localhost'),
  ]);
});

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'sdc-kubeconfig-'));
}

interface Entries {
  clusters?: Record<string, Record<string, unknown>>;
  users?: Record<string, Record<string, unknown>>;
  contexts?: Record<string, Record<string, unknown>>;
  current?: string;
}

/** Writes a kubeconfig (maps of name → body) to `path`; returns the path. */
function writeKubeconfig(path: string, e: Entries): string {
  const named = (key: string, m: Record<string, Record<string, unknown>> = {}) =>
    Object.entries(m).map(([name, body]) => ({ name, [key]: body }));
  writeFileSync(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: named('cluster', e.clusters),
      users: named('user', e.users),
      contexts: named('context', e.contexts),
      ...(e.current ? { 'current-context': e.current } : {}),
    }),
  );
  return path;
}

/** One context `c` with cluster `c` and user `u` in a new file; returns its path. */
function single(user: Record<string, unknown> | undefined, cluster: Record<string, unknown> = {}): string {
  return writeKubeconfig(join(tempDir(), 'config'), {
    clusters: { c: { server: 'https://127.0.0.1:6443', ...cluster } },
    users: user ? { u: user } : {},
    contexts: { c: { cluster: 'c', ...(user ? { user: 'u' } : {}) } },
    current: 'c',
  });
}

function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(KubeconfigError);
    return (err as Error).message;
  }
  throw new Error('expected a KubeconfigError');
}

describe('loadClusterAccess: files', () => {
  it('merges a KUBECONFIG list as kubectl: the first file to define a name, and the first current-context, win', async () => {
    const dir = tempDir();
    const a = writeKubeconfig(join(dir, 'a.yaml'), {
      clusters: { shared: { server: 'https://a.example:6443' } },
      users: { ua: { token: 'token-a' }, shared: { token: 'shared-from-a' } },
      contexts: { 'ctx-a': { cluster: 'shared', user: 'ua' }, both: { cluster: 'shared', user: 'ua' } },
      current: 'ctx-a',
    });
    const b = writeKubeconfig(join(dir, 'b.yaml'), {
      clusters: {
        shared: { server: 'https://b.example:6443' },
        'cluster-b': { server: 'https://b2.example/' },
      },
      users: { ub: { token: 'token-b' }, shared: { token: 'shared-from-b' } },
      contexts: {
        'ctx-b': { cluster: 'cluster-b', user: 'ub' },
        both: { cluster: 'cluster-b', user: 'ub' },
        'b-on-shared': { cluster: 'shared', user: 'shared' },
      },
      current: 'ctx-b',
    });
    const path = `${a}:${b}`;

    const current = loadClusterAccess(path, undefined);
    expect(current.context).toBe('ctx-a');
    expect(current.server).toBe('https://a.example:6443');
    expect(await current.headers()).toEqual({ authorization: 'Bearer token-a' });

    const fromB = loadClusterAccess(path, 'ctx-b');
    expect(fromB.server).toBe('https://b2.example'); // no trailing slash
    expect(await fromB.headers()).toEqual({ authorization: 'Bearer token-b' });

    // Both files name `both`: a's wins, whole.
    const both = loadClusterAccess(path, 'both');
    expect(both.server).toBe('https://a.example:6443');
    expect(await both.headers()).toEqual({ authorization: 'Bearer token-a' });

    // A context of b naming a cluster and a user both files define gets a's.
    const mixed = loadClusterAccess(path, 'b-on-shared');
    expect(mixed.server).toBe('https://a.example:6443');
    expect(await mixed.headers()).toEqual({ authorization: 'Bearer shared-from-a' });

    // The other order: b's current context and entries win.
    const reversed = loadClusterAccess(`${b}:${a}`, undefined);
    expect(reversed.context).toBe('ctx-b');
    expect(loadClusterAccess(`${b}:${a}`, 'both').server).toBe('https://b2.example');
  });

  it('resolves relative paths against the directory of the file that defined them', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'kube', 'pki'), { recursive: true });
    writeFileSync(join(dir, 'kube', 'pki', 'ca.crt'), pki.cert);
    writeFileSync(join(dir, 'kube', 'pki', 'client.crt'), other.cert);
    writeFileSync(join(dir, 'kube', 'pki', 'client.key'), other.key);
    writeFileSync(join(dir, 'kube', 'token'), 'file-token\n');
    const first = writeKubeconfig(join(dir, 'kube', 'config'), {
      clusters: { c: { server: 'https://127.0.0.1:6443', 'certificate-authority': 'pki/ca.crt' } },
      users: {
        cert: { 'client-certificate': 'pki/client.crt', 'client-key': './pki/client.key' },
        tok: { tokenFile: 'token' },
      },
      contexts: { cert: { cluster: 'c', user: 'cert' }, tok: { cluster: 'c', user: 'tok' } },
      current: 'cert',
    });
    // A second file elsewhere whose context uses the first file's cluster and user.
    const second = writeKubeconfig(join(dir, 'second.yaml'), {
      contexts: { later: { cluster: 'c', user: 'tok' } },
    });
    const access = loadClusterAccess(`${second}:${first}`, 'cert');
    expect(access.tls.ca?.toString()).toBe(pki.cert);
    expect(access.tls.cert?.toString()).toBe(other.cert);
    expect(access.tls.key?.toString()).toBe(other.key);
    expect(await access.headers()).toEqual({});
    const later = loadClusterAccess(`${second}:${first}`, 'later');
    expect(await later.headers()).toEqual({ authorization: 'Bearer file-token' });
    expect(later.tls.ca?.toString()).toBe(pki.cert);
  });

  it('an unknown context lists the known ones; a missing file names --kubeconfig', () => {
    const dir = tempDir();
    const path = writeKubeconfig(join(dir, 'config'), {
      clusters: { c: { server: 'https://x' } },
      contexts: { one: { cluster: 'c' }, two: { cluster: 'c' } },
    });
    expect(configError(() => loadClusterAccess(path, 'three'))).toBe(
      `--targets: context "three" is not in ${path}; expected one of: one, two`,
    );
    expect(configError(() => loadClusterAccess(path, undefined))).toMatch(/no current-context.*one, two/);
    expect(configError(() => loadClusterAccess('/nonexistent/kc.yaml', 'one'))).toMatch(
      /^--kubeconfig \/nonexistent\/kc\.yaml: cannot load \(ENOENT/,
    );
    expect(configError(() => loadClusterAccess(undefined, 'one'))).toBe(
      'context "one": no kubeconfig found (set --kubeconfig or KUBECONFIG)',
    );
    const badRef = writeKubeconfig(join(dir, 'bad-ref'), {
      clusters: { c: { server: 'https://x' } },
      contexts: { ctx: { cluster: 'nope', user: 'ghost' } },
    });
    expect(configError(() => loadClusterAccess(badRef, 'ctx'))).toMatch(
      /cluster "nope" is not in .*expected one of: c/,
    );
    writeFileSync(join(dir, 'broken'), 'clusters: [\n');
    expect(configError(() => loadClusterAccess(join(dir, 'broken'), 'x'))).toMatch(
      /cannot load \(not valid YAML/,
    );
  });

  it('clusters: plain http is allowed; CA data, tls-server-name, insecure-skip-tls-verify and http(s) proxies map to TLS settings', () => {
    const http = loadClusterAccess(single(undefined, { server: 'http://127.0.0.1:8080' }), undefined);
    expect(http.server).toBe('http://127.0.0.1:8080');
    expect(http.tls).toEqual({});
    const tls = loadClusterAccess(
      single(undefined, {
        'certificate-authority-data': Buffer.from(pki.cert).toString('base64'),
        'tls-server-name': 'kubernetes.default',
        'proxy-url': 'http://user:pw@proxy.example:3128',
      }),
      undefined,
    );
    expect(tls.tls.ca?.toString()).toBe(pki.cert);
    expect(tls.tls.servername).toBe('kubernetes.default');
    expect(tls.proxyUrl).toBe('http://user:pw@proxy.example:3128');
    const insecure = loadClusterAccess(single(undefined, { 'insecure-skip-tls-verify': true }), undefined);
    expect(insecure.tls.rejectUnauthorized).toBe(false);
    // A server without a scheme is https, as in client-go.
    expect(loadClusterAccess(single(undefined, { server: '10.0.0.1:6443' }), undefined).server).toBe(
      'https://10.0.0.1:6443',
    );
  });

  it('refuses SOCKS proxies, auth-provider, both CA forms, insecure with a CA, and a server-less cluster, naming the field', () => {
    expect(
      configError(() => loadClusterAccess(single(undefined, { 'proxy-url': 'socks5://p:1080' }), 'c')),
    ).toMatch(
      /cluster "c": proxy-url socks5:\/\/p:1080: SOCKS proxies are unsupported; use an http:\/\/ or https:\/\/ proxy/,
    );
    expect(
      configError(() =>
        loadClusterAccess(single({ 'auth-provider': { name: 'gcp', config: { 'access-token': 'x' } } }), 'c'),
      ),
    ).toMatch(
      /user "u": auth-provider "gcp" is not supported .*exec credential plugin.*gke-gcloud-auth-plugin.*kubelogin/,
    );
    const caData = Buffer.from(pki.cert).toString('base64');
    expect(
      configError(() =>
        loadClusterAccess(
          single(undefined, { 'certificate-authority-data': caData, 'certificate-authority': '/ca' }),
          'c',
        ),
      ),
    ).toMatch(/both certificate-authority and certificate-authority-data are set/);
    expect(
      configError(() =>
        loadClusterAccess(
          single(undefined, { 'certificate-authority-data': caData, 'insecure-skip-tls-verify': true }),
          'c',
        ),
      ),
    ).toMatch(/insecure-skip-tls-verify is set together with a certificate-authority/);
    expect(configError(() => loadClusterAccess(single(undefined, { server: '' }), 'c'))).toMatch(
      /cluster "c": no server; set server/,
    );
    expect(
      configError(() =>
        loadClusterAccess(single(undefined, { 'certificate-authority-data': 'bm90IGEgY2VydA==' }), 'c'),
      ),
    ).toMatch(/certificate-authority holds no PEM certificate/);
    expect(
      configError(() => loadClusterAccess(single({ token: 't', username: 'a', password: 'b' }), 'c')),
    ).toMatch(/more than one authentication method/);
    expect(configError(() => loadClusterAccess(single({ password: 1234 }), 'c'))).toMatch(
      /user "u": password must be a string \(quote it\)/,
    );
    expect(
      configError(() =>
        loadClusterAccess(
          single({ 'client-certificate-data': Buffer.from(pki.cert).toString('base64') }),
          'c',
        ),
      ),
    ).toMatch(/client-certificate without client-key/);
    expect(
      configError(() =>
        loadClusterAccess(
          single({
            'client-certificate-data': Buffer.from(pki.cert).toString('base64'),
            'client-key-data': Buffer.from(other.key).toString('base64'),
          }),
          'c',
        ),
      ),
    ).toMatch(/not a usable PEM certificate and key/);
  });
});

describe('loadClusterAccess: users', () => {
  it('token, Basic, client certificate, anonymous and impersonation headers', async () => {
    expect(await loadClusterAccess(single({ token: 'abc' }), undefined).headers()).toEqual({
      authorization: 'Bearer abc',
    });
    expect(
      await loadClusterAccess(single({ username: 'admin', password: 'p:w' }), undefined).headers(),
    ).toEqual({
      authorization: `Basic ${Buffer.from('admin:p:w').toString('base64')}`,
    });
    const cert = loadClusterAccess(
      single({
        'client-certificate-data': Buffer.from(other.cert).toString('base64'),
        'client-key-data': Buffer.from(other.key).toString('base64'),
      }),
      undefined,
    );
    expect(cert.tls.cert?.toString()).toBe(other.cert);
    expect(cert.tls.key?.toString()).toBe(other.key);
    expect(await cert.headers()).toEqual({});
    expect(await loadClusterAccess(single(undefined), undefined).headers()).toEqual({});
    expect(await loadClusterAccess(single({}), undefined).headers()).toEqual({});
    const impersonating = loadClusterAccess(
      single({
        token: 'abc',
        as: 'jane',
        'as-uid': '42',
        'as-groups': ['dev', 'ops'],
        'as-user-extra': { 'example.com/team': ['a', 'b'], scopes: ['view'] },
      }),
      undefined,
    );
    expect(await impersonating.headers()).toEqual({
      authorization: 'Bearer abc',
      'impersonate-user': 'jane',
      'impersonate-uid': '42',
      'impersonate-group': ['dev', 'ops'],
      'impersonate-extra-example.com%2fteam': ['a', 'b'],
      'impersonate-extra-scopes': ['view'],
    });
    expect(configError(() => loadClusterAccess(single({ 'as-groups': ['dev'] }), 'c'))).toMatch(/without as/);
    // headers() returns a new object each time: callers may add to it.
    const a = loadClusterAccess(single({ token: 'abc' }), undefined);
    expect(await a.headers()).not.toBe(await a.headers());
  });

  it('tokenFile is re-read at most once a minute; the last token read is kept while the file is unreadable', async () => {
    const dir = tempDir();
    const tokenPath = join(dir, 'token');
    writeFileSync(tokenPath, 'one\n');
    let now = 1_000_000;
    const access = loadClusterAccess(single({ tokenFile: tokenPath }), undefined, {
      monotonicNow: () => now,
    });
    expect(await access.headers()).toEqual({ authorization: 'Bearer one' });
    writeFileSync(tokenPath, 'two');
    now += TOKEN_FILE_REREAD_MS - 1;
    expect(await access.headers()).toEqual({ authorization: 'Bearer one' });
    now += 1;
    expect(await access.headers()).toEqual({ authorization: 'Bearer two' });
    rmSync(tokenPath);
    now += TOKEN_FILE_REREAD_MS;
    expect(await access.headers()).toEqual({ authorization: 'Bearer two' });
    writeFileSync(tokenPath, 'three');
    expect(await access.headers()).toEqual({ authorization: 'Bearer three' }); // retried on the next call
    // An unreadable tokenFile at load is a configuration error.
    expect(configError(() => loadClusterAccess(single({ tokenFile: join(dir, 'missing') }), 'c'))).toMatch(
      /user "u": tokenFile .*missing: cannot read \(ENOENT\)/,
    );
    // token + tokenFile: the file wins, the token is the fallback until the file can be read.
    const withFallback = loadClusterAccess(
      single({ token: 'fallback', tokenFile: join(dir, 'later') }),
      undefined,
      { now: () => now },
    );
    expect(await withFallback.headers()).toEqual({ authorization: 'Bearer fallback' });
    writeFileSync(join(dir, 'later'), 'from-file');
    expect(await withFallback.headers()).toEqual({ authorization: 'Bearer from-file' });
    expect(
      await loadClusterAccess(single({ token: 'fallback', tokenFile: tokenPath }), undefined).headers(),
    ).toEqual({
      authorization: 'Bearer three',
    });
  });
});

/**
 * A fake credential plugin. Each run appends to `runs`, saves KUBERNETES_EXEC_INFO as `exec-info-<n>.json`, and
 * acts as `mode` says: ok (token `tok-<n>`, expiring at $EXPIRES), cert (a client certificate), fail (exit 3),
 * sleep (hang).
 */
const PLUGIN = `
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
const dir = process.env.PLUGIN_DIR;
appendFileSync(dir + '/runs', 'x\\n');
const n = readFileSync(dir + '/runs', 'utf8').split('\\n').filter(Boolean).length;
writeFileSync(dir + '/exec-info-' + n + '.json', process.env.KUBERNETES_EXEC_INFO ?? '');
const mode = readFileSync(dir + '/mode', 'utf8').trim();
const apiVersion = JSON.parse(process.env.KUBERNETES_EXEC_INFO).apiVersion;
if (mode === 'fail') {
  process.stderr.write('boom: credentials expired\\nsecond line\\n');
  process.exit(3);
}
if (mode === 'sleep') setTimeout(() => {}, 60_000);
else {
  const status = mode === 'cert'
    ? { clientCertificateData: process.env.CERT, clientKeyData: process.env.KEY }
    : { token: 'tok-' + n, expirationTimestamp: process.env.EXPIRES };
  process.stdout.write(JSON.stringify({ apiVersion, kind: 'ExecCredential', status }));
}
`;

function pluginDir(mode: string): {
  dir: string;
  script: string;
  runs: () => number;
  setMode(m: string): void;
} {
  const dir = tempDir();
  const script = join(dir, 'plugin.mjs');
  writeFileSync(script, PLUGIN);
  writeFileSync(join(dir, 'mode'), mode);
  return {
    dir,
    script,
    runs: () => {
      try {
        return readFileSync(join(dir, 'runs'), 'utf8').split('\n').filter(Boolean).length;
      } catch {
        return 0;
      }
    },
    setMode: (m) => writeFileSync(join(dir, 'mode'), m),
  };
}

const T0 = Date.parse('2030-01-01T00:00:00Z');
const EXPIRES = '2030-01-01T00:05:00Z';

function execUser(dir: string, script: string, extra: Record<string, unknown> = {}) {
  return {
    exec: {
      apiVersion: 'client.authentication.k8s.io/v1',
      command: process.execPath,
      args: [script],
      env: [
        { name: 'PLUGIN_DIR', value: dir },
        { name: 'EXPIRES', value: EXPIRES },
      ],
      interactiveMode: 'Never',
      ...extra,
    },
  };
}

describe('loadClusterAccess: exec credential plugins', () => {
  it('caches the token until shortly before expirationTimestamp; concurrent calls share one run', async () => {
    const p = pluginDir('ok');
    let now = T0;
    const access = loadClusterAccess(single(execUser(p.dir, p.script)), undefined, { now: () => now });
    expect(p.runs()).toBe(1); // at load
    const first = await Promise.all([access.headers(), access.headers(), access.headers()]);
    expect(first).toEqual(Array(3).fill({ authorization: 'Bearer tok-1' }));
    now = Date.parse(EXPIRES) - 11_000;
    expect(await access.headers()).toEqual({ authorization: 'Bearer tok-1' });
    expect(p.runs()).toBe(1);
    now = Date.parse(EXPIRES) - 9_000; // within 10 s of expiry: refreshed
    const second = await Promise.all([access.headers(), access.headers(), access.headers()]);
    expect(second).toEqual(Array(3).fill({ authorization: 'Bearer tok-2' }));
    expect(p.runs()).toBe(2);
    // A 401 (token revoked early): the transport calls unauthorized(); the next call runs the plugin again.
    access.unauthorized?.();
    expect(await access.headers()).toEqual({ authorization: 'Bearer tok-3' });
    expect(p.runs()).toBe(3);
  });

  it('openContexts loads each context once: two targets of one context share its clients and one plugin run', async () => {
    const p = pluginDir('ok');
    const contexts = openContexts(
      {
        targets: [
          { context: undefined, namespace: 'a' },
          { context: undefined, namespace: 'b' },
        ],
        kubeconfig: single(execUser(p.dir, p.script)),
        apiQps: 1,
        apiBurst: 1,
        apiTimeoutMs: 1000,
      },
      { now: () => T0 },
    );
    try {
      expect(p.runs()).toBe(1);
      expect(contexts.targets.map((t) => t.namespace)).toEqual(['a', 'b']);
      expect(contexts.targets[0]?.clients).toBe(contexts.targets[1]?.clients);
    } finally {
      await contexts.close();
    }
  });

  it('KUBERNETES_EXEC_INFO carries the cluster with provideClusterInfo; exec.env reaches the plugin', () => {
    const p = pluginDir('ok');
    const caData = Buffer.from(pki.cert).toString('base64');
    loadClusterAccess(
      single(execUser(p.dir, p.script, { provideClusterInfo: true }), {
        server: 'https://10.1.2.3:6443',
        'certificate-authority-data': caData,
        'tls-server-name': 'api.internal',
        extensions: [{ name: 'client.authentication.k8s.io/exec', extension: { audience: 'sdc' } }],
      }),
      undefined,
      { now: () => T0 },
    );
    const info = JSON.parse(readFileSync(join(p.dir, 'exec-info-1.json'), 'utf8'));
    expect(info).toEqual({
      kind: 'ExecCredential',
      apiVersion: 'client.authentication.k8s.io/v1',
      spec: {
        interactive: false,
        cluster: {
          server: 'https://10.1.2.3:6443',
          'tls-server-name': 'api.internal',
          'certificate-authority-data': caData,
          config: { audience: 'sdc' },
        },
      },
    });
    const q = pluginDir('ok');
    loadClusterAccess(
      single(
        execUser(q.dir, q.script, {
          apiVersion: 'client.authentication.k8s.io/v1beta1',
          interactiveMode: null,
        }),
      ),
      undefined,
      { now: () => T0 },
    );
    expect(JSON.parse(readFileSync(join(q.dir, 'exec-info-1.json'), 'utf8'))).toEqual({
      kind: 'ExecCredential',
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      spec: { interactive: false },
    });
  });

  it('a failing plugin rejects headers() naming the command, its exit code and the first line of stderr', async () => {
    const p = pluginDir('ok');
    let now = T0;
    const access = loadClusterAccess(single(execUser(p.dir, p.script)), undefined, {
      now: () => now,
      monotonicNow: () => now,
    });
    p.setMode('fail');
    now = Date.parse(EXPIRES) - 5_000;
    // Refreshing early failed, but the token has not expired yet: it is still used.
    expect(await access.headers()).toEqual({ authorization: 'Bearer tok-1' });
    now = Date.parse(EXPIRES) + 1;
    const err = await access.headers().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toContain(
      `user "u": exec plugin ${JSON.stringify(process.execPath)} failed with exit code 3`,
    );
    expect(err?.message).toContain('boom: credentials expired');
    expect(err?.message).not.toContain('second line');
    // A failure at load is not a configuration error: headers() reports it, and runs the plugin after the backoff.
    const q = pluginDir('fail');
    let qNow = T0;
    const failing = loadClusterAccess(single(execUser(q.dir, q.script)), undefined, {
      now: () => qNow,
      monotonicNow: () => qNow,
    });
    await expect(failing.headers()).rejects.toThrow(
      /failed with exit code 3: boom: credentials expired \(failed once; retried in 1 s\)$/,
    );
    expect(q.runs()).toBe(1);
    q.setMode('ok');
    qNow = T0 + EXEC_FAILURE_BACKOFF_INITIAL_MS;
    expect(await failing.headers()).toEqual({ authorization: 'Bearer tok-2' });
  });

  it('a failing plugin is not run again during its backoff (1 s doubling, at most 5 min); a success resets it', async () => {
    expect([1, 2, 3, 4, 9, 10, 30].map(execFailureBackoffMs)).toEqual([
      1_000, 2_000, 4_000, 8_000, 256_000, 300_000, 300_000,
    ]);
    expect(EXEC_FAILURE_BACKOFF_MAX_MS).toBe(300_000);
    const p = pluginDir('fail');
    let now = T0;
    const access = loadClusterAccess(single(execUser(p.dir, p.script)), undefined, {
      now: () => now,
      monotonicNow: () => now,
    });
    expect(p.runs()).toBe(1); // failed at load: backoff until T0 + 1 s
    const failed = `user "u": exec plugin ${JSON.stringify(process.execPath)} failed with exit code 3`;
    // The plugin's stderr is in the first message of a failing stretch only: every caller logs what it gets.
    const what = `${failed}, its stderr as reported before`;
    const reject = async (): Promise<string> => {
      const outcomes = await Promise.allSettled([access.headers(), access.headers(), access.headers()]);
      const messages = outcomes.map((o) =>
        o.status === 'rejected' ? (o.reason as Error).message : 'resolved',
      );
      expect(new Set(messages).size).toBe(1);
      return messages[0] ?? '';
    };
    expect(await access.headers().catch((e: Error) => e.message)).toBe(
      `${failed}: boom: credentials expired (failed once; retried in 1 s)`,
    );
    for (let i = 0; i < 5; i++) expect(await reject()).toBe(`${what} (failed once; retried in 1 s)`);
    now = T0 + 999;
    expect(await reject()).toBe(`${what} (failed once; retried in 0.1 s)`);
    expect(p.runs()).toBe(1);
    // The backoff has passed: one run, shared by the concurrent callers, fails; the next backoff is 2 s.
    now = T0 + 1_000;
    expect(await reject()).toBe(`${what} (failed 2 times in a row; retried in 2 s)`);
    expect(p.runs()).toBe(2);
    now += 1_999;
    expect(await reject()).toBe(`${what} (failed 2 times in a row; retried in 0.1 s)`);
    expect(p.runs()).toBe(2);
    now += 1;
    expect(await reject()).toBe(`${what} (failed 3 times in a row; retried in 4 s)`);
    expect(p.runs()).toBe(3);
    now += 3_000;
    expect(await reject()).toBe(`${what} (failed 3 times in a row; retried in 1 s)`);
    expect(p.runs()).toBe(3);
    // The plugin works again: it runs once the backoff has passed, and the success resets the backoff.
    p.setMode('ok');
    expect(await reject()).toContain('(failed 3 times in a row; retried in 1 s)');
    expect(p.runs()).toBe(3);
    now += 1_000;
    expect(await Promise.all([access.headers(), access.headers()])).toEqual(
      Array(2).fill({ authorization: 'Bearer tok-4' }),
    );
    expect(p.runs()).toBe(4);
    p.setMode('fail');
    access.unauthorized?.(); // a 401: the next call runs the plugin, which fails: the backoff starts from 1 s
    // A new failing stretch after a success: its stderr is reported again, once.
    expect(await access.headers().catch((e: Error) => e.message)).toBe(
      `${failed}: boom: credentials expired (failed once; retried in 1 s)`,
    );
    expect(p.runs()).toBe(5);
    expect(await reject()).toBe(`${what} (failed once; retried in 1 s)`);
    expect(p.runs()).toBe(5);
  });

  it('the backoff and tokenFile re-reads run on the monotonic clock: a wall clock stepped back 10 min holds neither', async () => {
    let wall = T0;
    let mono = 0;
    const clocks = { now: () => wall, monotonicNow: () => mono };
    const p = pluginDir('fail');
    const access = loadClusterAccess(single(execUser(p.dir, p.script)), undefined, clocks);
    expect(p.runs()).toBe(1); // failed at load: backoff 1 s
    p.setMode('ok');
    wall -= 600_000;
    mono += 1_000; // the backoff has passed, whatever the wall clock says
    expect(await access.headers()).toEqual({ authorization: 'Bearer tok-2' });
    expect(p.runs()).toBe(2);

    const tokenPath = join(tempDir(), 'token');
    writeFileSync(tokenPath, 'one');
    const file = loadClusterAccess(single({ tokenFile: tokenPath }), undefined, clocks);
    writeFileSync(tokenPath, 'two');
    wall -= 600_000;
    mono += TOKEN_FILE_REREAD_MS;
    expect(await file.headers()).toEqual({ authorization: 'Bearer two' });
  });

  it('during the backoff of an early refresh, the cached token is used until it expires, without running the plugin', async () => {
    const p = pluginDir('ok');
    let now = T0;
    const access = loadClusterAccess(single(execUser(p.dir, p.script)), undefined, {
      now: () => now,
      monotonicNow: () => now,
    });
    p.setMode('fail');
    const expires = Date.parse(EXPIRES);
    now = expires - 5_000; // within 10 s of expiry: refreshed, which fails; backoff until expires - 4 s
    for (let i = 0; i < 3; i++) expect(await access.headers()).toEqual({ authorization: 'Bearer tok-1' });
    expect(p.runs()).toBe(2);
    now = expires - 4_000; // backoff passed: one more run, failing; backoff until expires - 2 s
    expect(await access.headers()).toEqual({ authorization: 'Bearer tok-1' });
    expect(p.runs()).toBe(3);
    now = expires - 2_000; // again: backoff until expires + 2 s
    expect(await access.headers()).toEqual({ authorization: 'Bearer tok-1' });
    expect(p.runs()).toBe(4);
    now = expires; // expired, still in the backoff: the failure, without a run
    await expect(access.headers()).rejects.toThrow(
      /failed with exit code 3: boom: credentials expired \(failed 3 times in a row; retried in 2 s\)$/,
    );
    expect(p.runs()).toBe(4);
  });

  it('a missing command: a configuration error at load, with the installHint; at refresh, headers() rejects with it', async () => {
    const hint = 'Install it with:\n  brew install example-auth-plugin';
    expect(
      configError(() =>
        loadClusterAccess(
          single({
            exec: { ...execUser('/x', '/x').exec, command: '/nonexistent/plugin', installHint: hint },
          }),
          'c',
        ),
      ),
    ).toMatch(
      /user "u": exec plugin "\/nonexistent\/plugin": executable not found; Install it with: brew install example-auth-plugin$/,
    );
    // A relative command with a slash is resolved against the kubeconfig's directory; it disappears after load.
    const p = pluginDir('ok');
    mkdirSync(join(p.dir, 'bin'));
    const wrapper = join(p.dir, 'bin', 'auth.sh');
    writeFileSync(
      wrapper,
      `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(p.script)}\n`,
    );
    chmodSync(wrapper, 0o755);
    const path = writeKubeconfig(join(p.dir, 'config'), {
      clusters: { c: { server: 'https://127.0.0.1:6443' } },
      users: {
        u: {
          exec: { ...execUser(p.dir, p.script).exec, command: './bin/auth.sh', args: [], installHint: hint },
        },
      },
      contexts: { c: { cluster: 'c', user: 'u' } },
      current: 'c',
    });
    let now = T0;
    const access = loadClusterAccess(path, undefined, { now: () => now });
    expect(await access.headers()).toEqual({ authorization: 'Bearer tok-1' });
    rmSync(wrapper);
    now = Date.parse(EXPIRES);
    await expect(access.headers()).rejects.toThrow(
      `user "u": exec plugin ${JSON.stringify(wrapper)}: executable not found; Install it with: brew install example-auth-plugin`,
    );
  });

  it('a hung plugin is killed after the timeout', async () => {
    const p = pluginDir('sleep');
    const access = loadClusterAccess(single(execUser(p.dir, p.script)), undefined, {
      now: () => T0,
      execTimeoutMs: 500,
    });
    await expect(access.headers()).rejects.toThrow(/did not finish within 0.5 s/);
  });

  it('a client certificate from the plugin (at load) feeds the TLS settings', async () => {
    const p = pluginDir('cert');
    const user = execUser(p.dir, p.script);
    user.exec.env.push({ name: 'CERT', value: other.cert }, { name: 'KEY', value: other.key });
    const access = loadClusterAccess(single(user), undefined, { now: () => T0 });
    expect(access.tls.cert?.toString()).toBe(other.cert);
    expect(access.tls.key?.toString()).toBe(other.key);
    expect(await access.headers()).toEqual({});
  });

  it('refuses interactiveMode Always, a v1 plugin without interactiveMode, and an unknown apiVersion', () => {
    const p = pluginDir('ok');
    expect(
      configError(() =>
        loadClusterAccess(single(execUser(p.dir, p.script, { interactiveMode: 'Always' })), 'c'),
      ),
    ).toMatch(/user "u": exec.interactiveMode is Always, but the cleaner never has a terminal/);
    expect(
      configError(() => loadClusterAccess(single(execUser(p.dir, p.script, { interactiveMode: null })), 'c')),
    ).toMatch(
      /exec.interactiveMode is not set \(required by client.authentication.k8s.io\/v1\); set it to Never/,
    );
    expect(
      configError(() =>
        loadClusterAccess(
          single(execUser(p.dir, p.script, { apiVersion: 'client.authentication.k8s.io/v1alpha1' })),
          'c',
        ),
      ),
    ).toMatch(/exec.apiVersion client.authentication.k8s.io\/v1alpha1 is not supported/);
    expect(p.runs()).toBe(0);
  });
});

describe('loadClusterAccess: in-cluster', () => {
  function serviceAccount(): string {
    const dir = tempDir();
    writeFileSync(join(dir, 'token'), 'sa-token-1\n');
    writeFileSync(join(dir, 'ca.crt'), pki.cert);
    return dir;
  }

  it('uses KUBERNETES_SERVICE_HOST/PORT (IPv6 bracketed), ca.crt, and re-reads the rotating token at most once a minute', async () => {
    const dir = serviceAccount();
    let now = 5_000_000;
    const access = loadClusterAccess(undefined, undefined, {
      serviceAccountDir: dir,
      env: { KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '443' },
      monotonicNow: () => now,
    });
    expect(access.context).toBe('in-cluster');
    expect(access.server).toBe('https://[fd00:10:96::1]:443');
    expect(access.tls.ca?.toString()).toBe(pki.cert);
    expect(await access.headers()).toEqual({ authorization: 'Bearer sa-token-1' });
    writeFileSync(join(dir, 'token'), 'sa-token-2');
    expect(await access.headers()).toEqual({ authorization: 'Bearer sa-token-1' });
    now += TOKEN_FILE_REREAD_MS;
    expect(await access.headers()).toEqual({ authorization: 'Bearer sa-token-2' });
    const v4 = loadClusterAccess(undefined, 'in-cluster', {
      serviceAccountDir: dir,
      env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
    });
    expect(v4.server).toBe('https://10.96.0.1:443');
  });

  it('not in a cluster, or no token: a configuration error', () => {
    expect(configError(() => loadClusterAccess(undefined, undefined, { env: {} }))).toBe(
      'no kubeconfig and not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set; set --kubeconfig',
    );
    expect(
      configError(() =>
        loadClusterAccess(undefined, undefined, {
          serviceAccountDir: tempDir(),
          env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
        }),
      ),
    ).toMatch(/in-cluster: cannot read the service account token .*token \(ENOENT\)/);
  });
});

describe("what of a credential plugin's stderr goes in a message", () => {
  const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
  const cases: [string, string, string][] = [
    [
      'a plain error: its first line',
      'boom: credentials expired\nsecond line\n',
      'boom: credentials expired',
    ],
    ['a JWT', `token ${jwt} expired`, 'token *** expired'],
    ['a Bearer credential', 'sent Authorization: Bearer abc.def-123', 'sent Authorization: Bearer ***'],
    ['a Google OAuth token', 'refresh of ya29.a0AfH6SMB-x failed', 'refresh of *** failed'],
    ['an EKS token', 'k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbQ rejected', '*** rejected'],
    ['an AWS access key id', 'key AKIAABCDEFGHIJKLMNOP denied', 'key *** denied'],
    [
      'key=value secrets',
      'aws_secret_access_key=abc123 password: "hunter2"',
      'aws_secret_access_key=*** password: "***"',
    ],
    ['a long run of token characters', `id ${'A1b2'.repeat(12)} unknown`, 'id *** unknown'],
    ['blank lines before it', '\n\n  gcloud: not logged in  \n', 'gcloud: not logged in'],
  ];
  for (const [name, stderr, want] of cases)
    it(`${name} → ${JSON.stringify(want)}`, () => expect(stderrDetail(stderr)).toBe(want));

  it(`at most ${STDERR_DETAIL_MAX_CHARS} characters, then an ellipsis`, () => {
    const detail = stderrDetail(`error: ${'word '.repeat(100)}`);
    expect(detail).toHaveLength(STDERR_DETAIL_MAX_CHARS + 1);
    expect(detail.endsWith('…')).toBe(true);
  });
});
