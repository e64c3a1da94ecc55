/**
 * A TCP relay in front of a ZooKeeper server that can lose answers. It reads the client's side of ZooKeeper's
 * wire protocol (4-byte big-endian length, then the packet; the first packet of a connection is the
 * ConnectRequest, every later one starts with `xid` and `type`), and on command lets a create through to the
 * server, then relays nothing more to the client: after `holdMs` it cuts the connection. The node exists on
 * the server, under the client's live session; its creator never heard the answer — it reconnects with the
 * same session and must find the node it made (the protected `_c_<uuid>` name of Curator's recipe), not make
 * a second one.
 *
 * Each client connection gets one upstream connection; either side closing closes the other. With no
 * upstream (the server is down) a connection is closed at once, as a refused one would be.
 */
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

/** ZooKeeper's opcodes of a create: create, create2, createContainer, createTTL. */
const CREATE_OPS = new Set([1, 15, 19, 21]);

/** What to lose: the answers of `count` creates within a window. */
export interface ZooKeeperDropSpec {
  /** How many create answers to lose (each one cuts one client connection). */
  count: number;
  /** The fault ends after this long even if fewer answers were lost, ms. */
  durationMs: number;
  /** How long the connection stays open and silent after the create went through, ms. */
  holdMs: number;
  /**
   * Then refuse new connections (default false): the client must reconnect to another server of its connect
   * string, one that may not have applied the create yet.
   */
  thenRefuse?: boolean;
}

/** Options of {@link startZooKeeperProxy}. */
export interface ZooKeeperProxyOptions {
  /** Called with the opcode of each request a client sends (ZooKeeper's `OpCode`: 1 create, 9 sync, …). */
  onRequest?: (op: number) => void;
}

/** A running ZooKeeper relay. */
export interface ZooKeeperProxy {
  /** `127.0.0.1:PORT`: the connect string the clients get. */
  readonly connect: string;
  /** Arms an answer-losing fault; `done` resolves with the number of answers lost. */
  dropAnswers(spec: ZooKeeperDropSpec): { done: Promise<number> };
  /** Creates seen and create answers lost so far (for the report). */
  readonly stats: { creates: number; dropped: number };
  /** Sends new connections to `port` (undefined: refuse them) and closes every relayed connection. */
  repoint(port: number | undefined): void;
  close(): Promise<void>;
}

/** Starts a relay on a free loopback port to `upstreamPort` on 127.0.0.1. */
export async function startZooKeeperProxy(
  upstreamPort: number | undefined,
  opts: ZooKeeperProxyOptions = {},
): Promise<ZooKeeperProxy> {
  let upstream = upstreamPort;
  const stats = { creates: 0, dropped: 0 };
  /** The armed fault: answers still to lose, and its end (performance.now() ms). */
  let armed:
    | { left: number; untilMs: number; holdMs: number; thenRefuse: boolean; lost: () => void }
    | undefined;
  const pairs = new Set<{ down: Socket; up: Socket }>();
  const cutAll = () => {
    for (const p of [...pairs]) {
      p.down.destroy();
      p.up.destroy();
    }
    pairs.clear();
  };
  const server = createServer((down) => {
    if (upstream === undefined) {
      down.destroy();
      return;
    }
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
    let silent = false;
    let pending = Buffer.alloc(0);
    let first = true;
    down.on('data', (chunk: Buffer) => {
      up.write(chunk);
      if (silent) return;
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const len = pending.readInt32BE(0);
        if (pending.length < 4 + len) break;
        const packet = pending.subarray(4, 4 + len);
        pending = pending.subarray(4 + len);
        if (first) {
          first = false;
          continue;
        }
        if (packet.length < 8) continue;
        const op = packet.readInt32BE(4);
        opts.onRequest?.(op);
        if (!CREATE_OPS.has(op)) continue;
        stats.creates++;
        const a = armed;
        if (!a || a.left <= 0 || performance.now() > a.untilMs) continue;
        a.left--;
        stats.dropped++;
        a.lost();
        silent = true;
        if (a.thenRefuse) upstream = undefined;
        setTimeout(cut, a.holdMs).unref();
        break;
      }
    });
    up.on('data', (chunk: Buffer) => {
      if (!silent) down.write(chunk);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    connect: `127.0.0.1:${port}`,
    stats,
    dropAnswers(spec) {
      let lost = 0;
      let finish: (n: number) => void = () => {};
      const done = new Promise<number>((resolve) => {
        finish = resolve;
      });
      const timer = setTimeout(() => {
        armed = undefined;
        finish(lost);
      }, spec.durationMs);
      armed = {
        left: spec.count,
        untilMs: performance.now() + spec.durationMs,
        holdMs: spec.holdMs,
        thenRefuse: spec.thenRefuse ?? false,
        lost: () => {
          lost++;
          if (lost >= spec.count) {
            clearTimeout(timer);
            armed = undefined;
            // The fault lasts until the connection is cut.
            setTimeout(() => finish(lost), spec.holdMs);
          }
        },
      };
      return { done };
    },
    repoint(next) {
      upstream = next;
      cutAll();
    },
    async close() {
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
