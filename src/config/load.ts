/**
 * Loads one replica's configuration from its sources, in priority order:
 * command-line flags > environment (`SDC_*`, then aliases such as `KUBECONFIG`) > YAML file
 * (`--config` / `SDC_CONFIG`) > defaults ({@link FIELDS}). Throws {@link ConfigError} listing every bad
 * field; the CLI turns that into exit code 2.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { envName, FIELDS, flagName } from './fields.ts';
import { type CleanerConfig, configSchema } from './schema.ts';

/** Invalid configuration. `problems` has one line per bad field: where it came from, what is wrong, what is expected. */
export class ConfigError extends Error {
  override name = 'ConfigError';
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = problems;
  }
}

type Source = 'flag' | 'env' | 'file' | 'default';

/** Sources for {@link loadConfig}. `flags` is keyed by field key (commander's camelCase option names). */
export interface ConfigSources {
  flags?: Readonly<Record<string, unknown>>;
  env?: Readonly<Record<string, string | undefined>>;
  /** Path of the YAML file; falls back to `SDC_CONFIG` in `env`. */
  file?: string;
  /**
   * The in-cluster service account's namespace, named in the error when no target is configured in a pod
   * (default: read from /var/run/secrets/kubernetes.io/serviceaccount/namespace when it exists).
   */
  serviceAccountNamespace?: () => string | undefined;
}

/** The namespace of the pod's service account, when running in a Kubernetes pod. */
function readServiceAccountNamespace(): string | undefined {
  try {
    return (
      readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || undefined
    );
  } catch {
    return undefined;
  }
}

function describe(key: string, source: Source, file: string | undefined): string {
  switch (source) {
    case 'flag':
      return `${flagName(key)}`;
    case 'env':
      return `${envName(key)}`;
    case 'file':
      return `${key} in ${file}`;
    default:
      // Not set anywhere (its default, or nothing): say where it can be set.
      return `${key} (${flagName(key)} or ${envName(key)})`;
  }
}

function readFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError([
      `--config ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? err}); expected a readable YAML file`,
    ]);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError([`--config ${path}: not valid YAML (${(err as Error).message.split('\n')[0]})`]);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new ConfigError([`--config ${path}: expected a YAML mapping of field: value`]);
  return doc as Record<string, unknown>;
}

/**
 * Merges the sources and validates them.
 * @returns the effective configuration (durations in ms, TTL in s).
 * @throws ConfigError with one line per bad or unknown field.
 */
export function loadConfig(sources: ConfigSources = {}): CleanerConfig {
  const env = sources.env ?? process.env;
  const flags = sources.flags ?? {};
  const filePath =
    sources.file ?? (typeof flags.config === 'string' ? flags.config : undefined) ?? env.SDC_CONFIG;
  const file = filePath ? readFile(filePath) : {};
  const known = new Set(FIELDS.map((f) => f.key));
  const problems: string[] = [];
  for (const key of Object.keys(file)) {
    if (!known.has(key))
      problems.push(`${key} in ${filePath}: unknown field; expected one of ${[...known].join(', ')}`);
  }

  const raw: Record<string, unknown> = {};
  const origin: Record<string, Source> = {};
  for (const f of FIELDS) {
    const fromEnv = [envName(f.key), ...(f.envAliases ?? [])]
      .map((n) => env[n])
      .find((v) => v !== undefined && v !== '');
    const candidates: [Source, unknown][] = [
      ['flag', flags[f.key]],
      ['env', fromEnv],
      ['file', file[f.key]],
      ['default', f.default],
    ];
    const hit = candidates.find(([, v]) => v !== undefined);
    if (hit) {
      raw[f.key] = hit[1];
      origin[f.key] = hit[0];
    }
  }

  // In a pod, no target is an error as anywhere else, never the pod's own namespace: that is the cleaner's,
  // where Kyuubi starts no driver, and cleaning it would look like a working deployment that cleans nothing.
  const podNamespace =
    raw.targets === undefined
      ? (sources.serviceAccountNamespace ?? readServiceAccountNamespace)()
      : undefined;
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0] ?? '');
      if (key === 'targets' && podNamespace !== undefined && raw.targets === undefined) {
        problems.push(
          `targets: required but not set (${flagName(key)} or ${envName(key)}); in a pod there is no default (not the pod's own namespace, ${podNamespace}): set the namespaces Kyuubi starts drivers in (kyuubi.kubernetes.namespace), e.g. ${envName(key)}=spark-team-a,spark-team-b`,
        );
        continue;
      }
      if (key && raw[key] === undefined && issue.code !== 'custom') {
        const help = FIELDS.find((f) => f.key === key)?.help ?? '';
        problems.push(
          `${key}: required but not set (${flagName(key)} or ${envName(key)}); expected: ${help}`,
        );
        continue;
      }
      const where = key ? describe(key, origin[key] ?? 'default', filePath) : 'config';
      problems.push(`${where}: ${issue.message}`);
    }
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  return parsed.data;
}
