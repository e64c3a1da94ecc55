/**
 * A TCP relay in front of a ZooKeeper server that can lose answers. It reads the client's side of ZooKeeper's
 * wire protocol (4-byte big-endian length, then the packet; the first packet of a connection is the
 * ConnectRequest, every later one starts with `xid` and `type`), and on command lets a create through to the
 * server, then relays nothing more to the client; once the server has answered the create (it applied it),
 * it cuts the connection `holdMs` later. The node exists on the server, under the client's live session; its
 * creator never heard the answer — it reconnects with the same session and must find the node it made (the
 * protected `_c_<uuid>` name of Curator's recipe), not make a second one.
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
  /** How long the connection stays open and silent after the server answered the create, ms. */
  holdMs: number;
  /**
   * Then refuse new connections (default false): the client must reconnect to another server of its connect
   * string, one that may not have applied the create yet.
   */
  thenRefuse?: boolean;
}

/**
 * An armed answer-losing fault: one budget of answers, which several relays may share (one relay per server of
 * an ensemble: `count` answers lost in all, on whichever servers the creates go to).
 */
export interface DropFault {
  readonly holdMs: number;
  readonly thenRefuse: boolean;
  /** Takes one answer to lose now from the budget: false once it is spent or the fault is over. */
  take(): boolean;
  /** Resolves with the number of answers lost, once the last one's connection was cut or the fault ended. */
  readonly done: Promise<number>;
}

/** Creates a fault from `spec`; it ends after `spec.durationMs` or once `spec.count` answers are lost. */
export function createDropFault(spec: ZooKeeperDropSpec): DropFault {
  let lost = 0;
  let over = false;
  let finish: (n: number) => void = () => {};
  const done = new Promise<number>((resolve) => {
    finish = resolve;
  });
  const timer = setTimeout(() => {
    over = true;
    finish(lost);
  }, spec.durationMs);
  return {
    holdMs: spec.holdMs,
    thenRefuse: spec.thenRefuse ?? false,
    take() {
      if (over || lost >= spec.count) return false;
      lost++;
      if (lost >= spec.count) {
        over = true;
        clearTimeout(timer);
        // The fault lasts until the connection is cut.
        setTimeout(() => finish(lost), spec.holdMs);
      }
      return true;
    },
    done,
  };
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
  /** Arms a fault that other relays may share (replacing the one armed before). */
  arm(fault: DropFault): void;
  /** Creates seen and create answers lost so far (for the report). */
  readonly stats: { creates: number; dropped: number };
  /** Sends new connections to `port` (undefined: refuse them) and closes every relayed connection. */
  repoint(port: number | undefined): void;
  /**
   * Refuses new connections and closes the relayed ones (`true`), or relays new ones again (`false`, leaving
   * the open ones be): a client that may not use this server for a while.
   */
  block(on: boolean): void;
  /** Connections relayed now. */
  readonly open: number;
  close(): Promise<void>;
}

/** Starts a relay on a free loopback port to `upstreamPort` on 127.0.0.1. */
export async function startZooKeeperProxy(
  upstreamPort: number | undefined,
  opts: ZooKeeperProxyOptions = {},
): Promise<ZooKeeperProxy> {
  let upstream = upstreamPort;
  let blocked = false;
  const stats = { creates: 0, dropped: 0 };
  let armed: DropFault | undefined;
  const pairs = new Set<{ down: Socket; up: Socket }>();
  const cutAll = () => {
    for (const p of [...pairs]) {
      p.down.destroy();
      p.up.destroy();
    }
    pairs.clear();
  };
  const server = createServer((down) => {
    if (upstream === undefined || blocked) {
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
        if (!a?.take()) continue;
        stats.dropped++;
        silent = true;
        if (a.thenRefuse) upstream = undefined;
        // Cut `holdMs` after the server's answer (the create applied), or at the latest 10 s after that.
        awaited = { xid: packet.readInt32BE(0), holdMs: a.holdMs };
        setTimeout(cut, a.holdMs + 10_000).unref();
        break;
      }
    });
    /** The create whose answer is awaited, by its `xid`. */
    let awaited: { xid: number; holdMs: number } | undefined;
    let fromServer = Buffer.alloc(0);
    let firstAnswer = true;
    up.on('data', (chunk: Buffer) => {
      if (!silent) down.write(chunk);
      // The server's side, frame by frame: the ConnectResponse, then answers starting with their `xid`.
      fromServer = Buffer.concat([fromServer, chunk]);
      while (fromServer.length >= 4) {
        const len = fromServer.readInt32BE(0);
        if (fromServer.length < 4 + len) break;
        const frame = fromServer.subarray(4, 4 + len);
        fromServer = fromServer.subarray(4 + len);
        if (firstAnswer) {
          firstAnswer = false;
          continue;
        }
        if (awaited && frame.length >= 4 && frame.readInt32BE(0) === awaited.xid) {
          setTimeout(cut, awaited.holdMs).unref();
          awaited = undefined;
        }
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    connect: `127.0.0.1:${port}`,
    stats,
    dropAnswers(spec) {
      armed = createDropFault(spec);
      return { done: armed.done };
    },
    arm(fault) {
      armed = fault;
    },
    repoint(next) {
      upstream = next;
      cutAll();
    },
    block(on) {
      blocked = on;
      if (on) cutAll();
    },
    get open() {
      return pairs.size;
    },
    async close() {
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
