/**
 * The read-only {@link ElectionReader} of ZooKeeper: the candidate nodes of a target's election directory
 * (lowest sequence first, the leader) and the membership nodes with their values. It reads through a handle
 * it is given: the replica's own session (`/api/v1/explain`), or a session of its own that creates no node
 * (`status`, `explain`: {@link openZooKeeperReadSession}).
 */

import {
  zookeeperClusterElectionsDir,
  zookeeperElectionPrefix,
  zookeeperMembersDir,
} from '../../queue/job-identity.ts';
import { withTimeout } from '../../with-timeout.ts';
import type { ElectionReader } from '../election-reader.ts';
import { addDigestAuth, createZkHandle, ZK_ERR, type ZkHandle, zkCode } from './client.ts';
import { electionDir, parseCandidateName } from './view.ts';

/** Children of `path`, [] when it does not exist. @throws {@link notAuthenticated} on ZNOAUTH. */
async function children(h: ZkHandle, path: string): Promise<string[]> {
  try {
    return await h.get_children(path, false);
  } catch (err) {
    if (zkCode(err) === ZK_ERR.noNode) return [];
    if (zkCode(err) === ZK_ERR.noAuth) throw notAuthenticated(path);
    throw err;
  }
}

/**
 * The error of a read ZooKeeper refused (ZNOAUTH): with digest authentication the cleaner's nodes are
 * readable by its user only (`CREATOR_ALL_ACL`). Its message starts with the code (`-102 not authenticated`).
 */
export function notAuthenticated(path: string): Error {
  return new Error(
    `${ZK_ERR.noAuth} not authenticated: ${path} is readable only by the replicas' digest user; set ` +
      'zookeeperAuth (--zookeeper-auth, SDC_ZOOKEEPER_AUTH) or zookeeperAuthFile (--zookeeper-auth-file, ' +
      "SDC_ZOOKEEPER_AUTH_FILE) to the replicas' user:password",
  );
}

/**
 * The reader over `handle()` (undefined: not connected now, which rejects).
 * @param root the cleaner's root path (`zookeeperRoot`)
 */
export function zookeeperElectionReader(root: string, handle: () => ZkHandle | undefined): ElectionReader {
  const need = () => {
    const h = handle();
    if (!h) throw new Error('not connected to zookeeper');
    return h;
  };
  return {
    backend: 'zookeeper',
    async election(target) {
      const dir = electionDir(zookeeperElectionPrefix(root, target));
      const line = (await children(need(), dir))
        .map((n) => parseCandidateName(dir, n))
        .filter((n) => n !== undefined)
        .sort((a, b) => a.sequence - b.sequence);
      const [first, ...rest] = line;
      return { leader: first?.replicaId, candidates: rest.map((n) => n.replicaId) };
    },
    async members(scope) {
      const h = need();
      const dir = zookeeperMembersDir(root, scope);
      const ids = await children(h, dir);
      const values = await Promise.all(
        ids.map((id) =>
          h.get(`${dir}/${id}`, false).then(
            ([, data]) => [id, data.toString()] as const,
            () => undefined,
          ),
        ),
      );
      return new Map(values.filter((v) => v !== undefined));
    },
    async campaigning(cluster) {
      // The election directories stay once made; a namespace counts while a candidate node is in it.
      const h = need();
      const dir = zookeeperClusterElectionsDir(root, cluster);
      const namespaces = await children(h, dir);
      const withCandidates = await Promise.all(
        namespaces.map(async (ns) => {
          const edir = electionDir(zookeeperElectionPrefix(root, { cluster, context: '', namespace: ns }));
          return (await children(h, edir)).some((n) => parseCandidateName(edir, n) !== undefined)
            ? ns
            : undefined;
        }),
      );
      return withCandidates.filter((ns) => ns !== undefined).sort();
    },
  };
}

/** A connected read-only session for `status` and `explain`, and how to close it. */
export interface ZooKeeperReaderSession {
  readonly reader: ElectionReader;
  /** Resolves once connected. @throws when not connected within `timeoutMs`. */
  connected(timeoutMs: number): Promise<void>;
  close(): void;
}

/**
 * Opens a session of its own to read (it creates no node).
 * @param connect the connect string (`zookeeper`), @param digest `user:password` or undefined
 */
export function openZooKeeperReadSession(
  connect: string,
  root: string,
  digest: string | undefined,
): ZooKeeperReaderSession {
  const h = createZkHandle(connect, 10_000);
  let up = false;
  const connecting = new Promise<void>((resolve) =>
    h.on('connect', () => {
      up = true;
      resolve();
    }),
  );
  h.init({});
  const ready = digest
    ? Promise.all([connecting, addDigestAuth(h, digest)]).then(() => undefined)
    : connecting;
  return {
    reader: zookeeperElectionReader(root, () => (up ? h : undefined)),
    connected: (timeoutMs) => withTimeout(ready, timeoutMs, 'zookeeper connect'),
    close() {
      try {
        h.close();
      } catch {
        // already closed
      }
    },
  };
}
