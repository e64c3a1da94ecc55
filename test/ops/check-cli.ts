/**
 * Runs `spark-driver-cleaner check` as an operator runs it (`src/cli.ts check`, the replicas' SDC_*
 * configuration in the environment) and reads its answer: exit code, text, and the JSON document checked
 * against docs/check-output.schema.json.
 */
import { execFile } from 'node:child_process';
import { expect } from 'vitest';
import { CLI_PATH } from '../../harness/sandbox/replica-process.ts';
import type { CheckResult } from '../../src/check-result.ts';
import { checkOutputErrors } from '../helpers/check-schema.ts';

/** What one `check` run answered. */
export interface CheckRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The checks of a `--output json` run (validated against the schema). */
  readonly checks: readonly CheckResult[];
}

/**
 * Runs `check <args>` with `env` (on top of this process's environment, without its SDC_* and KUBECONFIG)
 * and, for `--output json`, validates the document. Never rejects on a non-zero exit.
 */
export function runCheck(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 120_000,
): Promise<CheckRun> {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('SDC_') && k !== 'KUBECONFIG'),
  );
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CLI_PATH, 'check', ...args],
      { env: { ...base, ...env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const status = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        if (status === null) return reject(new Error(`check did not end: ${err?.message}\n${stderr}`));
        let checks: CheckResult[] = [];
        if (args.includes('json')) {
          let doc: unknown;
          try {
            doc = JSON.parse(stdout);
          } catch {
            return reject(
              new Error(`check --output json printed no JSON (exit ${status}):\n${stdout}\n${stderr}`),
            );
          }
          expect(checkOutputErrors(doc), 'the document follows docs/check-output.schema.json').toEqual([]);
          expect((doc as { exitCode: number }).exitCode).toBe(status);
          checks = (doc as { checks: CheckResult[] }).checks;
        }
        resolve({ status, stdout, stderr, checks });
      },
    );
  });
}

/** The results with this id (`context.permissions`, `redis.acl`, …). */
export function withId(run: CheckRun, id: string): CheckResult[] {
  return run.checks.filter((c) => c.id === id);
}

/** A readable dump of a run, for assertion messages. */
export function dump(run: CheckRun): string {
  return run.checks.length > 0
    ? run.checks.map((c) => `${c.status} ${c.group} ${c.id}: ${c.message}`).join('\n')
    : `${run.stdout}\n${run.stderr}`;
}
