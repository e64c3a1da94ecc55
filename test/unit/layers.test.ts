/**
 * Dependencies point one way (DESIGN.md "dependencies pointing one way"): every relative import
 * (static, dynamic, type-only; parsed by TypeScript, test/helpers/imports.ts) of a file under src/ or
 * workers/ goes to its own layer or a lower one. Layers, highest first:
 *
 *   cli → composition root (replica, its supervisor, commands) → check → http → status → workers → cleaner → telemetry → queue, leadership
 *     → rules (the cleanup rules: the decision, the job, its outcome) → kube → config → base (clock, log: src/*.ts)
 *
 * - http sits above the cleaner, not beside kube: it serves the state of the replica's target cleaners.
 * - workers/ imports the domain (cleaner and below); nothing in src/ imports workers/ except the composition
 *   root, which hands the job handler to the cleaner.
 * - Within one layer, folders import each other one way only (queue and leadership do not import each other).
 * - The leadership backends (src/leadership/etcd/, src/leadership/zookeeper/) import the shared core and
 *   themselves; only the factory (src/leadership/open-backend.ts) imports them.
 * The table below is the rule; a new folder must be given a layer, or this test fails naming it.
 */
import { describe, expect, it } from 'vitest';
import { refsOf, tsFilesUnder } from '../helpers/imports.ts';

/** Layers, highest first: each entry is a list of path prefixes (a folder ends in `/`). */
const LAYERS: readonly { name: string; paths: readonly string[] }[] = [
  { name: 'cli', paths: ['src/cli.ts'] },
  { name: 'composition root', paths: ['src/replica.ts', 'src/replica-supervisor.ts', 'src/commands/'] },
  // check: proves a deployment with what status reads, the kube transport and the backends' clients (`check`).
  { name: 'check', paths: ['src/check/'] },
  { name: 'http', paths: ['src/http/'] },
  // status and explain: read what Redis, etcd and the API server know (commands and /api/v1/explain use it).
  { name: 'status', paths: ['src/status/'] },
  { name: 'workers', paths: ['workers/'] },
  { name: 'cleaner', paths: ['src/cleaner/'] },
  { name: 'telemetry', paths: ['src/telemetry/'] },
  { name: 'queue, leadership', paths: ['src/queue/', 'src/leadership/'] },
  { name: 'rules', paths: ['src/rules/'] },
  { name: 'kube', paths: ['src/kube/'] },
  { name: 'config', paths: ['src/config/'] },
  // Anything else directly in src/: small helpers every layer may use (clock, log, backoff, sleep).
  { name: 'base', paths: ['src/'] },
];

/** Who may import workers/: the composition root only. */
const MAY_IMPORT_WORKERS = ['src/replica.ts', 'src/commands/run.ts'];

/** The layer index (0 = highest) and the matching prefix of a file, or undefined when it has none. */
function layerOf(file: string): { index: number; prefix: string } | undefined {
  for (const [index, layer] of LAYERS.entries()) {
    const prefix = layer.paths.find((p) => (p.endsWith('/') ? file.startsWith(p) : file === p));
    if (prefix && (prefix !== 'src/' || !file.slice(4).includes('/'))) return { index, prefix };
  }
  return undefined;
}

const files = ['src', 'workers'].flatMap(tsFilesUnder);
const refs = files.flatMap(refsOf);

describe('layers', () => {
  it('every file under src/ and workers/ has a layer', () => {
    expect(files.filter((f) => layerOf(f) === undefined)).toEqual([]);
  });

  it('no import runs from a lower layer to a higher one', () => {
    const upward = refs.flatMap((r) => {
      const from = layerOf(r.from);
      const to = layerOf(r.to);
      if (!from || !to || to.index >= from.index) return [];
      return [`${r.from} (${LAYERS[from.index]?.name}) → ${r.to} (${LAYERS[to.index]?.name})`];
    });
    expect(upward).toEqual([]);
  });

  it('nothing in src/ imports workers/ except the composition root', () => {
    const intoWorkers = refs.filter((r) => r.to.startsWith('workers/') && r.from.startsWith('src/'));
    expect(
      intoWorkers.filter((r) => !MAY_IMPORT_WORKERS.includes(r.from)).map((r) => `${r.from} → ${r.to}`),
    ).toEqual([]);
  });

  it('folders of one layer import each other one way only', () => {
    // A top-level folder with its subfolders is one (src/leadership/etcd is part of src/leadership; the rule
    // inside it is the next case's).
    const folder = (f: string) => f.split('/').slice(0, 2).join('/');
    const edges = new Set(
      refs
        .filter((r) => layerOf(r.from)?.index === layerOf(r.to)?.index && folder(r.from) !== folder(r.to))
        .map((r) => `${folder(r.from)} → ${folder(r.to)}`),
    );
    const both = [...edges].filter((e) => edges.has(e.split(' → ').reverse().join(' → ')));
    expect(both).toEqual([]);
  });

  it('leadership backends: each folder imports only itself and the shared core; only the factory imports them', () => {
    const backendOf = (f: string) => /^src\/leadership\/([^/]+)\//.exec(f)?.[1];
    const wrong = refs.flatMap((r) => {
      const from = backendOf(r.from);
      const to = backendOf(r.to);
      if (to === undefined || from === to) return [];
      // Into a backend folder: from the factory only (src/leadership/open-backend.ts), never from another backend.
      if (r.from === 'src/leadership/open-backend.ts') return [];
      return [`${r.from} → ${r.to}`];
    });
    expect(wrong).toEqual([]);
  });
});
