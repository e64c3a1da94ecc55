/**
 * Certificates for a TLS etcd in tests, made with the `openssl` CLI: a CA, and leaf certificates it signs
 * (SAN 127.0.0.1, usable as server and client). EC P-256 keys: quick to generate on a loaded machine.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** PEM files of a certificate and its key. */
export interface CertFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A self-signed CA `name` in `dir` (`<name>.pem`, `<name>.key`), valid a day. */
export function makeCa(dir: string, name: string): CertFiles {
  const certFile = join(dir, `${name}.pem`);
  const keyFile = join(dir, `${name}.key`);
  // biome-ignore format: an option and its value on one line
  openssl([
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', `/CN=${name}`,
  ]);
  return { certFile, keyFile };
}

/**
 * A certificate `name` for common name `cn` signed by `ca`, in `dir` (`<name>.pem`, `<name>.key`): SAN
 * 127.0.0.1, for server and client authentication, valid a day.
 */
export function issueCert(ca: CertFiles, dir: string, name: string, cn: string): CertFiles {
  const certFile = join(dir, `${name}.pem`);
  const keyFile = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
  // biome-ignore format: an option and its value on one line
  openssl([
    'req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', keyFile, '-out', csr, '-subj', `/CN=${cn}`,
  ]);
  // biome-ignore format: an option and its value on one line
  openssl([
    'x509', '-req', '-in', csr, '-CA', ca.certFile, '-CAkey', ca.keyFile, '-CAcreateserial',
    '-out', certFile, '-days', '1', '-extfile', ext,
  ]);
  return { certFile, keyFile };
}
