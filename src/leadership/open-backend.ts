/**
 * What the rest of the program gets from a leadership backend, in backend-neutral words, and the one place
 * that chooses the backend from the configuration: `etcdEndpoints` → etcd (src/leadership/etcd/open.ts),
 * `zookeeper` → ZooKeeper (src/leadership/zookeeper/open.ts), neither → none (single-server mode: the replica
 * leads every target, src/leadership/local-leadership.ts). Nothing outside src/leadership/ needs to know
 * which backend runs; a new backend is a folder with an `open.ts` that implements these two shapes, a case
 * below, and the contract suite (test/integration/leadership-contract.test.ts).
 */

import type { CheckResult } from '../check-result.ts';
import type { MonotonicClock } from '../clock.ts';
import type { CleanerConfig } from '../config/schema.ts';
import type { Logger } from '../log.ts';
import type { PreviousReleaseTarget, TargetRef } from '../queue/job-identity.ts';
import type { ElectionReader, LeadershipBackendKind } from './election-reader.ts';
import { checkEtcd } from './etcd/checks.ts';
import { openEtcdLeadership, openEtcdReader } from './etcd/open.ts';
import type { LeadershipGate } from './gated-leadership.ts';
import type { LeadershipGroup } from './leadership-group.ts';
import { checkZooKeeper } from './zookeeper/checks.ts';
import { openZooKeeperLeadership, openZooKeeperReader } from './zookeeper/open.ts';

/** The configuration's leadership settings. */
export type LeadershipSettings = Pick<
  CleanerConfig,
  'etcdEndpoints' | 'etcdSecurity' | 'etcdKeyPrefix' | 'zookeeper' | 'electionTtlSeconds'
>;

/** A replica's leadership backend, opened: its session, view and elections, and how to read and probe them. */
export interface ReplicaLeadership {
  readonly kind: LeadershipBackendKind;
  /** The balancer's group: one election per target, one session for all (src/leadership/leadership-group.ts). */
  readonly group: LeadershipGroup;
  /** The election prefix of a target (src/queue/job-identity.ts names it). */
  electionPrefix(target: TargetRef): string;
  /** Read-only elections and members, for `/api/v1/explain` (through the replica's own session). */
  readonly elections: ElectionReader;
  /** Whether the backend answers now, within `timeoutMs` (ms): `/readyz` and `sdc_backend_up`. Never rejects. */
  answers(timeoutMs: number): Promise<boolean>;
  /**
   * The gates that hold a leader while a replica of release 0.1.0 may still consume the target
   * (src/leadership/previous-release-gate.ts), on a backend 0.1.0 ran on; undefined on the others.
   */
  readonly previousRelease:
    | { gateFor(target: PreviousReleaseTarget, log: Logger): LeadershipGate }
    | undefined;
  /** Closes the client, after `group.close()`. */
  close(): void;
}

/** What the replica gives its backend. */
export interface ReplicaLeadershipOptions {
  replicaId: string;
  log: Logger;
  monotonicNow: MonotonicClock;
  /** The membership scope: the cluster names the replica serves (src/queue/job-identity.ts `membershipScope`). */
  scope: string;
  /** The `clusters` line of the membership value (src/leadership/leadership-group.ts). */
  clusters: () => string | undefined;
}

/** `status` and `explain`'s read-only access to the backend: fails fast, never campaigns. */
export interface LeadershipReader {
  readonly kind: LeadershipBackendKind;
  readonly elections: ElectionReader;
  /** Resolves once the backend answers one read within `timeoutMs` (ms). @throws its error, or a timeout. */
  ping(timeoutMs: number): Promise<void>;
  /** Extra time the first read may take (a login), ms. */
  readonly firstReadExtraMs: number;
  /**
   * The failure of a read as the user should read it: the setting and address to check, and why.
   * @param stage `unreachable`: the first read failed; `stopped`: a later read did.
   * @returns undefined when `err` is not this backend's.
   */
  describeFailure(err: unknown, stage: 'unreachable' | 'stopped'): string | undefined;
  close(): void;
}

/** How long one call may take on one server, ms, for the reader. */
export interface LeadershipReaderOptions {
  callTimeoutMs: number;
}

/** The backend the configuration selects; undefined: none (single-server mode). */
export function leadershipBackendOf(config: LeadershipSettings): LeadershipBackendKind | undefined {
  if (config.etcdEndpoints.length > 0) return 'etcd';
  if (config.zookeeper) return 'zookeeper';
  return undefined;
}

/**
 * Where this replica's leaders are elected, as one string two replicas of one cluster must agree on:
 * `etcd <etcdKeyPrefix>`, `zookeeper <chroot><zookeeperRoot>`, or `none` (single-server mode). Endpoints and
 * hosts are left out (one store is reached under several names). Written with each cluster-name claim in Redis
 * (src/cleaner/cluster-claims.ts): the marker a replica of another configuration, or of a release without this
 * backend that reads it, finds.
 */
export function leadershipMarker(config: LeadershipSettings): string {
  switch (leadershipBackendOf(config)) {
    case 'etcd':
      return `etcd ${config.etcdKeyPrefix}`;
    case 'zookeeper': {
      const chroot = /(\/[^,]*)$/.exec(config.zookeeper?.connect ?? '')?.[1] ?? '';
      return `zookeeper ${chroot}${config.zookeeper?.root ?? ''}`;
    }
    default:
      return 'none';
  }
}

/** The configured backend in one phrase, for `check`'s configuration line (no secrets). */
export function describeLeadership(config: LeadershipSettings): string {
  switch (leadershipBackendOf(config)) {
    case 'etcd': {
      const n = config.etcdEndpoints.length;
      return `etcd (${n} endpoint${n === 1 ? '' : 's'}, prefix ${config.etcdKeyPrefix})`;
    }
    case 'zookeeper':
      return `ZooKeeper ${config.zookeeper?.connect}${config.zookeeper?.root}`;
    default:
      return 'local (no etcd, no ZooKeeper)';
  }
}

/**
 * Opens the replica's leadership backend: its client, checked for access first, and its group (not started).
 * @returns undefined in single-server mode.
 * @throws LeadershipAccessError (src/leadership/access-error.ts) when the backend refuses the configured
 *   credentials: a configuration error, exit 2.
 */
export async function openReplicaLeadership(
  config: LeadershipSettings,
  opts: ReplicaLeadershipOptions,
): Promise<ReplicaLeadership | undefined> {
  switch (leadershipBackendOf(config)) {
    case 'etcd':
      return openEtcdLeadership(config, opts);
    case 'zookeeper':
      return openZooKeeperLeadership(config, opts);
    default:
      return undefined;
  }
}

/** Opens the read-only access of `status` and `explain`; undefined in single-server mode. */
export function openLeadershipReader(
  config: LeadershipSettings,
  opts: LeadershipReaderOptions,
): LeadershipReader | undefined {
  switch (leadershipBackendOf(config)) {
    case 'etcd':
      return openEtcdReader(config, opts);
    case 'zookeeper':
      return openZooKeeperReader(config, opts);
    default:
      return undefined;
  }
}

/**
 * The `check` command's checks of the configured backend (what a replica will need of it: reachable, the
 * credentials accepted, the prefix or root writable), each within `timeoutMs` (ms).
 * @returns `answered` false when the backend did not answer at all; no results without a backend.
 */
export async function checkLeadership(
  config: LeadershipSettings,
  timeoutMs: number,
): Promise<{ results: CheckResult[]; answered: boolean }> {
  switch (leadershipBackendOf(config)) {
    case 'etcd':
      return checkEtcd(config, timeoutMs);
    case 'zookeeper':
      return config.zookeeper ? checkZooKeeper(config.zookeeper, timeoutMs) : { results: [], answered: true };
    default:
      return { results: [], answered: true };
  }
}
