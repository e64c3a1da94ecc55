/**
 * A replica's in-memory view of the live members and of every election's candidates on ZooKeeper: a child
 * watch on the members directory and a data watch on each member node, and a child watch on each election
 * directory (ZooKeeper watches are one-shot: each fires once and is set again by the read that follows).
 * Everything is read afresh on every connection (after a new session its watches are gone), and what was read
 * before is kept until the new reads answer: a reconnection within the session is not a change of members (a
 * view emptied meanwhile would have the balancer withdraw every campaign, and the nodes that survived the
 * reconnection would be deleted and created again at the back of their lines).
 *
 * As with etcd (src/leadership/etcd/view.ts), the view only tells the balancer **when to look**: who
 * leads is decided by the election's own reads (src/leadership/zookeeper/election.ts), and each DELETE is
 * fenced by a read of the leader's node.
 */
import type { Logger } from '../../log.ts';
import type { Candidate, MembersView } from '../backend.ts';
import type { ZkConnection, ZooKeeperSession } from './session.ts';

/** One candidate node: `_c_<uuid>-<replica id>-latch-<sequence>` (Curator's protected names). */
export interface CandidateNode extends Candidate {
  /** The node's name in its election directory. */
  readonly name: string;
  /** Its sequence number, the order of the line. */
  readonly sequence: number;
}

const NODE_NAME = /^_c_([0-9a-f-]{36})-(.+)-latch-(\d{10})$/;

/** Parses a candidate node's name; undefined when it is not one. */
export function parseCandidateName(dir: string, name: string): CandidateNode | undefined {
  const m = NODE_NAME.exec(name);
  if (!m) return undefined;
  return { key: `${dir}/${name}`, name, replicaId: m[2] as string, sequence: Number(m[3]) };
}

/** The election directory of an election prefix (the prefix without its trailing `/`). */
export const electionDir = (prefix: string): string => prefix.replace(/\/$/, '');

/** The view; `track` each election before the session connects. */
export interface ZooKeeperView extends MembersView {
  /** Adds an election prefix to watch. */
  track(prefix: string): void;
  /** Watches set so far (child and data watches, each one-shot), a cost figure. */
  readonly watchesSet: number;
  /** Stops watching (the session's close drops the watches on the server). */
  close(): void;
}

/** Creates the view of a replica over `session`. */
export function createZooKeeperView(opts: {
  session: ZooKeeperSession;
  membersDir: string;
  log: Logger;
}): ZooKeeperView {
  const { session, membersDir, log } = opts;
  const prefixes = new Set<string>();
  const elections = new Map<string, readonly CandidateNode[]>();
  const members = new Map<string, string>();
  /** The connection each member's data watch was set on: a new connection sets them again. */
  const watchedOn = new Map<string, ZkConnection>();
  const listeners: (() => void)[] = [];
  let synced = false;
  let closed = false;
  let watches = 0;
  const changed = () => {
    if (closed) return;
    for (const cb of listeners) cb();
  };
  const warn = (err: unknown, what: string) => {
    if (!closed && !session.connection?.lost.aborted)
      log.warn({ err: { message: (err as Error).message }, what }, 'zookeeper view: read failed');
  };

  async function readElection(c: ZkConnection, prefix: string): Promise<void> {
    if (c.lost.aborted || closed) return;
    const dir = electionDir(prefix);
    watches += 1;
    const names = await c.handle.w_get_children(
      dir,
      () => void readElection(c, prefix).catch((e) => warn(e, dir)),
    );
    const nodes = names
      .map((n) => parseCandidateName(dir, n))
      .filter((n): n is CandidateNode => n !== undefined)
      .sort((a, b) => a.sequence - b.sequence);
    elections.set(prefix, nodes);
    changed();
  }

  async function readMember(c: ZkConnection, id: string): Promise<void> {
    if (c.lost.aborted || closed) return;
    const path = `${membersDir}/${id}`;
    watchedOn.set(id, c);
    try {
      watches += 1;
      const [, data] = await c.handle.w_get(path, () => void readMember(c, id).catch((e) => warn(e, path)));
      members.set(id, data.toString());
    } catch {
      // Gone meanwhile (the child watch reads the list again); on a lost connection, the next one reads it.
      if (c.lost.aborted) return;
      members.delete(id);
      watchedOn.delete(id);
    }
    changed();
  }

  async function readMembers(c: ZkConnection): Promise<void> {
    if (c.lost.aborted || closed) return;
    watches += 1;
    const ids = await c.handle.w_get_children(
      membersDir,
      () => void readMembers(c).catch((e) => warn(e, membersDir)),
    );
    // Members not yet watched on this connection (new ones, or all of them after a reconnection).
    const unwatched = ids.filter((id) => watchedOn.get(id) !== c);
    for (const id of [...members.keys()])
      if (!ids.includes(id)) {
        members.delete(id);
        watchedOn.delete(id);
      }
    await Promise.all(unwatched.map((id) => readMember(c, id)));
    changed();
  }

  session.onConnection((c) => {
    void (async () => {
      await readMembers(c);
      for (const p of prefixes) await readElection(c, p);
      if (c.lost.aborted) return;
      synced = true;
      changed();
    })().catch((err) => warn(err, 'all'));
  });

  return {
    get synced() {
      return synced;
    },
    candidates: (prefix) => elections.get(prefix) ?? [],
    members: () => [...members.keys()].sort(),
    memberValue: (id) => members.get(id),
    onChange(cb) {
      listeners.push(cb);
    },
    track(prefix) {
      prefixes.add(prefix);
    },
    get watchesSet() {
      return watches;
    },
    close() {
      closed = true;
    },
  };
}
