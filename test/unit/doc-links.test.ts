/**
 * Every relative link of the documentation (README.md, CONTRIBUTING.md, CHANGELOG.md, docs/*.md,
 * bench/README.md) resolves: the file or folder exists, and a `#anchor` names a heading of the Markdown file
 * it points into (GitHub's slug of the heading) or an `<a id="…">` in it. Links inside code are not links.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The documents whose links are checked. */
function documents(): string[] {
  const top = readdirSync(ROOT).filter((f) => f.endsWith('.md'));
  const docs = readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return [...top, ...docs, 'bench/README.md'];
}

/** `markdown` without fenced blocks and inline code spans. */
function prose(markdown: string): string {
  return markdown.replace(/^\s*```[\s\S]*?^\s*```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown document: its headings' slugs (repeats numbered as GitHub does) and `<a id>`s. */
function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const m of markdown.replace(/^\s*```[\s\S]*?^\s*```/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1] ?? '');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of markdown.matchAll(/<a id="([^"]+)"><\/a>/g)) found.add(m[1] ?? '');
  return found;
}

/** The relative link targets of `markdown`: `[text](target)`, without external and mail links. */
function relativeLinks(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] ?? '')
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe('links between the documents', () => {
  it('slugs and anchors follow GitHub', () => {
    expect(slug('Why is this pod still here? `status` and `explain`')).toBe(
      'why-is-this-pod-still-here-status-and-explain',
    );
    expect(slug('Redis: one server, Sentinel or Cluster')).toBe('redis-one-server-sentinel-or-cluster');
    expect([...anchors('# A\n## B\n## B\n| <a id="x"></a>y |\n```\n# not a heading\n```')]).toEqual([
      'a',
      'b',
      'b-1',
      'x',
    ]);
    expect(relativeLinks('[a](b.md#c) [d](https://e) `[f](g)` [h](#i)')).toEqual(['b.md#c', '#i']);
  });

  for (const doc of documents()) {
    it(`${doc}: every fenced block is closed (an open one would swallow the rest of the page)`, () => {
      const fences = readFileSync(path.join(ROOT, doc), 'utf8').match(/^\s*```/gm) ?? [];
      expect(fences.length % 2).toBe(0);
    });

    it(`${doc}: every relative link and #anchor resolves`, () => {
      const broken: string[] = [];
      for (const target of relativeLinks(readFileSync(path.join(ROOT, doc), 'utf8'))) {
        const [file = '', anchor] = target.split('#');
        const resolved =
          file === '' ? path.join(ROOT, doc) : path.resolve(path.dirname(path.join(ROOT, doc)), file);
        if (!existsSync(resolved)) {
          broken.push(`${target}: no such file`);
          continue;
        }
        if (anchor === undefined) continue;
        if (!resolved.endsWith('.md') || statSync(resolved).isDirectory()) {
          broken.push(`${target}: an anchor into a file that is not Markdown`);
          continue;
        }
        if (!anchors(readFileSync(resolved, 'utf8')).has(anchor)) broken.push(`${target}: no such anchor`);
      }
      expect(broken).toEqual([]);
    });
  }
});
