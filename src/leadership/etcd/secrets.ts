/**
 * The secrets of the etcd connection — CA bundle, client certificate and key, the user's password — read from
 * their files, and read again when those change, so a rotated Kubernetes Secret is used without a restart.
 * A Secret volume is updated by swapping its `..data` symlink, which replaces no watched file in place: the
 * directory of each file is watched, and every event there re-reads all the files (debounced).
 *
 * A change is applied to the etcd3 client in place: its connection pool builds new channel credentials from
 * the new files (its `buildAuthentication`, which also drops the cached auth token), each member's
 * credentials are replaced and its connections closed, so every call and stream (watch, lease keepalive)
 * re-opens with the new certificate and logs in with the new password.
 */
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { dirname } from 'node:path';
import type { Etcd3, IOptions } from 'etcd3';
import type { EtcdSecurity } from '../../config/schema.ts';
import type { Logger } from '../../log.ts';

/** Re-reading waits this long after the last file event, so one Secret update is read once, ms. */
export const SECRET_RELOAD_DEBOUNCE_MS = 200;

/** What {@link readEtcdSecrets} read: etcd3's `credentials` and `auth` options (undefined when not configured). */
export interface EtcdSecrets {
  readonly credentials: IOptions['credentials'];
  readonly auth: { readonly username: string; readonly password: string } | undefined;
}

/**
 * Reads the files of `security`.
 * @throws Error (Node's, with `code`) when a file cannot be read.
 */
export function readEtcdSecrets(security: EtcdSecurity): EtcdSecrets {
  const hasTls = security.caFile !== undefined || security.certFile !== undefined;
  const credentials = hasTls
    ? {
        // Without a CA file, gRPC checks the server against its default roots (an absent rootCertificate).
        rootCertificate: (security.caFile ? readFileSync(security.caFile) : undefined) as Buffer,
        ...(security.keyFile ? { privateKey: readFileSync(security.keyFile) } : {}),
        ...(security.certFile ? { certChain: readFileSync(security.certFile) } : {}),
      }
    : undefined;
  const password =
    security.password ??
    (security.passwordFile ? readFileSync(security.passwordFile, 'utf8').replace(/\r?\n$/, '') : undefined);
  const auth =
    security.username !== undefined && password !== undefined
      ? { username: security.username, password }
      : undefined;
  return { credentials, auth };
}

/** A comparable fingerprint of what was read (never logged). */
function fingerprint(s: EtcdSecrets): string {
  const c = s.credentials;
  return JSON.stringify([
    c?.rootCertificate?.toString('base64'),
    c?.privateKey?.toString('base64'),
    c?.certChain?.toString('base64'),
    s.auth?.password,
  ]);
}

/** The parts of etcd3's connection pool that a reload touches (not in its public types). */
interface PoolInternals {
  options: IOptions;
  hosts: { channelCredentials: unknown; resetAllServices(): void }[];
  buildAuthentication(): unknown;
}

/**
 * Watches the directories of the files of `security` and applies changed contents to `client`. A file that cannot be read during a swap is retried at the next event; the client keeps what it
 * had, with a warning.
 * @returns a function that stops watching.
 */
export function watchEtcdSecrets(security: EtcdSecurity, client: Etcd3, log?: Logger): () => void {
  const files = [security.caFile, security.certFile, security.keyFile, security.passwordFile].filter(
    (f): f is string => f !== undefined,
  );
  if (files.length === 0) return () => undefined;
  let last = fingerprint(readEtcdSecrets(security));
  let timer: NodeJS.Timeout | undefined;
  const reload = () => {
    timer = undefined;
    let next: EtcdSecrets;
    try {
      next = readEtcdSecrets(security);
    } catch (err) {
      log?.warn(
        { err: (err as Error).message },
        'etcd secret file unreadable after a change; keeping the certificates and password in use',
      );
      return;
    }
    const print = fingerprint(next);
    if (print === last) return;
    last = print;
    const pool = (client as unknown as { pool: PoolInternals }).pool;
    if (next.credentials) pool.options.credentials = next.credentials;
    if (next.auth && pool.options.auth) pool.options.auth.password = next.auth.password;
    const credentials = pool.buildAuthentication();
    // Every connection re-opened now: a stream keeps the token it was opened with, and etcd checks it at
    // each watch it creates on the stream, so a watch stream opened before a password change would refuse
    // every new watch until it breaks. The session's keepalive stream reconnects within its ping interval.
    for (const host of pool.hosts) {
      host.channelCredentials = credentials;
      host.resetAllServices();
    }
    log?.info({ files }, 'etcd secret files changed: connections to etcd re-opened with them');
  };
  const watchers: FSWatcher[] = [];
  for (const dir of new Set(files.map((f) => dirname(f)))) {
    try {
      const w = watch(dir, { persistent: false }, () => {
        if (timer) clearTimeout(timer);
        timer = setTimeout(reload, SECRET_RELOAD_DEBOUNCE_MS);
        timer.unref();
      });
      w.on('error', (err) => log?.warn({ dir, err: err.message }, 'cannot watch etcd secret files'));
      watchers.push(w);
    } catch (err) {
      log?.warn(
        { dir, err: (err as Error).message },
        'cannot watch etcd secret files; a change needs a restart',
      );
    }
  }
  return () => {
    if (timer) clearTimeout(timer);
    for (const w of watchers) w.close();
  };
}
