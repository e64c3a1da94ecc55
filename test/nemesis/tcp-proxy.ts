/**
 * A plain TCP relay on a stable loopback port in front of a service whose port changes (Redis restarted on
 * a fresh port): the clients keep one address, {@link TcpProxy.repoint} sends new connections elsewhere.
 * Each client connection gets one upstream connection; either side closing closes the other, as with a
 * direct connection. With no upstream (the service is down) a connection is closed at once, as a refused
 * one would be — never relayed to whatever process took the service's old port meanwhile.
 *
 * One client's own path to the service can fail while the others' work (a relay per client):
 * {@link TcpProxy.wedge} (connections hang: a black hole, a partition) and {@link TcpProxy.refuse} (connections
 * refused: nothing listens on the port), each until {@link TcpProxy.heal}.
 */
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

/** How a relay's path is cut (undefined: it relays). */
export type PathCut = 'wedged' | 'refused';

/** A running TCP relay. */
export interface TcpProxy {
  /** The stable front port on 127.0.0.1. */
  readonly port: number;
  /** The upstream port new connections go to; undefined while the service is down. */
  readonly upstreamPort: number | undefined;
  /** Connections relayed so far (for the tests). */
  readonly connections: number;
  /** How the path is cut now, if it is. */
  readonly cut: PathCut | undefined;
  /** Sends new connections to `port` (undefined: refuse them) and closes every relayed connection. */
  repoint(port: number | undefined): void;
  /** Closes every relayed connection (both sides) now. */
  cutAll(): void;
  /**
   * Wedges the path: every relayed connection stops carrying bytes both ways (each side's bytes are held, not
   * dropped), and new connections are accepted but carry nothing — the client sees connections that never
   * answer, as behind a black hole. {@link TcpProxy.heal} lets the held bytes through, as TCP retransmits
   * once a partition heals.
   */
  wedge(): void;
  /**
   * Refuses the path: closes every relayed connection and stops listening, so that connections to the port are
   * refused (ECONNREFUSED) until {@link TcpProxy.heal} listens on it again.
   */
  refuse(): Promise<void>;
  /**
   * Ends a wedge or a refusal. @throws when the port cannot be listened on again (another process took it
   * meanwhile).
   */
  heal(): Promise<void>;
  close(): Promise<void>;
}

/** Starts a relay on a free loopback port to `upstreamPort` on 127.0.0.1. */
export async function startTcpProxy(upstreamPort: number | undefined): Promise<TcpProxy> {
  let upstream = upstreamPort;
  let connections = 0;
  let cut: PathCut | undefined;
  const pairs = new Set<{ down: Socket; up: Socket }>();
  /** Client connections accepted while wedged, relayed once healed. */
  const held = new Set<Socket>();

  const relay = (down: Socket) => {
    if (upstream === undefined) {
      down.destroy();
      return;
    }
    connections++;
    const up = connect(upstream, '127.0.0.1');
    const pair = { down, up };
    pairs.add(pair);
    const cutPair = () => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    for (const s of [down, up]) {
      s.on('error', cutPair);
      s.on('close', cutPair);
    }
    down.pipe(up);
    up.pipe(down);
  };
  const server = createServer((down) => {
    if (cut === 'wedged') {
      // Accepted (the kernel did so already) and left silent: nothing reads or answers it.
      down.pause();
      held.add(down);
      const forget = () => held.delete(down);
      down.on('error', forget);
      down.on('close', forget);
      return;
    }
    relay(down);
  });
  const cutAll = () => {
    for (const p of [...pairs]) {
      p.down.destroy();
      p.up.destroy();
    }
    pairs.clear();
    for (const s of [...held]) s.destroy();
    held.clear();
  };
  const listen = async (port: number) => {
    server.listen(port, '127.0.0.1');
    await Promise.race([
      once(server, 'listening'),
      once(server, 'error').then(([err]) => {
        throw err;
      }),
    ]);
  };
  await listen(0);
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    get upstreamPort() {
      return upstream;
    },
    get connections() {
      return connections;
    },
    get cut() {
      return cut;
    },
    repoint(next) {
      upstream = next;
      cutAll();
    },
    cutAll,
    wedge() {
      if (cut) return;
      cut = 'wedged';
      for (const { down, up } of pairs) {
        down.unpipe(up);
        up.unpipe(down);
        down.pause();
        up.pause();
      }
    },
    async refuse() {
      if (cut) return;
      cut = 'refused';
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    async heal() {
      const was = cut;
      cut = undefined;
      if (was === 'refused') {
        await listen(port);
        return;
      }
      if (was !== 'wedged') return;
      for (const { down, up } of pairs) {
        down.pipe(up);
        up.pipe(down);
      }
      for (const down of [...held]) {
        held.delete(down);
        relay(down);
        down.resume();
      }
    },
    async close() {
      cutAll();
      if (cut === 'refused') return;
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
