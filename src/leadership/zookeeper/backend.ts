import type { BackendElection, LeadershipBackend } from '../backend.ts';
import {
  type BackendGroupOptions,
  createLeadershipGroup,
  type LeadershipGroup,
} from '../leadership-group.ts';
import { createStrayCandidates } from '../stray-candidates.ts';
import { statOf, ZK_ERR, zkCode } from './client.ts';
import { createZooKeeperElection } from './election.ts';
import { createZooKeeperSession, type ZooKeeperSession, type ZooKeeperSettings } from './session.ts';
import { createZooKeeperView, electionDir, type ZooKeeperView } from './view.ts';

/** Options of {@link createZooKeeperLeadershipGroup}. */
export interface ZooKeeperLeadershipGroupOptions extends BackendGroupOptions {
  settings: ZooKeeperSettings;
  /** Timeout of the fencing read, ms (default: a third of the session timeout, at least 500). */
  fenceTimeoutMs?: number;
  /** The directory of the membership nodes of the replica's scope (src/queue/job-identity.ts `zookeeperMembersDir`). */
  membersDir: string;
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
      const strays = createStrayCandidates({
        limit: ctx.limit,
        log,
        entry: 'node',
        gone: (err) => zkCode(err) === ZK_ERR.noNode,
      });
      /** Deletes a candidate node of our live session that no term holds, if our session still owns it. */
      const deleteStray = (path: string, done: () => void) => {
        const c = s.connection;
        if (!c) return;
        strays.delete(
          path,
          async () => {
            const stat = await statOf(c.handle, path);
            if (stat?.ephemeralOwner !== c.sessionId) return;
            log.info({ node: path }, 'deleting a candidate node no term holds');
            await c.handle.delete_(path, -1);
          },
          done,
        );
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
          return strays.deletingUnder(e.prefix);
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
