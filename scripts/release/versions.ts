/**
 * Where the release's version is written, and what agrees with what: package.json's `version` is the one source;
 * every other place names it too. Read by test/unit/version.test.ts (the places must agree) and by
 * scripts/release.sh (which moves them together, then checks with {@link versionProblems}).
 *
 * The places, in the files {@link VERSIONED_FILES} lists (README.md, CONTRIBUTING.md, docs/*.md, the Dockerfile,
 * every YAML file under infra/):
 *   - the image tag: `spark-driver-cleaner:X.Y.Z` (`registry.example.com/spark-driver-cleaner:X.Y.Z` included);
 *   - kustomize's `newTag: X.Y.Z`;
 *   - the remote kustomize base's git ref: `?ref=vX.Y.Z`;
 * plus package-lock.json's copies of package.json's version and CHANGELOG.md's entry for it, `## X.Y.Z (YYYY-MM-DD)`,
 * or `## X.Y.Z (unreleased)` while the tag `vX.Y.Z` does not exist (the release is being prepared). `--version` and
 * the metric `sdc_build_info` read package.json at run time (src/version.ts).
 * A line that names another release on purpose (a rollback's image) carries `version-pin: keep` and is skipped.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** A semantic version (with an optional pre-release part), as `npm version` accepts it. */
export const SEMVER = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/;
const V = String.raw`\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?`;

/** Each kind of place the version is written, as a pattern whose group 1 is the version. */
export const VERSION_PATTERNS: { kind: string; pattern: RegExp }[] = [
  { kind: 'image tag', pattern: new RegExp(String.raw`spark-driver-cleaner:(${V})(?![\w.-])`, 'g') },
  { kind: 'kustomize newTag', pattern: new RegExp(String.raw`newTag:\s*"?(${V})"?`, 'g') },
  { kind: 'git ref of the remote base', pattern: new RegExp(String.raw`\?ref=v(${V})(?![\w.-])`, 'g') },
];

/** The marker of a line that names another release on purpose. */
export const KEEP_MARKER = 'version-pin: keep';

/** One place a version is written. */
export interface VersionReference {
  /** Repository-relative path. */
  file: string;
  /** 1-based line number. */
  line: number;
  kind: string;
  version: string;
}

/** The files that name the version (repository-relative): README, CONTRIBUTING, docs, Dockerfile, infra YAML. */
export function versionedFiles(root: string): string[] {
  const docs = readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  const infra = readdirSync(path.join(root, 'infra'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join('/'));
  return ['README.md', 'CONTRIBUTING.md', 'Dockerfile', ...docs, ...infra].sort();
}

/** Every version reference in those files, lines with {@link KEEP_MARKER} left out. */
export function versionReferences(root: string): VersionReference[] {
  const refs: VersionReference[] = [];
  for (const file of versionedFiles(root)) {
    const lines = readFileSync(path.join(root, file), 'utf8').split('\n');
    lines.forEach((text, i) => {
      if (text.includes(KEEP_MARKER)) return;
      for (const { kind, pattern } of VERSION_PATTERNS)
        for (const m of text.matchAll(pattern)) refs.push({ file, line: i + 1, kind, version: m[1] ?? '' });
    });
  }
  return refs;
}

/** package.json's version. */
export function packageVersion(root: string): string {
  return (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The CHANGELOG.md heading of `version`: its date, `unreleased`, or undefined when there is none. */
export function changelogEntry(root: string, version: string): string | undefined {
  const text = readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8');
  const escaped = version.replace(/[.+]/g, '\\$&');
  return new RegExp(String.raw`^## ${escaped} \((\d{4}-\d{2}-\d{2}|unreleased)\)\s*$`, 'm').exec(text)?.[1];
}

/**
 * What disagrees with package.json's version, one sentence each (empty when everything agrees). `tagged`: whether
 * the git tag `v<version>` exists (then the CHANGELOG entry must be dated).
 */
export function versionProblems(root: string, tagged: boolean): string[] {
  const version = packageVersion(root);
  const problems: string[] = [];
  if (!SEMVER.test(version)) problems.push(`package.json: version ${version} is not a semantic version`);
  const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as {
    version: string;
    packages: Record<string, { version?: string }>;
  };
  if (lock.version !== version || lock.packages['']?.version !== version)
    problems.push(`package-lock.json: version ${lock.version} (run npm install --package-lock-only)`);
  for (const r of versionReferences(root))
    if (r.version !== version) problems.push(`${r.file}:${r.line}: ${r.kind} ${r.version}, not ${version}`);
  const entry = changelogEntry(root, version);
  if (entry === undefined)
    problems.push(`CHANGELOG.md: no entry "## ${version} (YYYY-MM-DD)" or "## ${version} (unreleased)"`);
  else if (entry === 'unreleased' && tagged)
    problems.push(`CHANGELOG.md: ${version} is tagged v${version} but its entry still says "unreleased"`);
  return problems;
}

/**
 * Writes `version` into every place {@link versionReferences} finds (lines with {@link KEEP_MARKER} left alone) and
 * dates its CHANGELOG entry `## <version> (unreleased)` with `date` (YYYY-MM-DD). package.json and its lock are
 * `npm version`'s job (scripts/release.sh). Returns the files changed.
 */
export function moveVersion(root: string, version: string, date: string): string[] {
  const changed: string[] = [];
  for (const file of versionedFiles(root)) {
    const full = path.join(root, file);
    const before = readFileSync(full, 'utf8');
    const after = before
      .split('\n')
      .map((line) =>
        line.includes(KEEP_MARKER)
          ? line
          : VERSION_PATTERNS.reduce(
              (text, { pattern }) =>
                text.replace(pattern, (whole, old: string) => whole.replace(old, version)),
              line,
            ),
      )
      .join('\n');
    if (after !== before) {
      writeFileSync(full, after);
      changed.push(file);
    }
  }
  const changelog = path.join(root, 'CHANGELOG.md');
  const text = readFileSync(changelog, 'utf8');
  const heading = `## ${version} (unreleased)`;
  if (text.includes(heading)) {
    writeFileSync(changelog, text.replace(heading, `## ${version} (${date})`));
    changed.push('CHANGELOG.md');
  }
  return changed;
}
