/**
 * Refusing a cluster name that another cluster uses. Derived names cannot collide (they are fingerprints of
 * the cluster), but two fleets given the same explicit name (`clusterName`, `clusterNames`) for two clusters
 * would share each target's queue and election on a shared Redis, etcd or ZooKeeper: each leader would take
 * the other cluster's jobs, find their pods absent, and leave its own cluster's pods in place.
 *
 * So every replica claims each cluster name it serves, with its cluster's fingerprints:
 * - in Redis, one hash per name (`<queuePrefix>:cluster-claims:<name>`: fingerprint set → when last seen, by
 *   Redis's clock), refreshed every {@link CLAIM_INTERVAL_MS} by every replica (one script call per replica
 *   and cluster name, not per target); entries unseen for {@link CLAIM_HORIZON_MS} are forgotten;
 * - in etcd or ZooKeeper, in its membership value (src/leadership/assignment.ts), which lives as long as the
 *   replica's session: replicas of one scope see each other's.
 * A live claim not linked to ours (src/cleaner/claim-conflict.ts) refuses the name: every target of that
 * cluster stops consuming (src/leadership/gated-leadership.ts) on every replica of both fleets, with an error
 * line naming both identities and the setting to change, `sdc_target_refused`, and `status`. The refusal ends
 * by itself once the other claim is no longer live (renamed, stopped): {@link CLAIM_LIVE_MS} after its last
 * refresh.
 *
 * Until the first look at Redis has answered, a name counts as unchecked and its targets wait: two fleets
 * starting together must not both consume before either has looked.
 *
 * Each Redis claim also names the leadership backend its replica elects through and the namespaces it serves
 * (src/cleaner/claim-conflict.ts `claimField`). A live claim on the name through another backend for a
 * namespace this replica serves — a rollback to a release that does not run this one's backend, or half a
 * fleet configured otherwise — would make two leaders of that target, each consuming its queue: the targets
 * both serve are refused on both sides the same way, with their own error line and reason
 * (`leadership-backend-conflict`), until the other claim is no longer live. Fleets that elect through two
 * backends for different namespaces of one cluster share no queue and go on.
 */
import type { ClusterIdentity } from '../kube/cluster-identity.ts';
import type { Logger } from '../log.ts';
import { clusterClaimsKey } from '../queue/job-identity.ts';
import type { RedisClient } from '../queue/redis-client.ts';
import { sleep } from '../sleep.ts';
import { type Claim, claimField, foreignClaims, otherBackendClaims, redisClaim } from './claim-conflict.ts';

/** How often a replica refreshes its claims and reads the others', ms. */
export const CLAIM_INTERVAL_MS = 30_000;
/** A claim seen within this long is a fleet that runs now, ms (three refreshes). */
export const CLAIM_LIVE_MS = 3 * CLAIM_INTERVAL_MS;
/** Claims unseen this long are forgotten, ms (7 days): the history that links a CA rotation's claims. */
export const CLAIM_HORIZON_MS = 7 * 24 * 3600 * 1000;

/**
 * Refreshes our claim and returns every claim of the name, with Redis's own time (replicas' clocks may
 * differ; Redis has one). KEYS[1] the claims hash; ARGV[1] our fingerprints (comma-separated), ARGV[2] the
 * horizon, ms. Returns `[now ms, field, seen ms, field, seen ms, …]`.
 */
const CLAIM_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local horizon = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], now)
local all = redis.call('HGETALL', KEYS[1])
local out = { now }
for i = 1, #all, 2 do
  local seen = tonumber(all[i + 1]) or 0
  if now - seen > horizon then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
redis.call('PEXPIRE', KEYS[1], horizon)
return out
`;

/** Why a cluster name is refused: the claims of another cluster under it. */
export interface Refusal {
  /** The cluster name. */
  readonly cluster: string;
  /** Our fingerprints for it. */
  readonly ours: readonly string[];
  /** The other cluster's live claims (most recently seen first). */
  readonly others: readonly Claim[];
  /** One sentence: both identities and the setting to change. */
  readonly message: string;
}

/** A live member's claims, as its membership value has them (src/leadership/assignment.ts `clusters`). */
export interface MemberClaims {
  readonly replica: string;
  /** Cluster name → its fingerprints. */
  readonly clusters: Readonly<Record<string, readonly string[]>>;
}

/** Options of {@link createClusterClaims}. */
export interface ClusterClaimsOptions {
  /** The queues' Redis (the replica's commands connection). */
  redis: RedisClient;
  /** `queuePrefix`. */
  prefix: string;
  /** The clusters this replica serves. */
  clusters: readonly ClusterIdentity[];
  /**
   * The fingerprints to claim for a cluster now: those it started with, plus what its CA file holds now (a CA
   * rotation in progress links the two; src/kube/cluster-identity.ts `fingerprintsNow`). Default: those it
   * started with.
   */
  fingerprintsNow?: (cluster: ClusterIdentity) => readonly string[];
  /** The live members of the replica's scope with their claims (undefined: no etcd or ZooKeeper). */
  members?: () => Iterable<MemberClaims>;
  /**
   * The leadership backend this replica elects through (src/leadership/open-backend.ts `leadershipMarker`),
   * written with each claim and compared with the others'.
   */
  leadership: string;
  /** The namespaces this replica serves in the cluster of that name, written with each claim. */
  namespaces: (clusterName: string) => readonly string[];
  log: Logger;
  /** Refresh period, ms (default {@link CLAIM_INTERVAL_MS}); the live window is three of them. */
  intervalMs?: number;
}

/** A replica's claims on its cluster names. */
export interface ClusterClaims {
  /** The fingerprints this replica claims for `cluster` now (also in its membership value). */
  fingerprints(cluster: ClusterIdentity): readonly string[];
  /** Why `cluster` is refused now; `unchecked` before Redis has answered once; undefined when free. */
  refusal(cluster: string): Refusal | 'unchecked' | undefined;
  /** Redis has answered the first look at `cluster`'s claims (this replica's Redis works, at least once). */
  checked(cluster: string): boolean;
  /**
   * Why the target (`cluster`, `namespace`) is refused for a live claim through another leadership backend by
   * replicas that serve that namespace too (one sentence); undefined when there is none (or before Redis has
   * answered: {@link ClusterClaims.refusal} says `unchecked` then).
   */
  backendConflict(cluster: string, namespace: string): string | undefined;
  /** Calls `cb` after each change of a refusal (or of the checked state). */
  onChange(cb: () => void): void;
  /** Looks again at the members (their claims changed): cheap, no I/O. */
  membersChanged(): void;
  /** Starts the periodic refresh (idempotent). */
  start(): void;
  stop(): void;
}

/** The setting that names a cluster, for the refusal message. */
const settingOf = (id: ClusterIdentity) =>
  id.source === 'clusterNames'
    ? 'clusterNames (--cluster-names, SDC_CLUSTER_NAMES)'
    : 'clusterName (--cluster-name, SDC_CLUSTER_NAME) or clusterNames (--cluster-names, SDC_CLUSTER_NAMES)';

/** The refusal's sentence: both identities and the setting to change. */
export function refusalMessage(
  id: ClusterIdentity,
  ours: readonly string[],
  others: readonly Claim[],
): string {
  const other = others[0];
  const seen = other
    ? other.from === 'member'
      ? `replica ${other.replica ?? '?'} (alive in etcd or ZooKeeper)`
      : `a replica seen ${Math.round(other.ageMs / 1000)} s ago in Redis`
    : 'another replica';
  return (
    `cluster name ${id.name} is used by two clusters: this replica's (fingerprints ${ours.join(',')}, ` +
    `name set by ${id.source}) and the one of ${seen} (fingerprints ${other?.fingerprints.join(',') ?? '?'}); ` +
    `they would share every queue and election of that name: not cleaning its targets until one of them is ` +
    `renamed: set a distinct ${settingOf(id)} on one of the fleets`
  );
}

/**
 * The namespaces of `ours` that a claim of `others` serves too (a claim that does not name its namespaces
 * serves them all), sorted.
 */
export function sharedNamespaces(ours: readonly string[], others: readonly Claim[]): string[] {
  return [...new Set(ours)]
    .filter((n) => others.some((c) => c.namespaces === undefined || c.namespaces.includes(n)))
    .sort();
}

/**
 * The sentence of live claims on `name` through another leadership backend than `ours` for the namespaces
 * `shared` this replica serves too.
 */
export function backendConflictMessage(
  name: string,
  ours: string,
  others: readonly Claim[],
  shared: readonly string[],
): string {
  const other = others[0];
  return (
    `namespaces ${shared.join(', ')} of cluster ${name} are cleaned by replicas that elect their leaders through ` +
    `two backends: this replica through ${ours}, a replica seen ${Math.round((other?.ageMs ?? 0) / 1000)} s ` +
    `ago in Redis through ${other?.leadership ?? '?'}; both would lead those targets and consume their queues: ` +
    'not cleaning them until every replica that serves them elects through one (a rollback to a release ' +
    'without this backend, or replicas configured with different etcdEndpoints/etcdKeyPrefix or ' +
    'zookeeper/zookeeperRoot)'
  );
}

/** Creates the claims of a replica; `start()` makes the first claim. */
export function createClusterClaims(opts: ClusterClaimsOptions): ClusterClaims {
  const { log } = opts;
  const intervalMs = opts.intervalMs ?? CLAIM_INTERVAL_MS;
  const liveMs = 3 * intervalMs;
  const fingerprintsNow = opts.fingerprintsNow ?? ((c: ClusterIdentity) => c.fingerprints);
  /** The Redis claims of each name, as last read (undefined: not read yet). */
  const fromRedis = new Map<string, Claim[]>();
  const refused = new Map<string, Refusal>();
  /** Cluster name → its conflict of leadership backends: the namespaces both sides serve, and the sentence. */
  const backendConflicts = new Map<string, { namespaces: ReadonlySet<string>; message: string }>();
  const listeners: (() => void)[] = [];
  const stop = new AbortController();
  let running = false;

  const ourFingerprints = (c: ClusterIdentity) =>
    [...new Set([...c.fingerprints, ...fingerprintsNow(c)])].sort();

  /** Recomputes every refusal from what is known; tells the listeners when one changed. */
  function evaluate(): void {
    let changed = false;
    const members = [...(opts.members?.() ?? [])];
    for (const c of opts.clusters) {
      const redisClaims = fromRedis.get(c.name);
      if (!redisClaims) continue;
      const ours = ourFingerprints(c);
      const memberClaims: Claim[] = members.flatMap((m) => {
        const fps = m.clusters[c.name];
        return fps ? [{ fingerprints: fps, live: true, ageMs: 0, from: 'member', replica: m.replica }] : [];
      });
      changed = evaluateBackends(c.name, redisClaims) || changed;
      const others = foreignClaims(ours, [...redisClaims, ...memberClaims]);
      const was = refused.get(c.name);
      if (others.length > 0) {
        const message = refusalMessage(c, ours, others);
        if (!was)
          log.error(
            {
              cluster: c.name,
              fingerprints: ours,
              otherFingerprints: others.map((o) => o.fingerprints.join(',')),
              setting: c.source,
            },
            message,
          );
        if (!was || was.message !== message) changed = true;
        refused.set(c.name, { cluster: c.name, ours, others, message });
      } else if (was) {
        refused.delete(c.name);
        changed = true;
        log.info(
          { cluster: c.name, fingerprints: ours },
          'cluster name no longer used by another cluster: cleaning its targets again',
        );
      }
    }
    if (changed) for (const cb of listeners) cb();
  }

  /** Updates the backend conflict of `name` from its Redis claims; true when it changed. */
  function evaluateBackends(name: string, redisClaims: readonly Claim[]): boolean {
    const ours = opts.namespaces(name);
    const others = otherBackendClaims(opts.leadership, redisClaims, ours);
    const was = backendConflicts.get(name);
    if (others.length > 0) {
      const shared = sharedNamespaces(ours, others);
      const message = backendConflictMessage(name, opts.leadership, others, shared);
      const sameTargets = was !== undefined && [...was.namespaces].sort().join(',') === shared.join(',');
      if (!sameTargets)
        log.error(
          {
            cluster: name,
            namespaces: shared,
            leadership: opts.leadership,
            otherLeadership: [...new Set(others.map((o) => o.leadership))],
          },
          message,
        );
      backendConflicts.set(name, { namespaces: new Set(shared), message });
      return was?.message !== message;
    }
    if (!was) return false;
    backendConflicts.delete(name);
    log.info(
      { cluster: name, namespaces: [...was.namespaces], leadership: opts.leadership },
      'no replica that serves these namespaces elects through another backend any more: cleaning them again',
    );
    return true;
  }

  /** Refreshes our claim on `c` and reads the others'. @throws the Redis error. */
  async function claim(c: ClusterIdentity): Promise<void> {
    const reply = (await opts.redis.eval(
      CLAIM_SCRIPT,
      1,
      clusterClaimsKey(opts.prefix, c.name),
      claimField(ourFingerprints(c), opts.leadership, opts.namespaces(c.name)),
      String(CLAIM_HORIZON_MS),
    )) as (string | number)[];
    const now = Number(reply[0]);
    const claims: Claim[] = [];
    for (let i = 1; i + 1 < reply.length; i += 2) {
      claims.push(redisClaim(String(reply[i]), Number(reply[i + 1]), now, liveMs));
    }
    const first = !fromRedis.has(c.name);
    fromRedis.set(c.name, claims);
    if (first) for (const cb of listeners) cb();
  }

  async function loop(): Promise<void> {
    let failing = false;
    while (running) {
      const results = await Promise.allSettled(opts.clusters.map(claim));
      const failed = results.find((r) => r.status === 'rejected');
      if (failed && !failing)
        log.warn(
          { err: { message: ((failed as PromiseRejectedResult).reason as Error)?.message } },
          'cannot refresh the cluster name claims in Redis; retrying',
        );
      failing = failed !== undefined;
      evaluate();
      // A first look that failed is retried soon: the targets wait for it.
      const unchecked = opts.clusters.some((c) => !fromRedis.has(c.name));
      await sleep(unchecked ? Math.min(1000, intervalMs) : intervalMs, stop.signal, { unref: true });
    }
  }

  return {
    fingerprints: ourFingerprints,
    refusal(cluster) {
      if (!fromRedis.has(cluster)) return 'unchecked';
      return refused.get(cluster);
    },
    backendConflict(cluster, namespace) {
      const conflict = backendConflicts.get(cluster);
      return conflict?.namespaces.has(namespace) ? conflict.message : undefined;
    },
    checked: (cluster) => fromRedis.has(cluster),
    onChange(cb) {
      listeners.push(cb);
    },
    membersChanged: evaluate,
    start() {
      if (running || stop.signal.aborted) return;
      running = true;
      void loop();
    },
    stop() {
      running = false;
      stop.abort();
    },
  };
}
