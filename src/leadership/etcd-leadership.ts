/**
 * Leadership of one target through an etcd election, as etcd's Go client does it
 * (client/v3/concurrency/election.go): each candidate puts a key `prefix/<lease id>` attached to its
 * lease; the key with the lowest create revision leads; the others wait for the key just before theirs
 * to be deleted.
 *
 * Why not etcd3's `Campaign`: it reports a lost lease only after ~2×TTL of failed keepalives, while the
 * server expires the lease after 1×TTL, so a replica could believe it leads after another was elected.
 * Here the lease is ours: we record every successful keepalive and consider leadership lost as soon as
 * (TTL − safety margin) has passed without one (**fencing**), and before each DELETE we confirm our key
 * still exists with our create revision.
 */
import type { Etcd3, Lease, Namespace } from 'etcd3';
import { FencedError } from '../../workers/cleanup-driver-pod.ts';
import type { Logger } from '../telemetry/log.ts';
import type { Leadership, LeadershipEvents } from './leadership.ts';

/** Options of {@link createEtcdLeadership}. */
export interface EtcdLeadershipOptions extends LeadershipEvents {
  client: Etcd3;
  /** Election key prefix of the target (ends with `/`). */
  prefix: string;
  replicaId: string;
  /** Lease TTL, seconds (≥ 2). */
  ttlSeconds: number;
  log: Logger;
  now: () => number;
  /** Timeout of the fencing GET, ms (default: a third of the TTL). */
  fenceTimeoutMs?: number;
  /**
   * Wait before the first campaign, ms (default 0). A replica staggers its targets' first campaigns (in an
   * order of its own) so that leaderships spread over the replicas instead of all going to the first one
   * to reach etcd: the order of candidates is fixed by who campaigns first.
   */
  initialCampaignDelayMs?: number;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Creates the etcd leadership of one target; call `start()` to campaign. */
export function createEtcdLeadership(opts: EtcdLeadershipOptions): Leadership {
  const ns: Namespace = opts.client.namespace(opts.prefix);
  const ttlMs = opts.ttlSeconds * 1000;
  // Stop DELETEs a little before the server can expire the lease: keepalive RTT and clock granularity.
  const freshMs = ttlMs - Math.min(1000, ttlMs / 5);
  const fenceTimeoutMs = opts.fenceTimeoutMs ?? Math.max(500, ttlMs / 3);
  let running = false;
  let resigned = false;
  let leader = false;
  let lease: Lease | undefined;
  let myKey: string | undefined;
  let myRevision: string | undefined;
  let lastKeepaliveMs: number | undefined;
  let lostTerm: ((reason: string) => void) | undefined;
  let interrupted = false;

  const fresh = () => lastKeepaliveMs !== undefined && opts.now() - lastKeepaliveMs < freshMs;

  /** Ends the current term (if leader) exactly once, and wakes the campaign loop. */
  function endTerm(reason: string) {
    interrupted = true;
    const wake = lostTerm;
    lostTerm = undefined;
    if (leader) {
      leader = false;
      opts.log.warn({ reason }, 'leadership lost');
      opts.onLost(reason);
    }
    wake?.(reason);
  }

  async function waitForPredecessors(): Promise<void> {
    for (;;) {
      if (!running || !myRevision || interrupted)
        throw new Error('campaign interrupted (lease lost or resigned)');
      const before = (BigInt(myRevision) - 1n).toString();
      const res = await ns.getAll().maxCreateRevision(before).sort('Create', 'Descend').limit(1).exec();
      const prev = res.kvs[0];
      if (!prev) return;
      const prevKey = prev.key.toString();
      const deleted = new Promise<void>((resolve) => {
        void ns
          .watch()
          .key(prevKey)
          .startRevision((BigInt(res.header.revision) + 1n).toString())
          .create()
          .then(
            (w) => {
              const done = () => {
                void w.cancel();
                resolve();
              };
              w.on('delete', done);
              w.on('error', done);
              lostTerm = (reason) => {
                void w.cancel();
                resolve();
                opts.log.debug({ reason }, 'campaign interrupted');
              };
            },
            () => resolve(),
          );
      });
      await deleted;
    }
  }

  async function term(): Promise<void> {
    const l = opts.client.lease(opts.ttlSeconds, { autoKeepAlive: true });
    lease = l;
    interrupted = false;
    l.on('keepaliveSucceeded', () => {
      if (lease === l) lastKeepaliveMs = opts.now();
    });
    l.on('lost', (err) => {
      if (lease === l) endTerm(`lease lost: ${err.message}`);
    });
    const leaseId = await withTimeout(l.grant(), ttlMs, 'lease grant');
    lastKeepaliveMs = opts.now();
    const key = leaseId;
    const res = await ns
      .if(key, 'Create', '==', 0)
      .then(ns.put(key).value(opts.replicaId).lease(leaseId))
      .commit();
    myKey = key;
    myRevision = res.header.revision;
    await waitForPredecessors();
    if (!running || interrupted) return;
    const ended = new Promise<string>((resolve) => {
      lostTerm = resolve;
    });
    leader = true;
    opts.log.info({ leaseId, createRevision: myRevision }, 'elected leader');
    opts.onElected();
    // Watchdog: etcd3 notices a dead lease late; we stop as soon as it may have expired on the server.
    const watchdog = setInterval(
      () => {
        if (!fresh())
          endTerm(`no successful keepalive for ${opts.now() - (lastKeepaliveMs ?? 0)} ms (TTL ${ttlMs} ms)`);
      },
      Math.min(250, ttlMs / 8),
    );
    try {
      await ended;
    } finally {
      clearInterval(watchdog);
    }
  }

  async function campaign(): Promise<void> {
    let failures = 0;
    let first = true;
    while (running) {
      if (first && opts.initialCampaignDelayMs) {
        await sleep(opts.initialCampaignDelayMs);
        if (!running) break;
      }
      first = false;
      try {
        await term();
        failures = 0;
      } catch (err) {
        if (!running) break;
        failures += 1;
        opts.log.warn({ err: { message: (err as Error).message } }, 'campaign failed; retrying');
      } finally {
        endTerm('term ended');
        const l = lease;
        lease = undefined;
        myKey = undefined;
        myRevision = undefined;
        lastKeepaliveMs = undefined;
        // Revoke so that the next candidate is elected at once instead of after the TTL.
        if (l) await withTimeout(l.revoke(), 2000, 'lease revoke').catch(() => undefined);
      }
      if (running) await sleep(Math.min(5000, 200 * 2 ** failures) * (0.5 + Math.random() / 2));
    }
  }

  return {
    start() {
      if (running || resigned) return;
      running = true;
      void campaign();
    },
    async resign() {
      resigned = true;
      running = false;
      const l = lease;
      endTerm('resigned');
      if (l) await withTimeout(l.revoke(), 2000, 'lease revoke').catch(() => undefined);
    },
    get isLeader() {
      return leader;
    },
    get lastKeepaliveMs() {
      return lastKeepaliveMs;
    },
    stillLeader: () => leader && fresh(),
    async fence(signal) {
      if (!leader) throw new FencedError('not the leader');
      if (!fresh()) throw new FencedError('lease may have expired: no recent keepalive');
      const key = myKey;
      const rev = myRevision;
      if (!key || !rev) throw new FencedError('no leader key');
      let res: Awaited<ReturnType<ReturnType<Namespace['get']>['exec']>>;
      try {
        res = await withTimeout(ns.get(key).exec(), fenceTimeoutMs, 'fencing read');
      } catch (err) {
        throw new FencedError(`cannot confirm the leader key: ${(err as Error).message}`);
      }
      signal.throwIfAborted();
      const kv = res.kvs[0];
      if (!kv || kv.create_revision !== rev) {
        endTerm('leader key gone or re-created');
        throw new FencedError('leader key gone or re-created');
      }
      if (!fresh()) throw new FencedError('lease went stale during the fencing read');
    },
    async currentLeader() {
      const res = await withTimeout(
        ns.getAll().sort('Create', 'Ascend').limit(1).exec(),
        fenceTimeoutMs,
        'leader read',
      );
      return res.kvs[0]?.value.toString();
    },
  };
}
