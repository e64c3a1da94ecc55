/**
 * The etcd backend of the balancer (src/leadership/leadership-group.ts): one session (one lease, one keepalive
 * stream, the membership key `<root>clusters/<scope>/members/<id>` on the lease, src/leadership/etcd/session.ts),
 * one watch over every election and member (src/leadership/etcd/view.ts), and an etcd election per target
 * (src/leadership/etcd/election.ts).
 */

import type { Etcd3 } from 'etcd3';
import { leaseTimers } from '../../failover-timers.ts';
import type { LeadershipBackend } from '../backend.ts';
import {
  type BackendGroupOptions,
  createLeadershipGroup,
  type LeadershipGroup,
} from '../leadership-group.ts';
import { createStrayCandidates } from '../stray-candidates.ts';
import { createEtcdLeadership, type EtcdLeadership, type EtcdLeadershipOptions } from './election.ts';
import { createEtcdSession, type EtcdSession, REVOKE_TIMEOUT_MS } from './session.ts';
import { createElectionView, type ElectionView } from './view.ts';

/** Options of {@link createEtcdLeadershipGroup}. */
export interface EtcdLeadershipGroupOptions extends BackendGroupOptions {
  client: Etcd3;
  /** Session lease TTL, seconds (≥ 2). */
  ttlSeconds: number;
  /** Passed to each election (src/leadership/etcd/election.ts). */
  fenceTimeoutMs?: number;
  /** Tests only: passed to each election. */
  readLeaderKey?: EtcdLeadershipOptions['readLeaderKey'];
  /** Prefix of every key (`etcdKeyPrefix`, ends with `/`; default `spark-driver-cleaner/`); elections must be under it. */
  root?: string;
  /**
   * Prefix of the membership keys of this replica's scope (src/queue/job-identity.ts `membersPrefix`), under
   * `root`: the replica registers there and balances with the members there.
   */
  membersPrefix: string;
}

/** The balance as this replica sees it, for `/api/v1/leaders` (its peers, its targets). */
export type { LeadershipBalance } from '../assignment.ts';

/** A replica's etcd leaderships: the balancer's group, with the etcd session and view at hand. */
export interface EtcdLeadershipGroup extends LeadershipGroup<EtcdLeadership> {
  readonly session: EtcdSession;
  readonly view: ElectionView;
}

/**
 * The longest `close()` takes, ms: the lease revoke ({@link REVOKE_TIMEOUT_MS}) then the resignations (each
 * candidate key delete bounded at 2 s; skipped once the lease has ended), with the watch's cancellation
 * alongside. Well inside the 15 s a replica has to exit on SIGTERM (src/commands/run.ts).
 */
export const LEADERSHIP_CLOSE_TIMEOUT_MS = REVOKE_TIMEOUT_MS + 3000;

/** Creates the etcd leaderships of a replica. */
export function createEtcdLeadershipGroup(opts: EtcdLeadershipGroupOptions): EtcdLeadershipGroup {
  const { client, replicaId, log } = opts;
  let session: EtcdSession | undefined;
  let view: ElectionView | undefined;
  const group = createLeadershipGroup<EtcdLeadership>({
    replicaId,
    log,
    monotonicNow: opts.monotonicNow,
    balanced: opts.balanced,
    campaignConcurrency: opts.campaignConcurrency,
    fallbackMs: opts.fallbackMs ?? leaseTimers(opts.ttlSeconds).fallbackMs,
    ...(opts.clusters ? { clusters: opts.clusters } : {}),
    backend: (ctx) => {
      const s = createEtcdSession({
        client,
        replicaId,
        ttlSeconds: opts.ttlSeconds,
        log,
        monotonicNow: opts.monotonicNow,
        memberValue: ctx.memberValue,
        membersPrefix: opts.membersPrefix,
      });
      const v = createElectionView({
        client,
        log,
        membersPrefix: opts.membersPrefix,
        ...(opts.root ? { root: opts.root } : {}),
      });
      session = s;
      view = v;
      const strays = createStrayCandidates({ limit: ctx.limit, log, entry: 'key' });
      /** Deletes a candidate key of our lease that no term holds, if it is still the one seen (same revision). */
      const deleteStray = (key: string, createRevision: bigint, done: () => void) =>
        strays.delete(
          key,
          async () => {
            log.info({ key }, 'deleting a candidate key no term holds');
            await client
              .if(key, 'Create', '==', createRevision.toString())
              .then(client.delete().key(key))
              .commit();
          },
          done,
        );
      const backend: LeadershipBackend<EtcdLeadership> = {
        view: v,
        get live() {
          return s.lease !== undefined;
        },
        onLive: (cb) => s.onLease(() => cb()),
        refreshMemberValue: () => s.refreshMemberValue(),
        election: (prefix, elog) =>
          createEtcdLeadership({
            client,
            session: s,
            view: v,
            prefix,
            replicaId,
            ttlSeconds: opts.ttlSeconds,
            log: elog,
            monotonicNow: opts.monotonicNow,
            limit: ctx.limit,
            fenceTimeoutMs: opts.fenceTimeoutMs,
            readLeaderKey: opts.readLeaderKey,
          }),
        tidy(e, done) {
          const lease = s.lease;
          if (lease && !e.wanted && e.idle)
            for (const c of v.candidates(e.prefix))
              if (c.lease === lease.id && c.replicaId === replicaId)
                deleteStray(c.key, c.createRevision, done);
          return strays.deletingUnder(e.prefix);
        },
        start() {
          s.start();
          v.start();
        },
        async close(elections) {
          await Promise.all([s.close().then(() => Promise.all(elections.map((e) => e.resign()))), v.close()]);
        },
        closeTimeoutMs: LEADERSHIP_CLOSE_TIMEOUT_MS,
      };
      return backend;
    },
  });
  if (!session || !view) throw new Error('unreachable: the etcd backend was not created');
  return Object.assign(group, { session, view });
}
