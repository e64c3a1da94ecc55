/**
 * Whether a cluster name is claimed by another cluster: the rule behind refusing a target
 * (src/cleaner/cluster-claims.ts), pure so that it is tested by table.
 *
 * Every replica says, for each cluster name it serves, which fingerprints its cluster has (src/kube/
 * cluster-identity.ts: one per CA certificate, or the API server URL's). Two claims that share a fingerprint
 * are one cluster, and so is everything linked through a chain of such claims: a CA rotation shows the old CA,
 * then both (the bundle phase), then the new one, and the claim made during the bundle phase links the other
 * two. A claim seen recently (live) that is not linked to ours, however far back the history is searched, is
 * another cluster using the same name.
 *
 * Only CA fingerprints (`ca:…`) are compared. A cluster reached without a CA has only the fingerprint of the
 * URL it is reached at (`server:…`), and one cluster may be reached at several (a proxy, a load balancer's name
 * and address): such claims prove nothing either way, so they neither link nor conflict, and a replica without
 * a CA fingerprint never refuses.
 */

/** One replica's claim on a cluster name. */
export interface Claim {
  /** Its cluster's fingerprints (`ca:<hex>`, `server:<hex>`). */
  readonly fingerprints: readonly string[];
  /** True when seen recently enough to be a fleet that runs now. */
  readonly live: boolean;
  /** How long ago it was last seen, ms (0 for a live membership entry). */
  readonly ageMs: number;
  /** Where it was seen: the Redis claims of the name, or a live member in etcd or ZooKeeper. */
  readonly from: 'redis' | 'member';
  /** The member's replica id, for a claim seen in the membership. */
  readonly replica?: string;
  /**
   * The leadership backend the claiming replica elects through ({@link claimField}); undefined for a claim
   * seen in the membership (the same backend as ours, by definition) or written without one.
   */
  readonly leadership?: string;
  /**
   * The namespaces of the cluster its replica serves ({@link claimField}); undefined for a claim that does not
   * say (it counts as serving all of them).
   */
  readonly namespaces?: readonly string[];
}

/** The separator of a claim's parts in its Redis field. */
const PART_SEPARATOR = '|';

/**
 * A claim's field in the name's Redis hash: its fingerprints (comma-separated), the leadership backend its
 * replica elects through (src/leadership/open-backend.ts `leadershipMarker`) and the namespaces of the cluster
 * it serves (sorted, comma-separated), separated by `|`: the marker every release from this one on reads, so
 * that replicas of one cluster that elect through different backends for the same namespaces (a rollback to a
 * release without this backend, a fleet configured in two ways) see each other. Replicas of one fleet write the
 * same field; a field unseen for the claims' horizon is forgotten.
 */
export function claimField(
  fingerprints: readonly string[],
  leadership: string,
  namespaces: readonly string[],
): string {
  const ns = [...new Set(namespaces)].sort().join(',');
  return [fingerprints.join(','), leadership, ns].join(PART_SEPARATOR);
}

/**
 * Reads a claim's field ({@link claimField}); a field without a backend has `leadership` undefined, one
 * without namespaces has `namespaces` undefined.
 */
export function parseClaimField(field: string): {
  fingerprints: string[];
  leadership: string | undefined;
  namespaces: string[] | undefined;
} {
  const [fps = '', leadership, namespaces] = field.split(PART_SEPARATOR);
  return {
    fingerprints: fps.split(',').filter(Boolean),
    leadership,
    namespaces: namespaces === undefined ? undefined : namespaces.split(',').filter(Boolean),
  };
}

/**
 * A claim read from the name's Redis hash: its field ({@link claimField}) and the value stored with it, when it
 * was last refreshed (`seenMs`, epoch ms by Redis's clock), read at `nowMs` (the same clock); live when its age is
 * at most `liveMs`.
 */
export function redisClaim(field: string, seenMs: number, nowMs: number, liveMs: number): Claim {
  const ageMs = Math.max(0, nowMs - seenMs);
  const { fingerprints, leadership, namespaces } = parseClaimField(field);
  return {
    fingerprints,
    live: ageMs <= liveMs,
    ageMs,
    from: 'redis',
    ...(leadership === undefined ? {} : { leadership }),
    ...(namespaces === undefined ? {} : { namespaces }),
  };
}

/**
 * The live claims on a cluster name made through another leadership backend than `ours` by replicas that serve
 * one of `namespaces` (a claim that does not name its namespaces serves them all), most recently seen first.
 * Whatever their fingerprints: replicas that serve one namespace of one cluster name on one Redis share its
 * queue, so two fleets electing through two backends would both consume it. Fleets that serve other
 * namespaces of the cluster share no queue with ours: they do not conflict.
 */
export function otherBackendClaims(
  ours: string,
  claims: readonly Claim[],
  namespaces: readonly string[],
): Claim[] {
  return claims
    .filter(
      (c) =>
        c.live &&
        c.leadership !== undefined &&
        c.leadership !== ours &&
        (c.namespaces === undefined || c.namespaces.some((n) => namespaces.includes(n))),
    )
    .sort((a, b) => a.ageMs - b.ageMs);
}

/**
 * The live claims that are not linked to `ours` (another cluster under the same name), oldest-seen last.
 * @param ours this replica's fingerprints for the name
 * @param claims every known claim on the name, live or not (ours among them or not)
 */
export function foreignClaims(oursAll: readonly string[], claimsAll: readonly Claim[]): Claim[] {
  const strong = (fps: readonly string[]) => fps.filter((fp) => fp.startsWith('ca:'));
  const ours = strong(oursAll);
  if (ours.length === 0) return [];
  const claims = claimsAll
    .map((c) => ({ claim: c, fps: strong(c.fingerprints) }))
    .filter((c) => c.fps.length > 0);
  const parent = new Map<string, string>();
  const find = (x: string): string => {
    let root = x;
    while ((parent.get(root) ?? root) !== root) root = parent.get(root) ?? root;
    // Path compression: later finds are short.
    let at = x;
    while (at !== root) {
      const next = parent.get(at) ?? root;
      parent.set(at, root);
      at = next;
    }
    return root;
  };
  const union = (a: string, b: string) => {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent.set(ra, rb);
  };
  const link = (fps: readonly string[]) => {
    for (const fp of fps) if (!parent.has(fp)) parent.set(fp, fp);
    for (let i = 1; i < fps.length; i++) union(fps[0] as string, fps[i] as string);
  };
  link(ours);
  for (const c of claims) link(c.fps);
  const mine = new Set(ours.map(find));
  return claims
    .filter((c) => c.claim.live && !c.fps.some((fp) => mine.has(find(fp))))
    .map((c) => c.claim)
    .sort((a, b) => a.ageMs - b.ageMs);
}
