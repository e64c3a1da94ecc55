/**
 * Small files with names a newcomer understands: a file of src/ or workers/ over 400 lines says in its header
 * why it is one file ("One file, long, because …"), or it is split.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { tsFilesUnder } from '../helpers/imports.ts';

const LIMIT = 400;

describe('file size', () => {
  it(`every file of src/ and workers/ over ${LIMIT} lines gives its reason in its header`, () => {
    const files = ['src', 'workers'].flatMap(tsFilesUnder);
    expect(files.length).toBeGreaterThan(100);
    const unexplained = files.flatMap((file) => {
      const text = readFileSync(file, 'utf8');
      const lines = text.split('\n').length;
      const header = text.slice(0, text.indexOf('*/') + 2);
      return lines > LIMIT && !header.includes('One file, long, because') ? [`${file}: ${lines} lines`] : [];
    });
    expect(unexplained).toEqual([]);
  });
});
