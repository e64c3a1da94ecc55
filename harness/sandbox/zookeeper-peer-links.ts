/**
 * The links between the servers of a local ZooKeeper ensemble (harness/sandbox/local-zookeeper.ts), each
 * through a TCP relay of its own, so that a test can cut one server off from its peers while its clients
 * still reach it, or make one follower lag behind the leader.
 *
 * Every server `i` reaches server `j` (its quorum port, where a follower connects to the leader, and its
 * election port) through the relay `i→j`: server i's configuration names the relays' ports for its peers and
 * `0.0.0.0` for itself. ZooKeeper's election connects back to the address a peer announces for itself unless
 * that address is a wildcard (QuorumCnxManager's InitialMessage): with `0.0.0.0` it uses its own
 * configuration, so every election connection goes through a relay too.
 *
 * - **Cut** (a partition): the relays of every link from and to a server stop relaying, silently — bytes are
 *   read and dropped, nothing is closed, new connections are accepted and get no answer — as when the network
 *   drops packets. The server notices only by its own timeouts (a follower gives up on its leader after
 *   `syncLimit × tickTime`). Healed, the connections left from the cut are closed (as TCP gives up) and new
 *   ones are relayed.
 * - **Lag** (a follower that has not applied what the quorum committed): on a follower's link to the leader,
 *   the leader's proposals and commits are held back while its pings and session revalidations go through
 *   (ZooKeeper's packets are read: `QuorumPacket`, jute, and the raw snapshot a SNAP packet is followed by);
 *   anything else queues behind what is held, in order,
 *   so a `sync` through that follower waits for the held commits, as ZooKeeper's ordering requires. Released,
 *   everything held goes out in order.
 */
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

/** The leader's packet types (ZooKeeper's `Leader`): held, let through ahead, or kept in order. */
const PROPOSAL = 2;
const COMMIT = 4;
const PING = 5;
const REVALIDATE = 6;
const SNAP = 15;

/** One direction's relay of a peer link: server `from` to the port `to` listens on. */
interface LinkRelay {
  readonly from: number;
  readonly to: number;
  readonly kind: 'quorum' | 'election';
  port: number;
  server: Server;
  cut: boolean;
  /** The hold on this link (quorum links only), while armed. */
  hold: QuorumHold | undefined;
  readonly pairs: Set<Pair>;
}

interface Pair {
  down: Socket;
  up: Socket | undefined;
  /** Accepted or caught by a cut: relays nothing, closed when healed. */
  silent: boolean;
  /** The leader's side of a quorum link, read packet by packet. */
  reader: QuorumReader | undefined;
}

/** What a hold has done so far. */
export interface LagStats {
  /** The leader's packets read on the link while the lag was armed. */
  seen: number;
  /** Proposals and commits held back so far. */
  held: number;
}

/** A follower's lag behind the leader, from {@link PeerLinks.lag}. */
export interface Lag {
  readonly stats: LagStats;
  /** Sends everything held, in order, and lets the link go on as before. Idempotent. */
  release(): void;
}

interface QuorumHold {
  stats: LagStats;
  readers: Set<QuorumReader>;
}

/** The peer links of an ensemble. */
export interface PeerLinks {
  /**
   * The relay ports server `from` (0-based) reaches server `to` through: its `server.N` line's
   * quorum and election ports.
   */
  portsFor(from: number, to: number): { quorum: number; election: number };
  /** Cuts every link from and to server `i`, silently (see above). */
  isolate(i: number): void;
  /** Ends every cut: connections left from it are closed; new ones are relayed. */
  heal(): void;
  /** Server `i` is cut off now. */
  isolated(i: number): boolean;
  /** Holds the leader's proposals and commits on follower `follower`'s link to the leader `leader`. */
  lag(follower: number, leader: number): Lag;
  close(): Promise<void>;
}

/** One direction of a quorum link, read packet by packet. */
interface QuorumReader {
  /** The hold armed on its link, if any. */
  hold: QuorumHold | undefined;
  feed(chunk: Buffer): void;
  /** Disarms the hold and sends what it held, in order. */
  release(): void;
}

/** What ends the raw snapshot that follows a SNAP packet (the leader's `writeString("BenWasHere")`). */
const SNAPSHOT_END = Buffer.concat([Buffer.from([0, 0, 0, 10]), Buffer.from('BenWasHere')]);

/**
 * Reads one direction of a quorum link as `QuorumPacket`s (int type, long zxid, buffer data, vector<Id>
 * authinfo) and decides, packet by packet, whether it goes out now (`out`) or waits. A SNAP packet is followed
 * by the raw snapshot, up to its signature: relayed as a whole, then packets again.
 */
function createQuorumReader(out: (b: Buffer) => void): QuorumReader {
  let buf = Buffer.alloc(0);
  let inSnapshot = false;
  let held: Buffer[] = [];
  /** Sends `b` now, or behind what is held. */
  const send = (b: Buffer) => {
    if (held.length > 0) held.push(Buffer.from(b));
    else out(b);
  };
  const reader: QuorumReader = {
    hold: undefined,
    feed(chunk) {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (inSnapshot) {
          const at = buf.indexOf(SNAPSHOT_END);
          if (at < 0) return;
          send(buf.subarray(0, at + SNAPSHOT_END.length));
          buf = buf.subarray(at + SNAPSHOT_END.length);
          inSnapshot = false;
        }
        const len = packetLength(buf);
        if (len === undefined) return;
        const packet = buf.subarray(0, len);
        buf = buf.subarray(len);
        const type = packet.readInt32BE(0);
        const h = reader.hold;
        if (h) h.stats.seen++;
        if (h && (type === PROPOSAL || type === COMMIT)) {
          h.stats.held++;
          held.push(Buffer.from(packet));
        } else if (type === PING || type === REVALIDATE) out(packet);
        else send(packet);
        if (type === SNAP) inSnapshot = true;
      }
    },
    release() {
      reader.hold = undefined;
      const all = held;
      held = [];
      for (const b of all) out(b);
    },
  };
  return reader;
}

/** The length of the `QuorumPacket` at the start of `b`, or undefined while it is incomplete. */
function packetLength(b: Buffer): number | undefined {
  let at = 12; // type, zxid
  const need = (n: number) => b.length >= at + n;
  if (!need(4)) return undefined;
  const data = b.readInt32BE(at);
  at += 4 + Math.max(0, data);
  if (!need(4)) return undefined;
  const ids = b.readInt32BE(at);
  at += 4;
  for (let i = 0; i < ids; i++)
    for (let s = 0; s < 2; s++) {
      if (!need(4)) return undefined;
      at += 4 + Math.max(0, b.readInt32BE(at));
    }
  return b.length >= at ? at : undefined;
}

async function startRelay(
  from: number,
  to: number,
  kind: LinkRelay['kind'],
  upstreamPort: number,
): Promise<LinkRelay> {
  const relay: LinkRelay = {
    from,
    to,
    kind,
    port: 0,
    server: createServer(),
    cut: false,
    hold: undefined,
    pairs: new Set(),
  };
  relay.server.on('connection', (down) => {
    const pair: Pair = { down, up: undefined, silent: relay.cut, reader: undefined };
    relay.pairs.add(pair);
    const close = () => {
      relay.pairs.delete(pair);
      down.destroy();
      pair.up?.destroy();
    };
    down.on('error', close);
    down.on('close', close);
    if (pair.silent) {
      down.resume(); // read and drop
      return;
    }
    const up = connect(upstreamPort, '127.0.0.1');
    pair.up = up;
    up.on('error', close);
    up.on('close', close);
    const toDown = (b: Buffer) => {
      if (!pair.silent) down.write(b);
    };
    if (kind === 'quorum') {
      pair.reader = createQuorumReader(toDown);
      pair.reader.hold = relay.hold;
      relay.hold?.readers.add(pair.reader);
    }
    down.on('data', (chunk: Buffer) => {
      if (!pair.silent) up.write(chunk);
    });
    up.on('data', (chunk: Buffer) => {
      if (pair.silent) return;
      if (pair.reader) pair.reader.feed(chunk);
      else down.write(chunk);
    });
  });
  relay.server.listen(0, '127.0.0.1');
  await once(relay.server, 'listening');
  relay.port = (relay.server.address() as AddressInfo).port;
  return relay;
}

/**
 * Starts the relays of an ensemble of `ports.length` servers: for every ordered pair (i, j), i ≠ j, one
 * relay to j's quorum port and one to its election port.
 */
export async function startPeerLinks(
  ports: readonly { peer: number; election: number }[],
): Promise<PeerLinks> {
  const relays: LinkRelay[] = [];
  for (let i = 0; i < ports.length; i++)
    for (let j = 0; j < ports.length; j++) {
      const p = ports[j];
      if (i === j || !p) continue;
      relays.push(await startRelay(i, j, 'quorum', p.peer), await startRelay(i, j, 'election', p.election));
    }
  const find = (from: number, to: number, kind: LinkRelay['kind']) => {
    const r = relays.find((x) => x.from === from && x.to === to && x.kind === kind);
    if (!r) throw new Error(`no ${kind} link from server ${from + 1} to server ${to + 1}`);
    return r;
  };
  const cut = new Set<number>();
  return {
    portsFor: (from, to) => ({
      quorum: find(from, to, 'quorum').port,
      election: find(from, to, 'election').port,
    }),
    isolate(i) {
      cut.add(i);
      for (const r of relays)
        if (r.from === i || r.to === i) {
          r.cut = true;
          for (const p of r.pairs) p.silent = true;
        }
    },
    heal() {
      cut.clear();
      for (const r of relays) {
        r.cut = false;
        for (const p of [...r.pairs])
          if (p.silent) {
            r.pairs.delete(p);
            p.down.destroy();
            p.up?.destroy();
          }
      }
    },
    isolated: (i) => cut.has(i),
    lag(follower, leader) {
      const r = find(follower, leader, 'quorum');
      const hold: QuorumHold = { stats: { seen: 0, held: 0 }, readers: new Set() };
      r.hold = hold;
      for (const p of r.pairs)
        if (p.reader) {
          p.reader.hold = hold;
          hold.readers.add(p.reader);
        }
      return {
        stats: hold.stats,
        release() {
          if (r.hold === hold) r.hold = undefined;
          for (const reader of hold.readers) reader.release();
          hold.readers.clear();
        },
      };
    },
    async close() {
      for (const r of relays) {
        for (const p of r.pairs) {
          p.down.destroy();
          p.up?.destroy();
        }
        r.pairs.clear();
      }
      await Promise.all(relays.map((r) => new Promise<void>((resolve) => r.server.close(() => resolve()))));
    },
  };
}
