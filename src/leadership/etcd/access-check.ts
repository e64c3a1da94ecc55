/**
 * The check at start that etcd accepts the configured certificate and password (when either is configured), so that a wrong one is a
 * configuration error (exit 2) and not a replica that runs without ever leading. Only a refusal counts:
 * etcd that does not answer (down, not yet started, a network outage) is left to the replica, which waits
 * for it with a backoff like any later outage.
 *
 * - **TLS**: gRPC reports a refused handshake as `UNAVAILABLE`, the same as a member that is down. So each
 *   `https://` endpoint gets a TLS connection of its own (node:tls, the same files) and an HTTP request:
 *   a certificate error on either side (the server's certificate not signed by `etcdCaFile`, or etcd
 *   refusing the client certificate) is a refusal; a connection refused or timed out is not.
 * - **user and role**: one read of a key under `etcdKeyPrefix`: etcd's "authentication failed" (wrong user
 *   or password) and "permission denied" (the user's role does not cover the prefix) are refusals.
 */

import { readFileSync } from 'node:fs';
import { connect } from 'node:tls';
import { EtcdAuthenticationFailedError, EtcdPermissionDeniedError, EtcdUserNotFoundError } from 'etcd3';
import type { EtcdSecurity } from '../../config/schema.ts';
import { withTimeout } from '../../with-timeout.ts';
import { LeadershipAccessError } from '../access-error.ts';
import type { EtcdClient } from './client.ts';

/** How long one endpoint's TLS check or the read may take before etcd counts as not answering, ms. */
export const ACCESS_CHECK_TIMEOUT_MS = 5000;

/** etcd refused the configured certificate, user or password, or the user's role lacks the key prefix. */
export class EtcdAccessError extends LeadershipAccessError {
  override name = 'EtcdAccessError';
}

/** TLS failures that mean a certificate was refused (OpenSSL codes and alerts), not a network problem. */
const CERT_REFUSAL =
  /CERT|certificate|unknown ca|bad certificate|UNABLE_TO_|SELF_SIGNED|ERR_TLS_CERT|ERR_SSL_|handshake|alert/i;

/** Node's codes for a server certificate that fails our check (etcdCaFile), as opposed to etcd refusing ours. */
const SERVER_CERT_FAILS =
  /^(UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO_SELF_SIGNED|CERT_UNTRUSTED|CERT_HAS_EXPIRED|CERT_NOT_YET_VALID|ERR_TLS_CERT_ALTNAME)/;

/**
 * One TLS connection to `endpoint` with the configured files and a `GET /health`: resolves with a
 * refusal (a sentence), or undefined when etcd answered or did not answer at all.
 */
function tlsRefusal(endpoint: string, security: EtcdSecurity): Promise<string | undefined> {
  const url = new URL(endpoint);
  return new Promise((resolve) => {
    let settled = false;
    const done = (why: string | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(why);
    };
    const socket = connect({
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: Number(url.port || 443),
      ...(security.caFile ? { ca: readFileSync(security.caFile) } : {}),
      ...(security.certFile ? { cert: readFileSync(security.certFile) } : {}),
      ...(security.keyFile ? { key: readFileSync(security.keyFile) } : {}),
    });
    const timer = setTimeout(() => done(undefined), ACCESS_CHECK_TIMEOUT_MS);
    timer.unref();
    socket.once('secureConnect', () => {
      // TLS 1.3: the server checks the client certificate after this; its refusal comes as an alert on read.
      socket.write(`GET /health HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`);
    });
    socket.once('data', () => done(undefined));
    socket.once('error', (err: NodeJS.ErrnoException) => {
      const what = `${err.code ?? ''} ${err.message}`;
      const side = SERVER_CERT_FAILS.test(err.code ?? '')
        ? 'etcd’s server certificate does not pass etcdCaFile'
        : 'etcd refused the client certificate etcdCertFile';
      done(
        CERT_REFUSAL.test(what)
          ? `${endpoint}: TLS refused (${side}): ${err.message.replace(/\s+/g, ' ').trim()}`
          : undefined,
      );
    });
    socket.once('close', () => done(undefined));
  });
}

/**
 * Checks that etcd accepts the configured TLS files and user (see the module comment).
 * @param keyPrefix the `etcdKeyPrefix`; a key under it is read.
 * @throws EtcdAccessError naming the settings to fix, when etcd refuses them.
 */
export async function checkEtcdAccess(
  client: EtcdClient,
  endpoints: readonly string[],
  security: EtcdSecurity,
  keyPrefix: string,
): Promise<void> {
  // Without TLS files or a user there is nothing of ours etcd could refuse: start as before.
  if (!security.caFile && !security.certFile && security.username === undefined) return;
  if (security.caFile || security.certFile) {
    const refusals = (await Promise.all(endpoints.map((e) => tlsRefusal(e, security)))).filter(
      (r): r is string => r !== undefined,
    );
    if (refusals.length > 0)
      throw new EtcdAccessError(
        `etcdCaFile/etcdCertFile/etcdKeyFile (--etcd-ca-file, --etcd-cert-file, --etcd-key-file): ` +
          `etcd and this replica do not accept each other's certificates: ${refusals.join('; ')}. ` +
          `Fix: etcdCaFile must hold the CA that signed etcd's server certificate, and etcdCertFile (with its ` +
          `key in etcdKeyFile) be issued by a CA in etcd's --trusted-ca-file`,
      );
  }
  try {
    await withTimeout(client.get(`${keyPrefix}access-check`).exec(), ACCESS_CHECK_TIMEOUT_MS, 'an etcd read');
  } catch (err) {
    if (err instanceof EtcdAuthenticationFailedError || err instanceof EtcdUserNotFoundError)
      throw new EtcdAccessError(
        `etcdUsername/etcdPassword (--etcd-username, --etcd-password or --etcd-password-file): etcd refused ` +
          `user ${JSON.stringify(security.username)}: ${err.message}. Fix: the user's current etcd password ` +
          `in etcdPassword or etcdPasswordFile (etcdctl user passwd sets it)`,
      );
    if (err instanceof EtcdPermissionDeniedError)
      throw new EtcdAccessError(
        `etcdKeyPrefix (--etcd-key-prefix) ${keyPrefix}: etcd denies ` +
          `${security.username ? `user ${JSON.stringify(security.username)}` : 'this client'} reading under it ` +
          `(${err.message}); grant its role readwrite on the prefix (README, "Secured etcd")`,
      );
    // Not answering, or any other failure: the replica waits for etcd as for any outage.
  }
}
