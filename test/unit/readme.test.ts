import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envName, FIELDS, flagName } from '../../src/config/fields.ts';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const ci = readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8');

describe('README', () => {
  it('documents every configuration field with its flag, variable and default', () => {
    for (const f of FIELDS) {
      const row = readme.split('\n').find((l) => l.startsWith(`| \`${f.key}\` |`));
      expect(row, `README row for ${f.key}`).toBeDefined();
      expect(row).toContain(`\`${flagName(f.key)}\``);
      expect(row).toContain(`\`${envName(f.key)}\``);
      if (f.default !== undefined) expect(row).toContain(`\`${f.default}\``);
      if (f.range) expect(row).toContain(`Range \`${f.range.min}\` to \`${f.range.max}\``);
    }
  });
  it('.ci/run runs the README test command', () => {
    expect(readme).toContain('npm test ');
    expect(ci).toMatch(/^npm test$/m);
  });
});
