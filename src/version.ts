/**
 * This release's version (semantic versioning, CHANGELOG.md), read once from the package.json that ships
 * with the code: `../package.json` from source, `../../package.json` from the compiled `dist/src/`.
 */
import { readFileSync } from 'node:fs';

function readVersion(): string {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'spark-driver-cleaner' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not at this depth: try the next
    }
  }
  return 'unknown';
}

/** The version of this release, e.g. `0.2.0` (`unknown` when no package.json ships beside the code). */
export const VERSION: string = readVersion();
