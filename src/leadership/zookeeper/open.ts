/**
 * The ZooKeeper backend, opened for a replica or for `status`/`explain` (src/leadership/open-backend.ts has
 * the shapes): one session with its membership node and the balancer's group
 * (src/leadership/zookeeper/backend.ts), the elections read from the candidate nodes
 * (src/leadership/zookeeper/election-read.ts). Release 0.1.0 never ran on ZooKeeper: no gates for it.
 */
import { zookeeperElectionPrefix, zookeeperMembersDir } from '../../queue/job-identity.ts';
import type {
  LeadershipReader,
  LeadershipReaderOptions,
  LeadershipSettings,
  ReplicaLeadership,
  ReplicaLeadershipOptions,
} from '../open-backend.ts';
import { createZooKeeperLeadershipGroup } from './backend.ts';
import { openZooKeeperReadSession, zookeeperElectionReader } from './election-read.ts';

/** The setting that names ZooKeeper, for error lines. */
const SETTING = 'zookeeper (--zookeeper, SDC_ZOOKEEPER)';

/** The configured ZooKeeper settings. @throws Error when there are none (a caller's bug). */
function settingsOf(config: LeadershipSettings): NonNullable<LeadershipSettings['zookeeper']> {
  if (!config.zookeeper) throw new Error('no zookeeper settings');
  return config.zookeeper;
}

/** Opens a replica's ZooKeeper leadership (it connects once its group starts). */
export async function openZooKeeperLeadership(
  config: LeadershipSettings,
  opts: ReplicaLeadershipOptions,
): Promise<ReplicaLeadership> {
  const zk = settingsOf(config);
  const group = createZooKeeperLeadershipGroup({
    settings: {
      connect: zk.connect,
      root: zk.root,
      sessionTimeoutMs: config.electionTtlSeconds * 1000,
      digest: zk.auth,
    },
    replicaId: opts.replicaId,
    log: opts.log,
    monotonicNow: opts.monotonicNow,
    membersDir: zookeeperMembersDir(zk.root, opts.scope),
    clusters: opts.clusters,
  });
  return {
    kind: 'zookeeper',
    group,
    electionPrefix: (target) => zookeeperElectionPrefix(zk.root, target),
    elections: zookeeperElectionReader(zk.root, () => group.session.connection?.handle),
    // The session's own state: connected now (its pings run whatever this probe does).
    answers: async () => group.session.connection !== undefined,
    previousRelease: undefined,
    close: () => undefined, // the group's close ends the session
  };
}

/** How ZooKeeper failed a read: it refused it (ZNOAUTH: the message names the auth fields), or `otherwise`. */
function zkFailed(message: string, otherwise: string): string {
  return `ZooKeeper ${message.startsWith('-102 ') ? 'refused the read' : otherwise}: ${message}`;
}

/** Opens `status`'s and `explain`'s ZooKeeper session of its own (it creates no node). */
export function openZooKeeperReader(
  config: LeadershipSettings,
  _opts: LeadershipReaderOptions,
): LeadershipReader {
  const zk = settingsOf(config);
  const session = openZooKeeperReadSession(zk.connect, zk.root, zk.auth);
  const where = `${SETTING} ${zk.connect}`;
  return {
    kind: 'zookeeper',
    elections: session.reader,
    async ping(timeoutMs) {
      await session.connected(timeoutMs);
      await session.reader.members('_');
    },
    firstReadExtraMs: 0,
    describeFailure(err, stage) {
      const message = (err as Error).message.split('\n')[0] ?? '';
      if (stage === 'unreachable') return `${where}: ${zkFailed(message, 'does not answer')}`;
      if (/^-\d+ |zookeeper/i.test(message)) return `${where}: ${zkFailed(message, 'stopped answering')}`;
      return undefined;
    },
    close: () => session.close(),
  };
}
