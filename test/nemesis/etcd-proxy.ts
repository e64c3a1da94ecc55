/**
 * A proxy in front of etcd's client port (gRPC over cleartext HTTP/2) that can lose answers: on command,
 * it forwards a matching call to etcd, waits until etcd has answered it (the request was applied), and
 * then, instead of relaying the answer, either resets that call's stream (`reset`: the client gets
 * INTERNAL on a connection that stays up, and etcd3 retries it at once — re-sending a request that was
 * already applied: the "retried campaign" case of etcd's `concurrency` package) or cuts the client's
 * connection (`cut`: UNAVAILABLE; etcd3's immediate retries then fail before a new connection is up, so
 * the caller sees the error and decides).
 *
 * Each client connection gets one upstream connection of its own, so the proxy behaves as a TCP relay
 * would: etcd down → the client's connection is closed; a cut closes both sides. HTTP/2 is terminated on
 * both sides (node:http2), which is what lets it see which call (`:path`) an answer belongs to.
 */
import { once } from 'node:events';
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect,
  constants,
  createServer,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';

/** What to lose: the answers of calls whose path matches, `count` of them, within a window. */
export interface DropAnswersSpec {
  /** Regular expression source matched against the gRPC path, e.g. `^/etcdserverpb\.KV/Txn$`. */
  path: string;
  /** How many answers to lose (each one cuts one client connection). */
  count: number;
  /** The fault ends after this long even if fewer answers were lost, ms. */
  durationMs: number;
  /** `reset` the call's stream (the connection stays) or `cut` the whole connection. */
  mode: 'reset' | 'cut';
  /**
   * How long the answer is held before it is lost, ms: a slow answer that then fails, as when the client
   * times out. Other clients' writes meanwhile move etcd's revision on, so the retry's answer (a failed
   * compare) carries a later revision than the one the first attempt created its key at.
   */
  holdMs: number;
}

/** A running etcd proxy. */
export interface EtcdProxy {
  /** `http://127.0.0.1:PORT`: give it to the clients as their etcd endpoint. */
  readonly url: string;
  /** Arms an answer-dropping fault; returns a handle whose `done` resolves with the number of answers lost. */
  dropAnswers(spec: DropAnswersSpec): { done: Promise<number>; cancel(): void };
  /** Calls seen per gRPC path, and answers lost per path (for the report). */
  readonly stats: { calls: Map<string, number>; dropped: Map<string, number> };
  /** Closes every connection (both sides) now. */
  cutAll(): void;
  /**
   * Sends new connections to `upstreamUrl` (etcd restarted on a fresh port) and closes every open one; with
   * undefined (etcd down) new connections are closed at once — never relayed to whatever took etcd's old
   * port meanwhile. Armed drops stay armed.
   */
  repoint(upstreamUrl: string | undefined): void;
  close(): Promise<void>;
}

interface ArmedDrop {
  pattern: RegExp;
  mode: DropAnswersSpec['mode'];
  holdMs: number;
  remaining: number;
  lost: number;
  expiresAt: number;
  finish: () => void;
}

/** Pseudo-headers and hop-by-hop fields that node:http2 sets itself or refuses to forward. */
const NOT_FORWARDED = new Set([':method', ':path', ':scheme', ':authority', ':status', 'connection']);

function forwardable(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) if (!NOT_FORWARDED.has(k) && v !== undefined) out[k] = v;
  return out;
}

/**
 * Starts a proxy on a free loopback port forwarding to `upstreamUrl` (`http://127.0.0.1:PORT` of an etcd
 * member). Connections made while etcd is down are closed at once, as a refused TCP connection would be.
 */
export async function startEtcdProxy(upstreamUrl: string): Promise<EtcdProxy> {
  let upstream: string | undefined = upstreamUrl;
  const drops = new Set<ArmedDrop>();
  const stats = { calls: new Map<string, number>(), dropped: new Map<string, number>() };
  const pairs = new Set<{ down: ServerHttp2Session; up: ClientHttp2Session }>();
  const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

  /** Takes one drop for this path if a fault is armed and unexpired: how to lose the answer, if it must be. */
  const takeDrop = (path: string): Pick<DropAnswersSpec, 'mode' | 'holdMs'> | undefined => {
    const now = performance.now();
    for (const d of drops) {
      if (d.expiresAt <= now) {
        drops.delete(d);
        d.finish();
        continue;
      }
      if (!d.pattern.test(path)) continue;
      d.remaining--;
      d.lost++;
      if (d.remaining <= 0) {
        drops.delete(d);
        d.finish();
      }
      return { mode: d.mode, holdMs: d.holdMs };
    }
    return undefined;
  };

  const server = createServer();
  server.on('session', (down: ServerHttp2Session) => {
    if (upstream === undefined) {
      down.destroy();
      return;
    }
    const up = connect(upstream);
    const pair = { down, up };
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      if (!down.destroyed) down.destroy();
      if (!up.destroyed) up.destroy();
    };
    // Either side gone (etcd killed, client gone, a cut): the other goes too, as with one TCP relay.
    up.on('error', cut);
    up.on('close', cut);
    up.on('goaway', cut);
    down.on('error', cut);
    down.on('close', cut);
    down.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) =>
      relay(stream, headers, up, cut),
    );
  });

  function relay(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    up: ClientHttp2Session,
    cut: () => void,
  ): void {
    const path = String(headers[':path'] ?? '');
    bump(stats.calls, path);
    let upStream: ClientHttp2Stream;
    try {
      upStream = up.request({ ':method': 'POST', ':path': path, ...forwardable(headers) });
    } catch {
      cut();
      return;
    }
    const lose = takeDrop(path);
    let trailers: OutgoingHttpHeaders = {};
    stream.pipe(upStream);
    stream.on('close', () => {
      if (!upStream.closed) upStream.close(stream.rstCode ?? constants.NGHTTP2_CANCEL);
    });
    stream.on('error', () => undefined);
    upStream.on('error', () => undefined);
    if (lose) {
      // Read the whole answer (etcd applied the request), then lose it instead of relaying it.
      upStream.resume();
      upStream.on('close', () => {
        bump(stats.dropped, path);
        setTimeout(() => {
          if (lose.mode === 'cut') cut();
          else if (!stream.closed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
        }, lose.holdMs);
      });
      return;
    }
    upStream.on('response', (h, flags) => {
      if (stream.destroyed) return;
      // A trailers-only answer (an error status) comes as one HEADERS frame that ends the stream.
      if ((flags ?? 0) & constants.NGHTTP2_FLAG_END_STREAM) {
        stream.respond({ ':status': h[':status'] ?? 200, ...forwardable(h) }, { endStream: true });
        return;
      }
      stream.respond({ ':status': h[':status'] ?? 200, ...forwardable(h) }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers(trailers));
      upStream.pipe(stream);
    });
    upStream.on('trailers', (t) => {
      trailers = forwardable(t);
    });
    upStream.on('close', () => {
      // Reset by etcd before a full answer: reset the client's stream too (a clean end is piped through).
      const code = upStream.rstCode ?? constants.NGHTTP2_CANCEL;
      if (!stream.closed && (!stream.headersSent || code !== constants.NGHTTP2_NO_ERROR)) stream.close(code);
    });
  }

  function cutAll(): void {
    for (const p of [...pairs]) {
      p.down.destroy();
      p.up.destroy();
    }
    pairs.clear();
  }

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    stats,
    dropAnswers(spec) {
      let finish: () => void = () => {};
      const done = new Promise<number>((resolve) => {
        finish = () => resolve(armed.lost);
      });
      const armed: ArmedDrop = {
        pattern: new RegExp(spec.path),
        mode: spec.mode,
        holdMs: spec.holdMs,
        remaining: spec.count,
        lost: 0,
        expiresAt: performance.now() + spec.durationMs,
        finish,
      };
      drops.add(armed);
      const timer = setTimeout(() => {
        drops.delete(armed);
        armed.finish();
      }, spec.durationMs);
      timer.unref();
      void done.then(() => clearTimeout(timer));
      return {
        done,
        cancel: () => {
          drops.delete(armed);
          armed.finish();
        },
      };
    },
    cutAll,
    repoint(next) {
      upstream = next;
      cutAll();
    },
    async close() {
      for (const d of drops) d.finish();
      drops.clear();
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
