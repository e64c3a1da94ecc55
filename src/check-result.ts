/**
 * One line of `check`'s answer, and the exit code of them all. Every check module returns
 * {@link CheckResult}s; the command prints them (src/check/check-report.ts) and exits with
 * {@link checkExitCode}. The JSON form is documented by docs/check-output.schema.json.
 */

/**
 * How a check ended:
 * - `pass` (✓) — proven;
 * - `warn` (‼) — works, but something the operator should know cannot be proven or is risky; does not fail;
 * - `fail` (✗) — wrong: the deployment would not clean, or not safely; `fix` says what to change;
 * - `unreachable` (✗) — the server did not answer (down, a network policy, a wrong address): nothing known;
 * - `skip` (–) — not run: it does not apply, or what it needs did not answer (`message` says which).
 */
export type CheckStatus = 'pass' | 'warn' | 'fail' | 'unreachable' | 'skip';

/** The result of one check. */
export interface CheckResult {
  /**
   * What the check is about, as the report groups lines: `configuration`, `context <name>`, `redis`, `etcd`,
   * `zookeeper`, `fleet`, `canary <namespace>`.
   */
  readonly group: string;
  /** A stable identifier for scripts, e.g. `context.permissions`, `redis.eviction-policy`. */
  readonly id: string;
  readonly status: CheckStatus;
  /** What was found, in one sentence. */
  readonly message: string;
  /** What to change, when the status is not `pass` or `skip`. */
  readonly fix?: string;
  /** Figures and names behind the message (milliseconds and bytes in the key names: `skewMs`, `usedBytes`). */
  readonly details?: Readonly<Record<string, unknown>>;
}

/** Exit code of `check` when every check passed (warnings included). */
export const EXIT_OK = 0;
/** Exit code when a check failed. */
export const EXIT_FAILED = 1;
/** Exit code for bad configuration (as `run`): nothing was contacted. */
export const EXIT_CONFIG = 2;
/** Exit code when something did not answer and nothing failed. */
export const EXIT_UNREACHABLE = 3;

/**
 * The exit code of a set of results: 1 when one failed (a definite problem wins over a silent server, since
 * waiting for it will not fix the failure), else 3 when one did not answer, else 0.
 */
export function checkExitCode(results: readonly CheckResult[]): number {
  if (results.some((r) => r.status === 'fail')) return EXIT_FAILED;
  if (results.some((r) => r.status === 'unreachable')) return EXIT_UNREACHABLE;
  return EXIT_OK;
}

/** Builders of results of one group, so that a module states each line in one call. */
export function resultsOf(group: string) {
  const make =
    (status: CheckStatus) =>
    (
      id: string,
      message: string,
      more: { fix?: string; details?: Record<string, unknown> } = {},
    ): CheckResult => ({
      group,
      id,
      status,
      message,
      ...(more.fix !== undefined ? { fix: more.fix } : {}),
      ...(more.details !== undefined ? { details: more.details } : {}),
    });
  return {
    pass: make('pass'),
    warn: make('warn'),
    fail: make('fail'),
    unreachable: make('unreachable'),
    skip: make('skip'),
  };
}

/** The first line of an error's message (drivers put stacks and causes on the next lines). */
export function firstLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return (message.split('\n')[0] ?? '').trim();
}
