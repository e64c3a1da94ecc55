/**
 * List `continue` tokens as kube-apiserver writes and reads them (staging/src/k8s.io/apiserver/pkg/storage/
 * continue.go): base64url without padding of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`, where
 * `rv` is the revision the first page was read at (every page is read at it: one consistent list) and `start`
 * is the etcd key after the last item returned, relative to the list's key prefix (`name\0` in a namespace,
 * `namespace/name\0` across namespaces). `rv: -1` is the token of a 410 answer: continue at the latest revision.
 */
import { posix } from 'node:path';
import { badRequest } from './status.ts';

/** A decoded token. */
export interface ContinueToken {
  /** Revision of the list's snapshot; -1 for "the latest" (the inconsistent continuation of a 410). */
  rv: number;
  /** First key to read (inclusive), relative to the list's key prefix; ends in `\0` after the last key read. */
  start: string;
}

/** Encodes a token (EncodeContinue). `start` is relative to the key prefix. */
export function encodeContinue(rv: number, start: string): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv, start })).toString('base64url');
}

function invalid(detail: string): never {
  throw badRequest(`invalid continue token: continue key is not valid${detail ? `: ${detail}` : ''}`);
}

/**
 * Decodes a token as DecodeContinue does, as strictly: base64url without padding, JSON with `v`
 * `meta.k8s.io/v1`, a non-zero integer `rv`, a non-empty `start` that is a clean path (no `..`, `//`,
 * trailing `/`: a token cannot reach outside the list's key prefix).
 * @throws KubeStatusError 400 BadRequest `invalid continue token: continue key is not valid…`.
 */
export function decodeContinue(token: string): ContinueToken {
  // Go's base64.RawURLEncoding: URL alphabet, no padding; a length of 4n+1 cannot be decoded.
  if (!/^[A-Za-z0-9_-]*$/.test(token) || token.length % 4 === 1) invalid('illegal base64 data');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch (err) {
    invalid((err as Error).message);
  }
  const t = (parsed ?? {}) as { v?: unknown; rv?: unknown; start?: unknown };
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) invalid('not a JSON object');
  if (t.v !== undefined && typeof t.v !== 'string') invalid('"v" is not a string');
  if (t.rv !== undefined && !Number.isSafeInteger(t.rv)) invalid('"rv" is not an integer');
  if (t.start !== undefined && typeof t.start !== 'string') invalid('"start" is not a string');
  if (t.v !== 'meta.k8s.io/v1') invalid(`server does not recognize this encoded version ${t.v ?? ''}`);
  const rv = (t.rv as number | undefined) ?? 0;
  const start = (t.start as string | undefined) ?? '';
  if (rv === 0) invalid('incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  if (start === '') invalid('encoded start key empty (version meta.k8s.io/v1)');
  const key = start.startsWith('/') ? start : `/${start}`;
  // path.Clean: normalize, and no trailing slash (except the root itself).
  const cleaned = posix.normalize(key);
  if (cleaned !== key || (key.length > 1 && key.endsWith('/'))) invalid(start);
  return { rv, start: key.slice(1) };
}
