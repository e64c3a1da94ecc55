/**
 * client-go credential plugins (`users[].user.exec` in a kubeconfig): runs the plugin without a shell, reads
 * the ExecCredential it prints (client.authentication.k8s.io/v1 or v1beta1) and caches its token until
 * `status.expirationTimestamp` (refreshed {@link EXEC_REFRESH_BEFORE_MS} before it; forever when the plugin
 * gives none). Concurrent callers share one run. The cleaner never has a terminal: plugins always run
 * non-interactively, stdin closed.
 */
import { execFile, execFileSync } from 'node:child_process';

/** The ExecCredential API versions we speak (v1alpha1 was removed from client-go in 1.24). */
export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];

/** How long before `expirationTimestamp` a cached token is refreshed. */
export const EXEC_REFRESH_BEFORE_MS = 10_000;

/** Default time a plugin run may take before it is killed. */
export const EXEC_TIMEOUT_MS = 30_000;

/** What the plugin runs with (paths already resolved against the kubeconfig's directory). */
export interface ExecPluginConfig {
  /** The kubeconfig user, for messages. */
  readonly user: string;
  readonly command: string;
  readonly args: readonly string[];
  /** `exec.env`, added to the process environment. */
  readonly env: readonly { name: string; value: string }[];
  readonly apiVersion: string;
  readonly installHint?: string;
  /** `KUBERNETES_EXEC_INFO`: the ExecCredential (spec.interactive false, spec.cluster when provideClusterInfo). */
  readonly execInfo: string;
}

/** The credential a plugin returned. */
export interface ExecCredentialStatus {
  readonly token?: string;
  readonly clientCertificateData?: string;
  readonly clientKeyData?: string;
  /** `expirationTimestamp` in ms since the epoch; undefined = never expires. */
  readonly expiresAt?: number;
}

/** The error of a failed run; `notFound` when the command does not exist. */
export class ExecPluginError extends Error {
  override name = 'ExecPluginError';
  readonly notFound: boolean;
  constructor(message: string, notFound = false) {
    super(message);
    this.notFound = notFound;
  }
}

/** A plugin's token source. */
export interface ExecCredentialSource {
  /**
   * Runs the plugin now, synchronously (at load: its client certificate, if any, feeds the TLS settings),
   * and caches its token.
   * @throws ExecPluginError
   */
  runSync(): ExecCredentialStatus;
  /**
   * The current token (undefined when the plugin gives only a certificate): the cached one while it is fresh,
   * else from a new run shared by concurrent callers. When a refresh fails but the cached token has not
   * expired yet, that token is used.
   * @throws ExecPluginError naming the command, its exit code and stderr's first line
   */
  token(): Promise<string | undefined>;
  /** Forgets the cached token (the API server refused it: 401): the next {@link token} runs the plugin. */
  invalidate(): void;
  /** How many times the plugin ran (tests, diagnostics). */
  readonly runs: number;
  /** The command, as run. */
  readonly command: string;
}

/** What execFile / execFileSync throw: `code` is an errno name or (execFile) the exit code. */
type RunError = Error & {
  code?: string | number | null;
  status?: number | null;
  signal?: string | null;
  killed?: boolean;
};

const oneLine = (s: string) => s.trim().replace(/\s*\n\s*/g, ' ');
const firstLine = (s: string) =>
  (
    s
      .split('\n')
      .map((l) => l.trim())
      .find(Boolean) ?? ''
  ).slice(0, 300);

function describeFailure(
  cfg: ExecPluginConfig,
  err: RunError,
  stderr: string,
  timeoutMs: number,
): ExecPluginError {
  const what = `user "${cfg.user}": exec plugin ${JSON.stringify(cfg.command)}`;
  const detail = firstLine(stderr);
  if (err.code === 'ENOENT' || err.code === 'EACCES') {
    const hint = cfg.installHint ? `; ${oneLine(cfg.installHint)}` : '';
    const reason = err.code === 'ENOENT' ? 'not found' : 'not executable (EACCES)';
    return new ExecPluginError(`${what}: executable ${reason}${hint}`, true);
  }
  if (err.code === 'ETIMEDOUT' || (err.killed && err.signal)) {
    return new ExecPluginError(
      `${what} did not finish within ${timeoutMs / 1000} s${detail ? `: ${detail}` : ''}`,
    );
  }
  // execFile: a numeric `code` is the exit code; execFileSync: `status`.
  const exit = typeof err.code === 'number' ? err.code : err.status;
  if (typeof exit === 'number') {
    return new ExecPluginError(`${what} failed with exit code ${exit}: ${detail || '(no output on stderr)'}`);
  }
  if (err.signal)
    return new ExecPluginError(`${what} was killed by ${err.signal}: ${detail || '(no stderr)'}`);
  return new ExecPluginError(`${what} could not run: ${firstLine(err.message)}`);
}

/** Parses and checks what the plugin printed, as client-go does. */
export function parseExecCredential(cfg: ExecPluginConfig, stdout: string): ExecCredentialStatus {
  const what = `user "${cfg.user}": exec plugin ${JSON.stringify(cfg.command)}`;
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch (err) {
    throw new ExecPluginError(
      `${what}: output is not an ExecCredential (${firstLine((err as Error).message)}): ${JSON.stringify(firstLine(stdout).slice(0, 80))}`,
    );
  }
  const obj = (doc ?? {}) as Record<string, unknown>;
  if (typeof doc !== 'object' || Array.isArray(doc) || obj.kind !== 'ExecCredential') {
    throw new ExecPluginError(`${what}: output is not an ExecCredential (kind ${JSON.stringify(obj.kind)})`);
  }
  if (obj.apiVersion !== cfg.apiVersion) {
    throw new ExecPluginError(
      `${what} is configured to use API version ${cfg.apiVersion}, plugin returned version ${String(obj.apiVersion)}`,
    );
  }
  const status = obj.status as Record<string, unknown> | undefined;
  if (!status || typeof status !== 'object' || Array.isArray(status)) {
    throw new ExecPluginError(`${what} didn't return a status field`);
  }
  const str = (key: string): string | undefined => {
    const v = status[key];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new ExecPluginError(`${what}: status.${key} is not a string`);
    return v;
  };
  const token = str('token');
  const clientCertificateData = str('clientCertificateData');
  const clientKeyData = str('clientKeyData');
  if (!token && !clientCertificateData && !clientKeyData) {
    throw new ExecPluginError(`${what} didn't return a token or cert/key pair`);
  }
  if (!clientCertificateData !== !clientKeyData) {
    throw new ExecPluginError(`${what} returned only certificate or key, not both`);
  }
  const expiration = str('expirationTimestamp');
  let expiresAt: number | undefined;
  if (expiration !== undefined) {
    expiresAt = Date.parse(expiration);
    if (Number.isNaN(expiresAt)) {
      throw new ExecPluginError(`${what}: status.expirationTimestamp ${expiration} is not an RFC 3339 time`);
    }
  }
  return { token, clientCertificateData, clientKeyData, expiresAt };
}

/**
 * A token source running `cfg`'s plugin.
 * @param env the environment the plugin inherits (then `exec.env`, then KUBERNETES_EXEC_INFO)
 */
export function createExecCredentialSource(
  cfg: ExecPluginConfig,
  opts: { env: Readonly<Record<string, string | undefined>>; now: () => number; timeoutMs?: number },
): ExecCredentialSource {
  const timeoutMs = opts.timeoutMs ?? EXEC_TIMEOUT_MS;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(opts.env)) if (v !== undefined) env[k] = v;
  for (const { name, value } of cfg.env) env[name] = value;
  env.KUBERNETES_EXEC_INFO = cfg.execInfo;
  const runOptions = {
    env,
    timeout: timeoutMs,
    killSignal: 'SIGKILL' as const,
    maxBuffer: 16 * 1024 * 1024,
    encoding: 'utf8' as const,
    windowsHide: true,
  };

  let runs = 0;
  let cached: ExecCredentialStatus | undefined;
  let inflight: Promise<ExecCredentialStatus> | undefined;
  const fresh = (s: ExecCredentialStatus) =>
    s.expiresAt === undefined || opts.now() < s.expiresAt - EXEC_REFRESH_BEFORE_MS;

  const runAsync = () =>
    new Promise<ExecCredentialStatus>((resolve, reject) => {
      runs++;
      const child = execFile(cfg.command, [...cfg.args], runOptions, (err, stdout, stderr) => {
        if (err) reject(describeFailure(cfg, err, String(stderr), timeoutMs));
        else {
          try {
            resolve(parseExecCredential(cfg, String(stdout)));
          } catch (e) {
            reject(e);
          }
        }
      });
      child.stdin?.end(); // never interactive
    });

  return {
    command: cfg.command,
    get runs() {
      return runs;
    },
    runSync() {
      runs++;
      let stdout: string;
      try {
        stdout = execFileSync(cfg.command, [...cfg.args], {
          ...runOptions,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      } catch (err) {
        const e = err as RunError & { stderr?: string | Buffer };
        throw describeFailure(cfg, e, String(e.stderr ?? ''), timeoutMs);
      }
      cached = parseExecCredential(cfg, stdout);
      return cached;
    },
    invalidate() {
      cached = undefined;
    },
    async token() {
      const previous = cached;
      if (previous && fresh(previous)) return previous.token;
      inflight ??= runAsync().finally(() => {
        inflight = undefined;
      });
      try {
        const status = await inflight;
        cached = status;
        return status.token;
      } catch (err) {
        // Refreshing early failed: the token still works until it actually expires.
        if (previous?.token && previous.expiresAt !== undefined && opts.now() < previous.expiresAt) {
          return previous.token;
        }
        throw err;
      }
    },
  };
}
