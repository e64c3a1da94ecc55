/**
 * The etcd backend, opened for a replica or for `status`/`explain` (src/leadership/open-backend.ts has the
 * shapes): one client, checked for access before anything else connects; one session lease, one watch and the
 * balancer's group (src/leadership/etcd/backend.ts); the elections read by key (src/leadership/etcd/election-read.ts);
 * and release 0.1.0's gates, since 0.1.0 elected on etcd (src/leadership/previous-release-gate.ts).
 */
import { EtcdError, GRPCGenericError } from 'etcd3';
import { electionPrefix, membersPrefix } from '../../queue/job-identity.ts';
import { withTimeout } from '../../with-timeout.ts';
import type {
  LeadershipReader,
  LeadershipReaderOptions,
  LeadershipSettings,
  ReplicaLeadership,
  ReplicaLeadershipOptions,
} from '../open-backend.ts';
import { createPreviousReleaseGates } from '../previous-release-gate.ts';
import { checkEtcdAccess } from './access-check.ts';
import { createEtcdLeadershipGroup } from './backend.ts';
import { createEtcdClient, LOGIN_TIMEOUT_MS } from './client.ts';
import { etcdElectionReader } from './election-read.ts';

/** The setting that names etcd, for error lines. */
const SETTING = 'etcdEndpoints (--etcd-endpoints, SDC_ETCD_ENDPOINTS)';

/**
 * Opens a replica's etcd leadership.
 * @throws EtcdAccessError (a LeadershipAccessError) when etcd refuses the configured TLS files, user or prefix.
 */
export async function openEtcdLeadership(
  config: LeadershipSettings,
  opts: ReplicaLeadershipOptions,
): Promise<ReplicaLeadership> {
  const root = config.etcdKeyPrefix;
  const client = createEtcdClient(config.etcdEndpoints, { security: config.etcdSecurity, log: opts.log });
  // etcd must accept our certificate and user before anything connects: a refusal is a configuration error,
  // while etcd that does not answer is waited for like any outage.
  try {
    await checkEtcdAccess(client, config.etcdEndpoints, config.etcdSecurity, root);
  } catch (err) {
    client.close();
    throw err;
  }
  const group = createEtcdLeadershipGroup({
    client,
    replicaId: opts.replicaId,
    ttlSeconds: config.electionTtlSeconds,
    log: opts.log,
    monotonicNow: opts.monotonicNow,
    root,
    membersPrefix: membersPrefix(opts.scope, root),
    clusters: opts.clusters,
  });
  return {
    kind: 'etcd',
    group,
    electionPrefix: (target) => electionPrefix(target, root),
    elections: etcdElectionReader(client, root),
    answers: (timeoutMs) =>
      withTimeout(client.maintenance.status(), timeoutMs, 'etcd status').then(
        () => true,
        () => false,
      ),
    previousRelease: createPreviousReleaseGates({
      client,
      root,
      members: () => group.view.previousReleaseMembers(),
      onChange: (cb) => group.view.onChange(cb),
      sideElection: (prefix, l) => group.sideElection(prefix, l),
      readTimeoutMs: Math.max(500, (config.electionTtlSeconds * 1000) / 3),
    }),
    close: () => client.close(),
  };
}

/** Opens `status`'s and `explain`'s etcd client: each call within `callTimeoutMs` per member. */
export function openEtcdReader(config: LeadershipSettings, opts: LeadershipReaderOptions): LeadershipReader {
  const root = config.etcdKeyPrefix;
  const client = createEtcdClient(config.etcdEndpoints, {
    callTimeoutMs: opts.callTimeoutMs,
    security: config.etcdSecurity,
  });
  const where = `${SETTING} ${config.etcdEndpoints.join(',')}`;
  return {
    kind: 'etcd',
    elections: etcdElectionReader(client, root),
    ping: (timeoutMs) =>
      withTimeout(client.get(`${root}ping`).exec(), timeoutMs, 'a read').then(() => undefined),
    // The first read logs in first when there is a user: that login has its own deadline.
    firstReadExtraMs: config.etcdSecurity?.username !== undefined ? LOGIN_TIMEOUT_MS : 0,
    describeFailure(err, stage) {
      const message = (err as Error).message.split('\n')[0];
      if (stage === 'unreachable') return `${where}: etcd does not answer: ${message}`;
      if (err instanceof GRPCGenericError || err instanceof EtcdError)
        return `${where}: etcd stopped answering: ${message}`;
      return undefined;
    },
    close: () => client.close(),
  };
}
