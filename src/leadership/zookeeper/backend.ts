/**
 * The ZooKeeper backend of the balancer (src/leadership/leadership-group.ts): one session per replica
 * (src/leadership/zookeeper/session.ts) with its membership node `<root>/clusters/<scope>/members/<id>`, one
 * view of members and candidates (src/leadership/zookeeper/view.ts), and a LeaderLatch election per target
 * (src/leadership/zookeeper/election.ts) under `<root>/clusters/<cluster>/election/<namespace>`
 * (src/queue/job-identity.ts builds these paths).
 */
import type { MonotonicClock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { BackendElection, LeadershipBackend } from '../backend.ts';
import { createLeadershipGroup, type LeadershipGroup } from '../leadership-group.ts';
import { statOf, ZK_ERR, zkCode } from './client.ts';
import { createZooKeeperElection } from './election.ts';
import { createZooKeeperSession, type ZooKeeperSession, type ZooKeeperSettings } from './session.ts';
import { createZooKeeperView, electionDir, type ZooKeeperView } from './view.ts';

/** Options of {@link createZooKeeperLeadershipGroup}. */
export interface ZooKeeperLeadershipGroupOptions {
  settings: ZooKeeperSettings;
  replicaId: string;
  log: Logger;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
  /** Balance over the live members (default true); false: a plain election, for tests of the election. */
  balanced?: boolean;
  /** At most this many campaign calls at a time (default 16). */
  campaignConcurrency?: number;
  /** A target with no candidate for this long is campaigned for by every replica, ms (default: the session timeout). */
  fallbackMs?: number;
  /** Timeout of the fencing read, ms (default: a third of the session timeout, at least 500). */
  fenceTimeoutMs?: number;
  /** The directory of the membership nodes of the replica's scope (src/queue/job-identity.ts `zookeeperMembersDir`). */
  membersDir: string;
  /** The `clusters` line of the membership value (src/leadership/leadership-group.ts). */
  clusters?: () => string | undefined;
}

/** A replica's ZooKeeper leaderships, with the session and the view at hand. */
export interface ZooKeeperLeadershipGroup extends LeadershipGroup<BackendElection> {
  readonly session: ZooKeeperSession;
  readonly view: ZooKeeperView;
}

/** The longest `close()` takes, ms: closing the handle is local; the resignations are skipped once closed. */
export const ZOOKEEPER_CLOSE_TIMEOUT_MS = 3000;

/** Creates the ZooKeeper leaderships of a replica. */
export function createZooKeeperLeadershipGroup(
  opts: ZooKeeperLeadershipGroupOptions,
): ZooKeeperLeadershipGroup {
  const { settings, replicaId, log } = opts;
  const timeoutMs = settings.sessionTimeoutMs;
  const fenceTimeoutMs = opts.fenceTimeoutMs ?? Math.max(500, timeoutMs / 3);
  let session: ZooKeeperSession | undefined;
  let view: ZooKeeperView | undefined;
  const group = createLeadershipGroup<BackendElection>({
    replicaId,
    log,
    monotonicNow: opts.monotonicNow,
    balanced: opts.balanced,
    campaignConcurrency: opts.campaignConcurrency,
    fallbackMs: opts.fallbackMs ?? timeoutMs,
    ...(opts.clusters ? { clusters: opts.clusters } : {}),
    backend: (ctx) => {
      const prefixes: string[] = [];
      const s = createZooKeeperSession({
        settings,
        replicaId,
        log,
        monotonicNow: opts.monotonicNow,
        memberValue: ctx.memberValue,
        directories: () => prefixes.map(electionDir),
        membersDir: opts.membersDir,
      });
      const v = createZooKeeperView({ session: s, membersDir: opts.membersDir, log });
      session = s;
      view = v;
      const deleting = new Set<string>();
      /** Deletes a candidate node of our live session that no term holds (a create whose answer was lost). */
      const deleteStray = (path: string, done: () => void) => {
        const c = s.connection;
        if (!c || deleting.has(path)) return;
        deleting.add(path);
        void ctx
          .limit(async () => {
            const stat = await statOf(c.handle, path);
            if (stat?.ephemeralOwner !== c.sessionId) return;
            log.info({ node: path }, 'deleting a candidate node no term holds');
            await c.handle.delete_(path, -1);
          })
          .catch((err: unknown) => {
            if (zkCode(err) !== ZK_ERR.noNode)
              log.warn(
                { err: { message: (err as Error).message }, node: path },
                'cannot delete a stray candidate node',
              );
          })
          .finally(() => {
            deleting.delete(path);
            done();
          });
      };
      const backend: LeadershipBackend<BackendElection> = {
        view: v,
        // Suspended is still live: the session may come back with its nodes, so the candidacies stay.
        get live() {
          return s.sessionId !== undefined;
        },
        onLive: (cb) => s.onConnection(() => cb()),
        refreshMemberValue: () => s.refreshMemberValue(),
        election(prefix, elog) {
          prefixes.push(prefix);
          v.track(prefix);
          return createZooKeeperElection({
            session: s,
            view: v,
            prefix,
            replicaId,
            log: elog,
            limit: ctx.limit,
            fenceTimeoutMs,
            monotonicNow: opts.monotonicNow,
          });
        },
        tidy(e, done) {
          if (s.connection && !e.wanted && e.idle)
            for (const c of v.candidates(e.prefix)) if (c.replicaId === replicaId) deleteStray(c.key, done);
          return [...deleting].some((k) => k.startsWith(e.prefix));
        },
        start: () => s.start(),
        async close(elections) {
          // Closing the session ends every term at once and deletes every ephemeral node of it.
          await s.close();
          v.close();
          await Promise.all(elections.map((e) => e.resign()));
        },
        closeTimeoutMs: ZOOKEEPER_CLOSE_TIMEOUT_MS,
      };
      return backend;
    },
  });
  if (!session || !view) throw new Error('unreachable: the zookeeper backend was not created');
  return Object.assign(group, { session, view });
}
