/**
 * Small HTTP helpers shared by the routes: reading a bounded body, writing JSON and Status answers
 * the way kube-apiserver does (`Content-Type: application/json`, Status body with code = HTTP code).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isGone } from './h2.ts';
import { badRequest, KubeStatusError, unsupportedMediaType } from './status.ts';

/** Largest request body accepted, in bytes (kube-apiserver's limit is 3 MiB). */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;

/** Reads the whole request body as UTF-8. @throws KubeStatusError 413 when over {@link MAX_BODY_BYTES}. */
export async function readBody(req: IncomingMessage): Promise<string> {
  return (await readBodyBytes(req)).toString('utf8');
}

/** Reads the whole request body as bytes. @throws KubeStatusError 413 when over {@link MAX_BODY_BYTES}. */
export async function readBodyBytes(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) {
      throw new KubeStatusError({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Request entity too large: limit is 3145728',
        reason: 'RequestEntityTooLarge',
        code: 413,
      });
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The media type of a Content-Type header without parameters, lower-cased ('' when absent). */
export function mediaType(req: IncomingMessage): string {
  const ct = req.headers['content-type'];
  return (ct ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

/**
 * Parses a JSON request body after checking its content type is one of `accepted`.
 * @throws KubeStatusError 415 for another content type, 400 for malformed JSON (kube's wording:
 *   `couldn't get version/kind; json parse error: …`).
 */
export function parseJsonBody(req: IncomingMessage, body: string, accepted: readonly string[]): unknown {
  const type = mediaType(req);
  if (!accepted.includes(type)) throw unsupportedMediaType(accepted.join(', '));
  try {
    return JSON.parse(body);
  } catch (err) {
    throw badRequest(`couldn't get version/kind; json parse error: ${(err as Error).message}`);
  }
}

const prettyResponses = new WeakSet<ServerResponse>();

/**
 * Asks for this response's JSON answer (not a watch stream's events) indented by two spaces, as `pretty=true`
 * does (handlers/negotiation/negotiate.go isPrettyPrint; json.MarshalIndent).
 */
export function markPretty(res: ServerResponse): void {
  prettyResponses.add(res);
}

/** Writes a JSON answer. `json` is already serialized. */
export function sendJson(
  res: ServerResponse,
  code: number,
  json: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || isGone(res)) return;
  if (prettyResponses.has(res)) json = `${JSON.stringify(JSON.parse(json), null, 2)}\n`;
  res.writeHead(code, {
    'Content-Type': 'application/json',
    'Cache-Control': 'no-cache, private',
    'Content-Length': Buffer.byteLength(json),
    ...headers,
  });
  res.end(json);
}

/** Writes a Status error answer; unexpected errors become 500 InternalError. */
export function sendError(res: ServerResponse, err: unknown): void {
  if (err instanceof KubeStatusError) {
    sendJson(res, err.code, JSON.stringify(err.status), err.headers);
    return;
  }
  const message = err instanceof Error ? err.message : String(err);
  sendJson(
    res,
    500,
    JSON.stringify({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `Internal error occurred: ${message}`,
      reason: 'InternalError',
      details: { causes: [{ message }] },
      code: 500,
    }),
  );
}
