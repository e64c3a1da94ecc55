/**
 * Writes a one-layer OCI image layout from a root filesystem tarball, byte for byte the same for the same
 * inputs, and prints its manifest digest (`sha256:…`): the digest the Dockerfile pins its bases by.
 *
 *   node scripts/image/oci-image.ts ROOTFS.tar OUT_DIR CONFIG.json
 *
 * CONFIG.json: `{ "created": <seconds since the epoch>, "env": ["K=V"], "cmd": ["node"], "labels": {} }`.
 * The layer is the tarball as it is (uncompressed: no compressor's version can change a byte of it), the
 * image config and manifest are written with sorted keys and no whitespace. `podman pull oci:OUT_DIR:base`
 * stores it under that same manifest digest (scripts/build-base-image.sh does). Unlike `podman build` or
 * `podman import`, nothing here depends on the time of the run, the host or an intermediate image's ID.
 * Exit code 2 on bad arguments.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

interface BaseConfig {
  /** Seconds since the epoch: the image's `created` and its one history entry's. */
  created: number;
  env: string[];
  cmd: string[];
  labels?: Record<string, string>;
}

/** JSON with object keys sorted at every depth, no whitespace: one serialization per value. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function main(argv: string[]): void {
  const [rootfs, out, configFile] = argv;
  if (!rootfs || !out || !configFile) {
    console.error('usage: node scripts/image/oci-image.ts ROOTFS.tar OUT_DIR CONFIG.json');
    process.exit(2);
  }
  const config = JSON.parse(readFileSync(configFile, 'utf8')) as BaseConfig;
  const blobs = path.join(out, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const blob = (bytes: Buffer) => {
    const hex = createHash('sha256').update(bytes).digest('hex');
    writeFileSync(path.join(blobs, hex), bytes);
    return { digest: `sha256:${hex}`, size: bytes.length };
  };

  const layer = blob(readFileSync(rootfs));
  const created = new Date(config.created * 1000).toISOString().replace('.000Z', 'Z');
  const imageConfig = blob(
    Buffer.from(
      canonical({
        architecture: 'amd64',
        os: 'linux',
        created,
        config: { Env: config.env, Cmd: config.cmd, Labels: config.labels ?? {} },
        rootfs: { type: 'layers', diff_ids: [layer.digest] },
        history: [{ created, created_by: 'scripts/build-base-image.sh' }],
      }),
    ),
  );
  const manifest = blob(
    Buffer.from(
      canonical({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...imageConfig },
        layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
      }),
    ),
  );
  writeFileSync(path.join(out, 'oci-layout'), canonical({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    path.join(out, 'index.json'),
    canonical({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          annotations: { 'org.opencontainers.image.ref.name': 'base' },
        },
      ],
    }),
  );
  console.log(manifest.digest);
}

main(process.argv.slice(2));
