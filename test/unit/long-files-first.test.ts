/** The sequencer's list of long test files (test/long-files-first.ts) names files that exist, each once. */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { LONG_FILES } from '../long-files-first.ts';

describe('long files first', () => {
  it('every listed file exists, once, and the list is longest first', () => {
    const root = new URL('../../', import.meta.url);
    const files = LONG_FILES.map(([f]) => f);
    expect(files.filter((f) => !existsSync(new URL(f, root)))).toEqual([]);
    expect(new Set(files).size).toBe(files.length);
    const seconds = LONG_FILES.map(([, s]) => s);
    expect(seconds).toEqual([...seconds].sort((a, b) => b - a));
  });
});
