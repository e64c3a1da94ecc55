/**
 * HTTP Basic authentication (RFC 7617) for the dashboard and the JSON API. Probes and `/metrics` stay
 * open: kubelets and Prometheus scrape them without credentials, and they disclose no pod data.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';

/** Options of {@link registerBasicAuth}. */
export interface BasicAuthOptions {
  user: string;
  password: string;
  /** URL path prefixes that require credentials, e.g. `['/ui', '/api/']`. */
  protectedPrefixes: readonly string[];
  /** Shown by browsers in the login prompt. */
  realm?: string;
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

/** Adds an `onRequest` hook answering 401 with a Basic challenge to requests under the protected prefixes. */
export function registerBasicAuth(app: FastifyInstance, opts: BasicAuthOptions): void {
  const realm = opts.realm ?? 'spark-driver-cleaner';
  app.addHook('onRequest', async (req, reply) => {
    // The matched route's pattern, not the raw URL: find-my-way decodes `%75i` to `ui` when routing.
    const path = req.routeOptions.url ?? req.url.split('?')[0] ?? '';
    if (!opts.protectedPrefixes.some((p) => path === p.replace(/\/$/, '') || path.startsWith(p))) return;
    if (credentialsMatch(req.headers.authorization, opts.user, opts.password)) return;
    return reply
      .code(401)
      .header('www-authenticate', `Basic realm="${realm}", charset="UTF-8"`)
      .send({ error: 'authentication required' });
  });
}
