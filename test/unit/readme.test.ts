import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  BEGIN_MARKER,
  CONFIG_DOC,
  ConfigDocError,
  configTable,
  END_MARKER,
  withConfigTable,
} from '../../harness/docs/config-table.ts';
import { envName, FIELDS, flagName } from '../../src/config/fields.ts';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const configDoc = readFileSync(new URL(`../../${CONFIG_DOC}`, import.meta.url), 'utf8');
const ci = readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8');

describe('the configuration reference (docs/configuration.md)', () => {
  it('is what `npm run docs:config` writes from src/config/fields.ts (run it after changing a field)', () => {
    expect(configDoc).toBe(withConfigTable(configDoc));
  });

  it('has one row per field with its flag, variable, default and range', () => {
    for (const f of FIELDS) {
      const row = configDoc.split('\n').find((l) => l.startsWith(`| \`${f.key}\` |`));
      expect(row, `row for ${f.key}`).toBeDefined();
      expect(row).toContain(`\`${flagName(f.key)}\``);
      expect(row).toContain(`\`${envName(f.key)}\``);
      for (const alias of f.envAliases ?? []) expect(row).toContain(`\`${alias}\``);
      if (f.default !== undefined) expect(row).toContain(`\`${f.default}\``);
      if (f.range) expect(row).toContain(`\`${f.range.min}\` to \`${f.range.max}\``);
      if (f.range) expect(configDoc, `why ${f.key}'s range`).toContain(`${f.range.why}.`);
    }
  });

  it('a help string with a pipe stays one cell; a document without the markers is refused', () => {
    const table = configTable([{ key: 'x', help: 'a | b' }]);
    expect(table).toContain('| `x` | `--x` | `SDC_X` | — | — | a \\| b |');
    expect(withConfigTable(`intro\n${BEGIN_MARKER}\nold\n${END_MARKER}\nafter`, [])).toBe(
      `intro\n${configTable([])}\nafter`,
    );
    expect(() => withConfigTable('no markers')).toThrow(ConfigDocError);
  });
});

describe('README', () => {
  it('.ci/run runs the README test command', () => {
    expect(readme).toContain('npm test ');
    expect(ci).toMatch(/^npm test$/m);
  });
});
