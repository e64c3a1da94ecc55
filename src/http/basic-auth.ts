/**
 * HTTP Basic authentication (RFC 7617) for the dashboard and the JSON API. Probes and `/metrics` stay
 * open: kubelets and Prometheus scrape them without credentials, and they disclose no pod data.
 *
 * Failed attempts (a wrong `Authorization` header; a request without one only gets the challenge) are logged
 * at warn with the client address, sampled (src/http/auth-failures.ts), and after
 * `AUTH_FAILURES_ALLOWED` (10) in a row one address is slowed down: each further failure refuses every request
 * of that address under the protected paths for 1 s, doubling up to 60 s (`429` with `Retry-After`, the
 * credentials not even checked), so guessing a password costs a minute a try. A success resets the address.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { MonotonicClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import { createAuthFailures } from './auth-failures.ts';

/** Options of {@link registerBasicAuth}. */
export interface BasicAuthOptions {
  user: string;
  password: string;
  /** URL path prefixes that require credentials, e.g. `['/ui', '/api/']`. */
  protectedPrefixes: readonly string[];
  /** Shown by browsers in the login prompt. */
  realm?: string;
  /** Where failed attempts are logged (sampled). */
  log: Logger;
  /** The monotonic clock of the backoff, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
}

// Hashing both sides first gives equal-length buffers, so the comparison time says nothing about the secret.
const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Whether an `Authorization` header carries exactly these credentials. Pure; constant-time comparison. */
export function credentialsMatch(header: string | undefined, user: string, password: string): boolean {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!m?.[1]) return false;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  if (i < 0) return false;
  const userOk = timingSafeEqual(digest(decoded.slice(0, i)), digest(user));
  const passwordOk = timingSafeEqual(digest(decoded.slice(i + 1)), digest(password));
  return userOk && passwordOk;
}

/**
 * Adds an `onRequest` hook to requests under the protected prefixes: `401` with a Basic challenge without valid
 * credentials, `429` with `Retry-After` while the client's address is slowed down.
 */
export function registerBasicAuth(app: FastifyInstance, opts: BasicAuthOptions): void {
  const realm = opts.realm ?? 'spark-driver-cleaner';
  const failures = createAuthFailures({ log: opts.log, monotonicNow: opts.monotonicNow });
  app.addHook('onRequest', async (req, reply) => {
    // The matched route's pattern, not the raw URL: find-my-way decodes `%75i` to `ui` when routing.
    const path = req.routeOptions.url ?? req.url.split('?')[0] ?? '';
    if (!opts.protectedPrefixes.some((p) => path === p.replace(/\/$/, '') || path.startsWith(p))) return;
    const client = req.ip;
    const waitMs = failures.blockedForMs(client);
    if (waitMs > 0)
      return reply
        .code(429)
        .header('retry-after', String(Math.max(1, Math.ceil(waitMs / 1000))))
        .send({ error: 'too many failed logins from this address; retry later' });
    const header = req.headers.authorization;
    if (credentialsMatch(header, opts.user, opts.password)) {
      failures.succeeded(client);
      return;
    }
    if (header !== undefined) failures.failed(client, path);
    return reply
      .code(401)
      .header('www-authenticate', `Basic realm="${realm}", charset="UTF-8"`)
      .send({ error: 'authentication required' });
  });
}
