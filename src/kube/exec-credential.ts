/**
 * client-go credential plugins (`users[].user.exec` in a kubeconfig): runs the plugin without a shell, reads
 * the ExecCredential it prints (client.authentication.k8s.io/v1 or v1beta1) and caches its token until
 * `status.expirationTimestamp` (refreshed {@link EXEC_REFRESH_BEFORE_MS} before it; forever when the plugin
 * gives none). Concurrent callers share one run. The cleaner never has a terminal: plugins always run
 * non-interactively, stdin closed.
 *
 * A failed run (non-zero exit, timeout, missing command, bad output) starts a backoff: until it ends, callers get
 * the same error at once (plus when the plugin runs again) and the plugin is not spawned. After n consecutive
 * failures the backoff is min({@link EXEC_FAILURE_BACKOFF_INITIAL_MS} · 2^(n−1), {@link EXEC_FAILURE_BACKOFF_MAX_MS})
 * — 1 s, 2 s, 4 s, … 5 min; a successful run resets it. client-go's exec authenticator has no such backoff: it
 * runs the plugin again (serialised by its mutex) for every request that finds no valid credential, and rate-limits
 * only the install hint in its message. That suits kubectl, which makes a few requests and exits, but not a
 * long-running controller sending up to --api-qps requests a second: a broken plugin would be spawned for each.
 * So we deviate, with an exponential backoff (as for this project's failing API requests and informer restarts),
 * capped so that a plugin fixed outside the process is picked up within 5 minutes. No jitter: a process runs a
 * kubeconfig user's plugin from one place, so there is no herd to spread. The cached token is still used while
 * it has not expired, as before.
 */
import { execFile, execFileSync } from 'node:child_process';
import { backoffMs } from '../backoff.ts';
import type { Clock, MonotonicClock } from '../clock.ts';

/** The ExecCredential API versions we speak (v1alpha1 was removed from client-go in 1.24). */
export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];

/** How long before `expirationTimestamp` a cached token is refreshed. */
export const EXEC_REFRESH_BEFORE_MS = 10_000;

/** Default time a plugin run may take before it is killed. */
export const EXEC_TIMEOUT_MS = 30_000;

/** Backoff after the first failed run, doubled for each further consecutive failure. */
export const EXEC_FAILURE_BACKOFF_INITIAL_MS = 1_000;

/** The longest backoff between runs of a failing plugin. */
export const EXEC_FAILURE_BACKOFF_MAX_MS = 5 * 60_000;

/** The backoff after `failures` (≥ 1) consecutive failed runs: 1 s · 2^(failures−1), at most 5 min. */
export function execFailureBackoffMs(failures: number): number {
  return backoffMs(failures, { baseMs: EXEC_FAILURE_BACKOFF_INITIAL_MS, maxMs: EXEC_FAILURE_BACKOFF_MAX_MS });
}

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

/**
 * The error of a failed run; `notFound` when the command does not exist. `detail` is the first line of the
 * plugin's stderr (tokens redacted, truncated: {@link stderrDetail}) when the message carries it; `summary` is
 * the message without it.
 */
export class ExecPluginError extends Error {
  override name = 'ExecPluginError';
  readonly notFound: boolean;
  readonly summary: string;
  readonly detail: string | undefined;
  constructor(message: string, notFound = false, parts?: { summary: string; detail: string }) {
    super(message);
    this.notFound = notFound;
    this.summary = parts?.summary ?? message;
    this.detail = parts?.detail;
  }
}

/** The longest excerpt of a plugin's stderr in a message, characters. */
export const STDERR_DETAIL_MAX_CHARS = 200;

/**
 * Token shapes that credential plugins print (and how): JWTs (OIDC, Azure, service account tokens), Google
 * OAuth access tokens, EKS tokens, AWS access key ids, `Bearer`/`Basic` credentials, `key=value` secrets and any
 * long run of token characters.
 */
const TOKEN_SHAPES: readonly (readonly [RegExp, string])[] = [
  [/\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, '***'],
  [/\bya29\.[A-Za-z0-9._-]+/g, '***'],
  [/\bk8s-aws-v1\.[A-Za-z0-9_-]+/g, '***'],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, '***'],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, '$1 ***'],
  [/\b([A-Za-z0-9_-]*(?:token|secret|password|passwd|key)["']?\s*[:=]\s*["']?)[^\s"',;]+/gi, '$1***'],
  [/[A-Za-z0-9+/_-]{40,}={0,2}/g, '***'],
];

/** `text` with every known token shape replaced by `***` (a `Bearer `, `token=` … prefix kept). Pure. */
export function redactTokens(text: string): string {
  return TOKEN_SHAPES.reduce((out, [shape, replacement]) => out.replace(shape, replacement), text);
}

/**
 * What of a plugin's stderr goes in a message: its first non-empty line, tokens redacted, at most
 * {@link STDERR_DETAIL_MAX_CHARS} characters (cloud plugins print account details and tokens there).
 */
export function stderrDetail(stderr: string): string {
  const line = redactTokens(
    stderr
      .split('\n')
      .map((l) => l.trim())
      .find(Boolean) ?? '',
  );
  return line.length > STDERR_DETAIL_MAX_CHARS ? `${line.slice(0, STDERR_DETAIL_MAX_CHARS)}…` : line;
}

/** A plugin's token source. */
export interface ExecCredentialSource {
  /**
   * Runs the plugin now, synchronously (at load: its client certificate, if any, feeds the TLS settings),
   * and caches its token. It runs even during a backoff; a failure starts (or extends) one, a success ends it.
   * @throws ExecPluginError
   */
  runSync(): ExecCredentialStatus;
  /**
   * The current token (undefined when the plugin gives only a certificate): the cached one while it is fresh,
   * else from a new run shared by concurrent callers. When a refresh fails but the cached token has not
   * expired yet, that token is used. After a failed run, the plugin is not run again until the backoff
   * ({@link execFailureBackoffMs}) has passed: meanwhile the cached token is used while it has not expired,
   * else the failure is thrown again at once.
   * @throws ExecPluginError naming the user, the command, its exit code and stderr's first line, and when the
   *   plugin runs again
   */
  token(): Promise<string | undefined>;
  /**
   * Forgets the cached token (the API server refused it: 401): the next {@link token} runs the plugin (once a
   * backoff from a failed run has passed).
   */
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
  const detail = stderrDetail(stderr);
  /** `summary`, then the stderr excerpt (or `none` when there is none). */
  const failure = (summary: string, none?: string) =>
    detail
      ? new ExecPluginError(`${summary}: ${detail}`, false, { summary, detail })
      : new ExecPluginError(none === undefined ? summary : `${summary}: ${none}`);
  if (err.code === 'ENOENT' || err.code === 'EACCES') {
    const hint = cfg.installHint ? `; ${oneLine(cfg.installHint)}` : '';
    const reason = err.code === 'ENOENT' ? 'not found' : 'not executable (EACCES)';
    return new ExecPluginError(`${what}: executable ${reason}${hint}`, true);
  }
  if (err.code === 'ETIMEDOUT' || (err.killed && err.signal)) {
    return failure(`${what} did not finish within ${timeoutMs / 1000} s`);
  }
  // execFile: a numeric `code` is the exit code; execFileSync: `status`.
  const exit = typeof err.code === 'number' ? err.code : err.status;
  if (typeof exit === 'number')
    return failure(`${what} failed with exit code ${exit}`, '(no output on stderr)');
  if (err.signal) return failure(`${what} was killed by ${err.signal}`, '(no stderr)');
  return new ExecPluginError(`${what} could not run: ${redactTokens(firstLine(err.message))}`);
}

/** Parses and checks what the plugin printed, as client-go does. */
export function parseExecCredential(cfg: ExecPluginConfig, stdout: string): ExecCredentialStatus {
  const what = `user "${cfg.user}": exec plugin ${JSON.stringify(cfg.command)}`;
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch (err) {
    throw new ExecPluginError(
      `${what}: output is not an ExecCredential (${firstLine((err as Error).message)}): ${JSON.stringify(redactTokens(firstLine(stdout)).slice(0, 80))}`,
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
 * @param opts.env the environment the plugin inherits (then `exec.env`, then KUBERNETES_EXEC_INFO)
 * @param opts.now the wall clock, epoch ms: token expiry times are wall-clock deadlines
 * @param opts.monotonicNow the monotonic clock, ms: the failure backoff is an interval of this process
 */
export function createExecCredentialSource(
  cfg: ExecPluginConfig,
  opts: {
    env: Readonly<Record<string, string | undefined>>;
    now: Clock;
    monotonicNow: MonotonicClock;
    timeoutMs?: number;
  },
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

  // The backoff: consecutive failed runs, the last one's error, and until when (opts.monotonicNow() ms) it is
  // rethrown. Monotonic: a wall clock stepped back must not hold the plugin back for as long.
  let failures = 0;
  let lastFailure: ExecPluginError | undefined;
  let retryAt = Number.NEGATIVE_INFINITY;
  // The stderr excerpt last put in a message: every caller logs the error it gets (an informer's restart, a
  // failed GET), so an unchanged stderr is reported once per failing stretch, not on every retry.
  let reportedDetail: string | undefined;
  const succeeded = (status: ExecCredentialStatus) => {
    failures = 0;
    lastFailure = undefined;
    retryAt = Number.NEGATIVE_INFINITY;
    reportedDetail = undefined;
    cached = status;
    return status;
  };
  const failed = (err: unknown): never => {
    failures++;
    lastFailure =
      err instanceof ExecPluginError
        ? err
        : new ExecPluginError(
            `user "${cfg.user}": exec plugin ${JSON.stringify(cfg.command)} could not run: ${firstLine(String((err as Error)?.message ?? err))}`,
          );
    retryAt = opts.monotonicNow() + execFailureBackoffMs(failures);
    throw lastFailure;
  };
  /** The last failure, saying when the plugin runs again. */
  const backoffError = (failure: ExecPluginError) => {
    const ms = Math.max(0, retryAt - opts.monotonicNow());
    const inS = ms < 10_000 ? Math.ceil(ms / 100) / 10 : Math.ceil(ms / 1000);
    const times = failures === 1 ? 'failed once' : `failed ${failures} times in a row`;
    const text =
      failure.detail !== undefined && failure.detail === reportedDetail
        ? `${failure.summary}, its stderr as reported before`
        : failure.message;
    if (failure.detail !== undefined) reportedDetail = failure.detail;
    return new ExecPluginError(`${text} (${times}; retried in ${inS} s)`, failure.notFound);
  };

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
        return failed(describeFailure(cfg, e, String(e.stderr ?? ''), timeoutMs));
      }
      let status: ExecCredentialStatus;
      try {
        status = parseExecCredential(cfg, stdout);
      } catch (err) {
        return failed(err);
      }
      return succeeded(status);
    },
    invalidate() {
      cached = undefined;
    },
    async token() {
      const previous = cached;
      if (previous && fresh(previous)) return previous.token;
      // A refresh failed (or is backed off) early: the cached token still works until it actually expires.
      const stillValid = () =>
        previous?.token !== undefined && previous.expiresAt !== undefined && opts.now() < previous.expiresAt;
      if (!inflight && lastFailure && opts.monotonicNow() < retryAt) {
        if (stillValid()) return previous?.token;
        throw backoffError(lastFailure);
      }
      inflight ??= runAsync()
        .then(succeeded, failed)
        .finally(() => {
          inflight = undefined;
        });
      try {
        return (await inflight).token;
      } catch (err) {
        if (stillValid()) return previous?.token;
        throw err instanceof ExecPluginError && err === lastFailure ? backoffError(err) : err;
      }
    },
  };
}
