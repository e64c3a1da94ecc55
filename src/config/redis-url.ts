/**
 * What a Redis URL must be for the Redis client (ioredis) to use it as written, checked when the configuration
 * is loaded so that `run --check`, `run` and `status` all refuse it (exit 2) instead of the client crashing or
 * retrying forever:
 *
 * - ioredis decodes the userinfo with `decodeURIComponent`: a `%` not followed by two hex digits throws
 *   `URIError: URI malformed` at connect;
 * - the path is the database number (`/0`), as is a `db` query parameter: ioredis sends `SELECT <text>`, and
 *   text that is no number fails with a reply error outside any handler;
 * - a fragment (`#…`) is not sent anywhere: it is usually a password whose `#` was not percent-encoded;
 * - a port above 65535 makes the whole URL unparseable, which deserves its own message.
 *
 * Whether the server has the database (16 unless its `databases` setting says otherwise) is only known by
 * asking it: src/queue/redis-access-check.ts does at start.
 */

/** Redis's default number of databases (`databases 16`): `/0` to `/15`. */
export const REDIS_DEFAULT_DATABASES = 16;

const ENCODING_FIX =
  'percent-encode reserved characters in it: % as %25, @ as %40, # as %23, : as %3A, / as %2F';

/**
 * Why `text`, which does not parse as a URL, cannot be used, in words that point at the fix; undefined when no
 * more precise reason than "not a URL" is known.
 */
export function unparseableUrlProblem(text: string): string | undefined {
  // Up to the last `@`: a password may hold (unencoded) any character.
  const authority = /^[a-z][a-z0-9+.-]*:\/\/(?:.*@)?(\[[^\]]*\]|[^:/?#@[\]]*)(?::(\d+))?(?:[/?#]|$)/i.exec(
    text,
  );
  const port = authority?.[2];
  if (port !== undefined && Number(port) > 65535) return `port ${port} is out of range; expected 1 to 65535`;
  if (text.includes('#'))
    return `not a URL: a "#" ends the address there (a fragment); if it is part of the password, ${ENCODING_FIX}`;
  return undefined;
}

/** A `db` value (the path without `/`, or the query parameter) that ioredis can SELECT; undefined when fine. */
function databaseProblem(db: string, where: string): string | undefined {
  if (/^\d{1,9}$/.test(db)) return undefined;
  return (
    `the database (${where}) is not a number; expected /0 to /${REDIS_DEFAULT_DATABASES - 1} ` +
    `(Redis has ${REDIS_DEFAULT_DATABASES} databases unless its databases setting says otherwise), or none for 0`
  );
}

/** Why the parsed Redis URL `u` cannot be used as written; undefined when it can. */
export function redisUrlProblem(u: URL): string | undefined {
  for (const [part, value] of [
    ['user', u.username],
    ['password', u.password],
  ] as const) {
    try {
      decodeURIComponent(value);
    } catch {
      return `the ${part} has malformed percent-encoding (a % not followed by two hex digits); ${ENCODING_FIX}`;
    }
  }
  if (u.hash)
    return `a fragment (#…) is ignored by the Redis client; if it is part of the password, ${ENCODING_FIX}`;
  const path = u.pathname.replace(/^\//, '');
  if (path !== '') {
    const problem = databaseProblem(path, `/${path}`);
    if (problem) return problem;
  }
  const db = u.searchParams.get('db');
  if (db !== null) return databaseProblem(db, `db=${db}`);
  return undefined;
}
