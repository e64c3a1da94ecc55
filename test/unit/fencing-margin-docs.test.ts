/**
 * The fencing margin as the documents and help texts state it is the code's: a leader stops its DELETEs once
 * TTL − min(1 s, TTL/5) has passed without a sign of life from its store (src/leadership/backend.ts
 * `sessionValidMs`). The docs, the configuration help, the alerts, the dashboard and the metrics' help say so, and none
 * says the older "TTL − 1 s" alone or "as soon as a TTL has passed".
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FIELDS } from '../../src/config/fields.ts';
import { sessionValidMs } from '../../src/leadership/backend.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const FORMULA = 'TTL − min(1 s, TTL/5)';

/** Every text an operator reads: the Markdown documents, the monitoring files, the sources' help strings. */
const TEXTS = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  'infra/monitoring/alerts.yaml',
  'infra/monitoring/grafana-dashboard.json',
  'src/config/fields.ts',
  'src/telemetry/metrics.ts',
];

describe('the fencing margin', () => {
  it('is TTL − min(1 s, TTL/5) in the code: 1.6 s at the 2 s minimum, TTL − 1 s from 5 s up', () => {
    expect(sessionValidMs(2000)).toBe(1600);
    expect(sessionValidMs(4000)).toBe(3200);
    expect(sessionValidMs(5000)).toBe(4000);
    expect(sessionValidMs(10_000)).toBe(9000);
  });

  it('is stated as such where the documents, the configuration help and the monitoring give it', () => {
    const ttl = FIELDS.find((f) => f.key === 'electionTtlSeconds');
    expect(ttl?.range?.why).toContain(FORMULA);
    for (const f of [
      'docs/how-it-works.md',
      'docs/configuration.md',
      'docs/operations.md',
      'docs/troubleshooting.md',
    ])
      expect(read(f), f).toContain(FORMULA);
    expect(read('infra/monitoring/alerts.yaml')).toContain(FORMULA);
  });

  it('is nowhere "TTL − 1 s" alone, nor "as soon as a TTL has passed"', () => {
    const stale = TEXTS.flatMap((f) =>
      read(f)
        .split('\n')
        .map((line, i) => ({ where: `${f}:${i + 1}`, line }))
        .filter(
          ({ line }) =>
            /TTL − 1 s(?! from)/.test(line.replace(/TTL − 1 s from (a )?5 s/g, '')) ||
            /as soon as a TTL/.test(line),
        )
        .map(({ where }) => where),
    );
    expect(stale).toEqual([]);
  });
});
