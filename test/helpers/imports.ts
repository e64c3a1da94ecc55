/**
 * The repository's module graph as the tests about its shape see it: every `.ts` file under a folder and
 * the files it refers to: static and dynamic imports and re-exports (parsed by TypeScript's
 * `preProcessFile`, not by a regular expression) and `new URL('<relative>', import.meta.url)` paths, which
 * is how a module spawns or loads another by path; and, apart, the packages a file imports.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** The repository root (the directory holding package.json), with a trailing separator removed. */
export const REPO_ROOT = path.resolve(fileURLToPath(new URL('../../', import.meta.url)));

/** One reference from a module to another file of the repository; paths are repository-relative, `/`-separated. */
export interface ModuleRef {
  /** The referring file, e.g. `src/replica.ts`. */
  from: string;
  /** The referred file, resolved against `from`, e.g. `src/cleaner/target-cleaner.ts`. */
  to: string;
  /** The specifier as written, e.g. `./cleaner/target-cleaner.ts`. */
  specifier: string;
}

/** Every `.ts` file under `dir` (repository-relative), recursively, sorted. */
export function tsFilesUnder(dir: string): string[] {
  const abs = path.join(REPO_ROOT, dir);
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(REPO_ROOT, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .sort();
}

const URL_REF = /new URL\(\s*(['"`])(\.{1,2}\/[^'"`$]*)\1\s*,\s*import\.meta\.url/g;

/** The package names a file imports (`@scope/name` or `name`; `node:*` built-ins left out). */
export function packagesOf(file: string): string[] {
  const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((s) => !s.startsWith('.') && !s.startsWith('node:'))
    .map((s) =>
      s
        .split('/')
        .slice(0, s.startsWith('@') ? 2 : 1)
        .join('/'),
    );
}

/** The relative references of one repository file (see the module header for what counts). */
export function refsOf(file: string): ModuleRef[] {
  const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
  const specifiers = ts
    .preProcessFile(text, true, true)
    .importedFiles.map((f) => f.fileName)
    .concat([...text.matchAll(URL_REF)].map((m) => m[2] ?? ''));
  return specifiers
    .filter((s) => s.startsWith('./') || s.startsWith('../'))
    .map((specifier) => ({
      from: file,
      to: path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)),
      specifier,
    }));
}
