/**
 * Every repository path the documentation and the code comments cite exists: a file or a folder under one of
 * the repository's top-level folders (`src/`, `test/`, `docs/`, `workers/`, `harness/`, `bench/`, `scripts/`,
 * `infra/`, `patches/`, `.ci/`), named with its extension (`docs/sizing.md`) or as a folder (`src/check/`,
 * `test/unit`). Read: the Markdown documents (README.md, CONTRIBUTING.md, CHANGELOG.md, docs/, bench/README.md,
 * test/fixtures/README.md, code blocks included) and the comments, not the code, of every TypeScript file under
 * src/, workers/, harness/, bench/, test/ and scripts/, and of the shell scripts under scripts/. A file moved or
 * split leaves no reference to its old name behind: the failure lists each one with the file and line citing
 * it. Not paths: globs and patterns (`*`, `<…>`, `{…}`, `${…}`, `...`), URLs, and the few paths that a
 * documented command writes (`GENERATED`).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The folders a cited path starts with. */
const ROOTS = ['src', 'test', 'docs', 'workers', 'harness', 'bench', 'scripts', 'infra', 'patches', '.ci'];

/**
 * What documented commands write, absent from a clean checkout: the operator's copy of the example overlay
 * (docs/deployment.md), and the results and reports of the benchmark runs whose outputs are not committed
 * (`<name>.json` and `<name>/`: the quick run, a partial full run, the scale test's quick runs). A cited
 * path is generated when it is one of these or lies under one.
 */
const GENERATED = [
  'infra/k8s/overlays/prod',
  'bench/results/quick',
  'bench/results/full',
  'bench/results/scale-quick',
  'bench/results/scale-quick-cluster',
  'bench/results/scale-quick-deployed',
];

/** A path cited at a line (1-based) of a text. */
interface Citation {
  path: string;
  line: number;
}

const PATH = new RegExp(
  `(?<![\\w./@$~-])(?:${ROOTS.map((r) => r.replace('.', '\\.')).join('|')})/[\\w./@+-]*`,
  'g',
);
/** A URL (with its path, which is not the repository's) up to the next blank, quote or closing bracket. */
const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/[^\s'"`)>\]]*/gi;

/**
 * The repository paths `text` cites, with their line (1-based): a path under one of `ROOTS` that names a file
 * with its extension, or a folder (with or without its trailing `/`). Globs and templates are skipped, and so
 * is everything inside a URL.
 */
function citedPaths(text: string): Citation[] {
  const found: Citation[] = [];
  const lines = text.replace(URL_PATTERN, (url) => ' '.repeat(url.length)).split('\n');
  lines.forEach((content, i) => {
    for (const m of content.matchAll(PATH)) {
      const after = content[(m.index ?? 0) + m[0].length] ?? '';
      // A glob, a placeholder, a template or an elision: `src/*.ts`, `test/<dir>/`, `bench/{a,b}`,
      // `test/${name}`, `src/cleaner/...`, `src/cleaner/…`.
      if ((after && '*<{$…'.includes(after)) || m[0].includes('..')) continue;
      // A sentence's full stop is not part of the path; `docs/sizing.md:12` or `src/cli.ts#L3` stop the
      // pattern before the line.
      found.push({ path: m[0].replace(/[.-]+$/, ''), line: i + 1 });
    }
  });
  return found;
}

/**
 * `source` (TypeScript) with everything but its comments blanked out, newlines kept, so that positions and
 * line numbers stay the same: strings, template literals (with their `${…}`) and regular expressions are code.
 */
function tsComments(source: string): string {
  const out: string[] = source.split('').map((c) => (c === '\n' ? '\n' : ' '));
  /** What each open `{` belongs to: a block of code, or a template literal's `${`. */
  const braces: ('code' | 'template')[] = [];
  let lastSignificant = '';
  let lastWord = '';
  let i = 0;
  const n = source.length;
  /** Skips a template literal's text from `i` (just after its backtick or the `}` of a `${…}`). */
  const templateText = () => {
    while (i < n) {
      const c = source[i];
      if (c === '\\') i += 2;
      else if (c === '`') {
        i++;
        return;
      } else if (c === '$' && source[i + 1] === '{') {
        braces.push('template');
        i += 2;
        return;
      } else i++;
    }
  };
  while (i < n) {
    const c = source[i] ?? '';
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      const end = source.indexOf('\n', i);
      const stop = end === -1 ? n : end;
      for (let k = i; k < stop; k++) out[k] = source[k] ?? ' ';
      i = stop;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end === -1 ? n : end + 2;
      for (let k = i; k < stop; k++) out[k] = source[k] ?? ' ';
      i = stop;
    } else if (c === "'" || c === '"') {
      i++;
      while (i < n && source[i] !== c && source[i] !== '\n') i += source[i] === '\\' ? 2 : 1;
      i++;
      lastSignificant = c;
      lastWord = '';
    } else if (c === '`') {
      i++;
      templateText();
      lastSignificant = '`';
      lastWord = '';
    } else if (c === '{') {
      braces.push('code');
      lastSignificant = c;
      lastWord = '';
      i++;
    } else if (c === '}') {
      i++;
      if (braces.pop() === 'template') templateText();
      lastSignificant = '}';
      lastWord = '';
    } else if (c === '/') {
      // A regular expression where an expression may start, a division after an operand.
      const regex =
        lastSignificant === '' ||
        '(,=:[!&|?{};+-*%<>~^'.includes(lastSignificant) ||
        /^(?:return|typeof|case|of|in|yield|await|void|delete|throw|new|else|do)$/.test(lastWord);
      i++;
      if (regex) {
        let inClass = false;
        while (i < n && source[i] !== '\n') {
          const r = source[i];
          if (r === '\\') i += 2;
          else {
            i++;
            if (r === '[') inClass = true;
            else if (r === ']') inClass = false;
            else if (r === '/' && !inClass) break;
          }
        }
        lastSignificant = ')';
      } else lastSignificant = '/';
      lastWord = '';
    } else if (/[\w$]/.test(c)) {
      const word = /^[\w$]+/.exec(source.slice(i, i + 64))?.[0] ?? c;
      lastWord = word;
      lastSignificant = 'a';
      i += word.length;
    } else {
      if (!/\s/.test(c)) {
        lastSignificant = c;
        lastWord = '';
      }
      i++;
    }
  }
  return out.join('');
}

/** `source` (a shell script) with everything but its `# comments` blanked out, line by line. */
function shellComments(source: string): string {
  return source
    .split('\n')
    .map((line) => {
      let quote: string | undefined;
      for (let i = 0; i < line.length; i++) {
        const ch = line[i];
        if (quote) {
          if (ch === quote) quote = undefined;
        } else if (ch === "'" || ch === '"') quote = ch;
        else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1] ?? '')))
          return ' '.repeat(i) + line.slice(i);
      }
      return '';
    })
    .join('\n');
}

/** The files under `dir` (relative to the root) whose names end with `ext`, recursively. */
function filesUnder(dir: string, ext: string): string[] {
  const abs = path.join(ROOT, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(ext))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .filter((f) => !f.split('/').includes('node_modules'))
    .sort();
}

/** Each file read, and how its citing text is taken from it. */
function sources(): { file: string; text: () => string }[] {
  const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
  const markdown = [
    ...['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', 'bench/README.md', 'test/fixtures/README.md'].filter(
      (f) => existsSync(path.join(ROOT, f)),
    ),
    ...filesUnder('docs', '.md'),
  ];
  const typescript = ['src', 'workers', 'harness', 'bench', 'test', 'scripts'].flatMap((d) =>
    filesUnder(d, '.ts'),
  );
  const shell = filesUnder('scripts', '.sh');
  return [
    ...markdown.map((file) => ({ file, text: () => read(file) })),
    ...typescript.map((file) => ({ file, text: () => tsComments(read(file)) })),
    ...shell.map((file) => ({ file, text: () => shellComments(read(file)) })),
  ];
}

/** Whether `cited` names a file or folder of the repository, or what a documented command writes. */
function exists(cited: string): boolean {
  const generated = GENERATED.some((g) => cited === g || cited === `${g}.json` || cited.startsWith(`${g}/`));
  return generated || existsSync(path.join(ROOT, cited));
}

/** One line per path `text` (the citing text of `file`) cites that does not exist: `file:line cites path`. */
function missingPaths(file: string, text: string): string[] {
  return citedPaths(text)
    .filter((c) => !exists(c.path))
    .map((c) => `${file}:${c.line} cites ${c.path}, which does not exist`);
}

describe('paths cited by the documentation and the comments', () => {
  it('finds paths, and skips globs, templates, URLs and code', () => {
    const text = [
      'See `src/cleaner/leader-terms.ts`, docs/sizing.md. And src/leadership/ or test/unit.',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a placeholder in the text under test
      'Not these: src/*.ts test/<dir>/x.ts bench/{a,b}.ts test/${name}.ts https://example.com/src/x.ts',
      'dist/src/cli.js node_modules/x/test/y.ts ../src/z.ts src/cleaner/... src/cleaner/… (at src/cli.ts:12)',
    ].join('\n');
    expect(citedPaths(text)).toEqual([
      { path: 'src/cleaner/leader-terms.ts', line: 1 },
      { path: 'docs/sizing.md', line: 1 },
      { path: 'src/leadership/', line: 1 },
      { path: 'test/unit', line: 1 },
      { path: 'src/cli.ts', line: 3 },
    ]);
    const code = [
      "const a = 'src/in-a-string.ts'; // src/in-a-comment.ts",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: TypeScript source under test, as text
      'const b = `test/${x}/src/in-a-template.ts`; /* docs/in-a-block.md */',
      'const c = /src\\/in-a-regex.ts/.test(a) ? 1 / 2 : 3; // docs/after-a-regex.md',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: TypeScript source under test, as text
      'const d = `${a ? { e: `src/nested.ts` } : "}"} src/after-nesting.ts`; // docs/after-a-template.md',
    ].join('\n');
    expect(citedPaths(tsComments(code))).toEqual([
      { path: 'src/in-a-comment.ts', line: 1 },
      { path: 'docs/in-a-block.md', line: 2 },
      { path: 'docs/after-a-regex.md', line: 3 },
      { path: 'docs/after-a-template.md', line: 4 },
    ]);
    expect(citedPaths(shellComments('cp src/a.ts x # see docs/b.md\necho "# src/c.ts"'))).toEqual([
      { path: 'docs/b.md', line: 1 },
    ]);
  });

  it('reports a path that does not exist, with the file and line citing it', () => {
    const doc = 'The terms:\nsee src/does-not-exist.ts (and src/cli.ts, infra/k8s/overlays/prod/).';
    expect(missingPaths('notes.md', doc)).toEqual([
      'notes.md:2 cites src/does-not-exist.ts, which does not exist',
    ]);
    const code = "const a = 'src/does-not-exist.ts';\n// moved from src/does-not-exist.ts";
    expect(missingPaths('a.ts', tsComments(code))).toEqual([
      'a.ts:2 cites src/does-not-exist.ts, which does not exist',
    ]);
  });

  it('every cited path exists', () => {
    const files = sources();
    expect(files.map((f) => f.file)).toEqual(
      expect.arrayContaining([
        'README.md',
        'CONTRIBUTING.md',
        'docs/sizing.md',
        'src/cli.ts',
        'scripts/setup.sh',
      ]),
    );
    const missing = files.flatMap(({ file, text }) => missingPaths(file, text()));
    expect(missing, `\n${missing.join('\n')}\n`).toEqual([]);
  });
});
