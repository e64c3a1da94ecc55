/**
 * The configuration flags shared by the commands that read a replica's configuration (`run`, `status`,
 * `explain`): one flag per field of {@link FIELDS}, plus `--config`; environment variables `SDC_*` and the
 * YAML file fill in the rest, exactly as for `run`, so a check runs with the replicas' own configuration.
 */
import type { Command } from 'commander';
import { envName, FIELDS, flagName } from '../config/fields.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import type { CleanerConfig } from '../config/schema.ts';

/** Adds `--config` and one flag per configuration field to `cmd`. */
export function addConfigOptions(cmd: Command): Command {
  cmd.option('--config <file>', 'YAML file with any of the fields below (env: SDC_CONFIG)');
  for (const f of FIELDS) {
    const def = f.default !== undefined ? ` (default: ${f.default})` : '';
    const range = f.range ? ` (range: ${f.range.min} to ${f.range.max})` : '';
    const flag = f.flag ? flagName(f.key) : `${flagName(f.key)} <value>`;
    cmd.option(flag, `${f.help}${def}${range} [env: ${envName(f.key)}]`);
  }
  return cmd;
}

/**
 * Loads the configuration from the command's flags, the environment and the file; on a bad field, writes one
 * line per problem to stderr and exits 2 (bad configuration), as `run` does.
 */
export function loadConfigOrExit(flags: Record<string, unknown>): CleanerConfig {
  try {
    return loadConfig({ flags });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`spark-driver-cleaner: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}
