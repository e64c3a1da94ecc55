/**
 * A self-signed serving certificate for the HTTPS sandbox, valid for `localhost` and the loopback
 * addresses. It is its own CA: the kubeconfig carries it as `certificate-authority-data`, so
 * client-node and kubectl verify it instead of skipping verification.
 */
import { generate } from 'selfsigned';

/** PEM key pair of the serving certificate. */
export interface ServingCertificate {
  /** PEM certificate (also the CA clients trust). */
  cert: string;
  /** PEM private key. */
  key: string;
}

/** Generates a certificate for `host` plus localhost/127.0.0.1/::1, valid for one year. */
export async function generateServingCertificate(host: string): Promise<ServingCertificate> {
  const altNames: { type: 2 | 7; value?: string; ip?: string }[] = [
    { type: 2, value: 'localhost' },
    { type: 7, ip: '127.0.0.1' },
    { type: 7, ip: '::1' },
  ];
  if (/^[\d.]+$/.test(host) || host.includes(':')) {
    if (host !== '127.0.0.1' && host !== '::1' && host !== '0.0.0.0') altNames.push({ type: 7, ip: host });
  } else if (host !== 'localhost') {
    altNames.push({ type: 2, value: host });
  }
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(notBeforeDate.getTime() + 365 * 24 * 3600 * 1000);
  const pems = await generate([{ name: 'commonName', value: 'sandbox-apiserver' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}
