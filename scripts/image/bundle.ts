/**
 * Bundles what the image runs, and lays out /app: `node scripts/image/bundle.ts OUT SHIPPED.json` (from the repository
 * root, after `npm ci` and the ZooKeeper addon's build) writes
 *
 *   OUT/dist/src/cli.js (+ chunks, source maps)  the CLI and every production dependency that is plain
 *                                                JavaScript, bundled by esbuild (ESM, code-split: the dashboard and
 *                                                the OpenTelemetry SDK stay lazily loaded chunks, as in the source)
 *   OUT/dist/src/etcd3-proto/*.proto             etcd3's gRPC service definitions, read when etcd3 loads
 *   OUT/dist/THIRD-PARTY-NOTICES.txt             the license of every package bundled
 *   OUT/node_modules/…                           the packages that cannot be bundled (RUNTIME_PACKAGES), pruned
 *   OUT/package.json                             the version (src/version.ts) and "type": "module"
 *   SHIPPED.json                                 every package shipped, bundled or in node_modules (for the SBOM)
 *
 * Why bundle: `npm ci --omit=dev` installs 192 packages (92 MB) of which the process loads a small part; the
 * bundle keeps that part (≈9 MB) and the image's size is then mostly Node itself. Exit 1 when esbuild fails or a
 * rewrite below no longer finds its text (a dependency changed: look at it again).
 */
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';
import { RUNTIME_PACKAGES } from './runtime-packages.ts';

/**
 * Never bundled and not shipped: optional native speed-ups whose absence their users handle (msgpackr falls back to
 * its JavaScript decoder, as without the optional dependency), and optional backends of BullMQ we do not use.
 */
const OPTIONAL_ABSENT = ['msgpackr-extract', '@valkey/valkey-glide', 'pg', 'supports-color'];

/**
 * CommonJS code inside an ES module bundle still calls `require` and reads `__dirname`/`__filename` (Node
 * built-ins required by CJS packages, the bull-board UI lookup): give every output file its own, for its location.
 */
const BANNER = [
  "import { createRequire as __sdcCreateRequire } from 'node:module';",
  "import { fileURLToPath as __sdcFileURLToPath } from 'node:url';",
  "import { dirname as __sdcDirname } from 'node:path';",
  'const require = __sdcCreateRequire(import.meta.url);',
  'const __filename = __sdcFileURLToPath(import.meta.url);',
  'const __dirname = __sdcDirname(__filename);',
].join('\n');

/** etcd3 reads `${__dirname}/../proto/rpc.proto` when it loads: point it at the copy beside the bundle. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: etcd3's source text, matched as it is written
const ETCD3_PROTO = '`${__dirname}/../proto/rpc.proto`';
// biome-ignore lint/suspicious/noTemplateCurlyInString: the replacement source text
const BUNDLED_PROTO = '`${__dirname}/etcd3-proto/rpc.proto`';
const etcd3Proto: Plugin = {
  name: 'etcd3-proto',
  setup(b) {
    b.onLoad({ filter: /[\\/]etcd3[\\/]lib[\\/]connection-pool\.js$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes(ETCD3_PROTO))
        return { errors: [{ text: `etcd3's connection-pool.js no longer loads ${ETCD3_PROTO}` }] };
      return { contents: text.replace(ETCD3_PROTO, BUNDLED_PROTO), loader: 'js' };
    });
  },
};

/** A package shipped in the image: where its code is, for the SBOM (scripts/image/sbom.ts). */
export interface ShippedPackage {
  name: string;
  version: string;
  license?: string;
  /** `bundled`: in dist/src; `node_modules`: one of the RUNTIME_PACKAGES. */
  location: 'bundled' | 'node_modules';
  /** Its directory in the build's node_modules, e.g. `node_modules/a/node_modules/b`. */
  dir: string;
}

/** The directory of the package a bundled input belongs to (`node_modules/…/name`), from its path. */
function packageDirOf(input: string): string | undefined {
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) return undefined;
  const rest = input.slice(at + 'node_modules/'.length).split('/');
  const name = rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  return `${input.slice(0, at)}node_modules/${name}`;
}

function shippedPackage(dir: string, location: ShippedPackage['location']): ShippedPackage {
  const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
    name: string;
    version: string;
    license?: string;
  };
  return { name: pkg.name, version: pkg.version, license: pkg.license, location, dir };
}

/** `THIRD-PARTY-NOTICES.txt`: each bundled package with its version, license and license text. */
function notices(bundled: ShippedPackage[]): string {
  const sections = bundled.map(({ name, version, license, dir }) => {
    const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying|notice)/i.test(f));
    const text = file
      ? readFileSync(path.join(dir, file), 'utf8').trim()
      : `(no license file in the package; package.json says ${license ?? 'nothing'})`;
    return `## ${name} ${version} (${license ?? 'unknown'})\n\n${text}\n`;
  });
  return `# Packages bundled into dist/src, and their licenses\n\n${sections.join('\n')}`;
}

async function main(out: string, shippedFile: string): Promise<void> {
  rmSync(out, { recursive: true, force: true });
  const dist = path.join(out, 'dist', 'src');
  const result = await build({
    entryPoints: ['src/cli.ts'],
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    splitting: true,
    outdir: dist,
    // Chunks beside the entry point: src/version.ts finds ../../package.json from either.
    entryNames: '[name]',
    chunkNames: '[name]-[hash]',
    sourcemap: 'linked',
    sourcesContent: false,
    // Names kept: logs and errors name classes and functions as in the source.
    keepNames: true,
    legalComments: 'none',
    banner: { js: BANNER },
    external: [...Object.keys(RUNTIME_PACKAGES), ...OPTIONAL_ABSENT],
    plugins: [etcd3Proto],
    metafile: true,
    logLevel: 'warning',
  });
  // An `import()` of a CommonJS package becomes, with code splitting, a chunk whose only export is `default`: the
  // importer's named exports would be undefined at run time (Node itself would give them). Refused here; import such
  // packages statically from an ES module that is itself imported dynamically (src/http/dashboard-libraries.ts).
  const outputs = result.metafile.outputs;
  const dynamicTargets = Object.values(outputs).flatMap((o) =>
    o.imports.filter((i) => i.kind === 'dynamic-import' && !i.external).map((i) => i.path),
  );
  const defaultOnly = dynamicTargets.filter((t) => outputs[t]?.exports.join() === 'default');
  if (defaultOnly.length > 0) {
    const sources = defaultOnly.map((t) => `${t} (${Object.keys(outputs[t]?.inputs ?? {}).at(-1)})`);
    throw new Error(
      `import() of a CommonJS module yields only its default export in the bundle: ${sources.join(', ')}`,
    );
  }
  cpSync('node_modules/etcd3/proto', path.join(dist, 'etcd3-proto'), { recursive: true });
  const dirs = [...new Set(Object.keys(result.metafile.inputs).map(packageDirOf))].filter(
    (d) => d !== undefined,
  );
  const bundled = dirs.sort().map((d) => shippedPackage(d, 'bundled'));
  writeFileSync(path.join(out, 'dist', 'THIRD-PARTY-NOTICES.txt'), notices(bundled));

  for (const [name, { files }] of Object.entries(RUNTIME_PACKAGES)) {
    for (const f of files) {
      const from = path.join('node_modules', name, f);
      if (!existsSync(from))
        throw new Error(`${from} is missing: was the ZooKeeper addon built (scripts/setup.sh)?`);
      cpSync(from, path.join(out, 'node_modules', name, f), { recursive: true });
    }
  }
  cpSync('package.json', path.join(out, 'package.json'));
  const kept = Object.keys(RUNTIME_PACKAGES).map((n) =>
    shippedPackage(path.join('node_modules', n), 'node_modules'),
  );
  writeFileSync(shippedFile, `${JSON.stringify([...bundled, ...kept], null, 2)}\n`);
  const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
  console.error(
    `bundle: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1e6).toFixed(1)} MB in ${dist}`,
  );
}

const [out, shipped] = process.argv.slice(2);
if (!out || !shipped) {
  console.error('usage: node scripts/image/bundle.ts OUT_DIR SHIPPED.json');
  process.exit(2);
}
await main(path.resolve(out), path.resolve(shipped));
