/**
 * What the routes need to know about an answer served over HTTP/2 (the `http2` option of the sandbox, through
 * node:http2's compatibility API): HTTP/1.1 connection headers are forbidden there, a "reset" resets the one
 * stream (RST_STREAM, the other streams of the connection live on), and `res.destroyed` does not exist.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { constants, type Http2ServerResponse } from 'node:http2';

/** The h2 stream of an answer, or undefined for an HTTP/1.1 one. */
function h2Stream(res: ServerResponse): Http2ServerResponse['stream'] | undefined {
  return (res as unknown as Partial<Http2ServerResponse>).stream;
}

/** True when `res` answers an HTTP/2 request (node:http2 compatibility API). */
export function isHttp2(res: ServerResponse): boolean {
  return h2Stream(res) !== undefined;
}

/** True once nothing more can be written to `res`: destroyed (HTTP/1.1) or its h2 stream closed. */
export function isGone(res: ServerResponse): boolean {
  const stream = h2Stream(res);
  return stream ? stream.destroyed || stream.closed : res.destroyed;
}

/**
 * Resets the request without an answer. HTTP/1.1: destroys the TCP connection. HTTP/2: resets only this
 * stream with RST_STREAM INTERNAL_ERROR (what Go's server, kube-apiserver's, sends for an aborted handler);
 * the connection and its other streams (other watches) carry on.
 */
export function resetRequest(req: IncomingMessage, res: ServerResponse): void {
  const stream = h2Stream(res);
  if (stream) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
  else req.socket.destroy();
}

/** Ends `res` mid-answer as a reset: {@link resetRequest} without the request. */
export function resetResponse(res: ServerResponse): void {
  const stream = h2Stream(res);
  if (stream) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
  else res.destroy();
}
