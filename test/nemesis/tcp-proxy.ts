/**
 * A plain TCP relay on a stable loopback port in front of a service whose port changes (Redis restarted on
 * a fresh port): the clients keep one address, {@link TcpProxy.repoint} sends new connections elsewhere.
 * Each client connection gets one upstream connection; either side closing closes the other, as with a
 * direct connection. With no upstream (the service is down) a connection is closed at once, as a refused
 * one would be — never relayed to whatever process took the service's old port meanwhile.
 */
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

/** A running TCP relay. */
export interface TcpProxy {
  /** The stable front port on 127.0.0.1. */
  readonly port: number;
  /** The upstream port new connections go to; undefined while the service is down. */
  readonly upstreamPort: number | undefined;
  /** Connections relayed so far (for the tests). */
  readonly connections: number;
  /** Sends new connections to `port` (undefined: refuse them) and closes every relayed connection. */
  repoint(port: number | undefined): void;
  /** Closes every relayed connection (both sides) now. */
  cutAll(): void;
  close(): Promise<void>;
}

/** Starts a relay on a free loopback port to `upstreamPort` on 127.0.0.1. */
export async function startTcpProxy(upstreamPort: number | undefined): Promise<TcpProxy> {
  let upstream = upstreamPort;
  let connections = 0;
  const pairs = new Set<{ down: Socket; up: Socket }>();
  const server = createServer((down) => {
    if (upstream === undefined) {
      down.destroy();
      return;
    }
    connections++;
    const up = connect(upstream, '127.0.0.1');
    const pair = { down, up };
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    for (const s of [down, up]) {
      s.on('error', cut);
      s.on('close', cut);
    }
    down.pipe(up);
    up.pipe(down);
  });
  const cutAll = () => {
    for (const p of [...pairs]) {
      p.down.destroy();
      p.up.destroy();
    }
    pairs.clear();
  };
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    get upstreamPort() {
      return upstream;
    },
    get connections() {
      return connections;
    },
    repoint(next) {
      upstream = next;
      cutAll();
    },
    cutAll,
    async close() {
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
