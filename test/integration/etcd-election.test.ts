/**
 * The etcd election's own behaviour on real etcd, beyond the contract every backend passes
 * (test/integration/leadership-contract.test.ts): fencing with etcd frozen, keepalive freshness counted from
 * when the request was sent, waiting behind a predecessor (lease revoked, watch stalled), the campaign
 * transaction with a lost answer, and the coalesced fencing read (one read only answers calls made before it).
 */
import { Etcd3, type ITxnRequest, type ITxnResponse, type Lease } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalEtcd, startEtcd } from '../../harness/sandbox/local-services.ts';
import { monotonicClock } from '../../src/clock.ts';
import {
  createEtcdLeadershipGroup,
  type EtcdLeadershipGroup,
  type EtcdLeadershipGroupOptions,
} from '../../src/leadership/etcd/backend.ts';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import type { Leadership } from '../../src/leadership/leadership.ts';
import { clusterElectionsPrefix, membersPrefix } from '../../src/queue/job-identity.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let etcd: LocalEtcd;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

/**
 * These tests are of the election itself: each candidate is a replica of its own (its own client, session
 * lease and watch) with one election, unbalanced (every started election campaigns). Balancing is tested in
 * etcd-balance.test.ts.
 */
interface Candidate {
  id: string;
  client: Etcd3;
  group: EtcdLeadershipGroup;
  leadership: Leadership;
  events: string[];
}

/** An election prefix under the leadership root (the one the replica's watch covers). */
const election = (name: string) => `${clusterElectionsPrefix('test')}${name}/`;

function candidate(
  id: string,
  prefix: string,
  ttlSeconds = 2,
  extra: Partial<EtcdLeadershipGroupOptions> = {},
): Candidate {
  const client = extra.client ?? new Etcd3({ hosts: etcd.endpoints });
  const events: string[] = [];
  const log = extra.log ?? memoryLogger().log;
  const group = createEtcdLeadershipGroup({
    membersPrefix: membersPrefix('test'),
    client,
    replicaId: id,
    ttlSeconds,
    log,
    monotonicNow: monotonicClock,
    balanced: false,
    ...extra,
  });
  const leadership = group.election(prefix, prefix, log);
  leadership.addEventHandler({
    onElected: () => events.push('elected'),
    onLost: (r) => events.push(`lost: ${r}`),
  });
  group.start();
  return { id, client, group, leadership, events };
}

/** Resigns, closes the session (revokes its lease) and the client. */
async function leave(c: Candidate): Promise<void> {
  await c.leadership.resign();
  await c.group.close();
  c.client.close();
}

describe('etcd leadership (real etcd)', () => {
  it('fencing: with etcd frozen, the leader stops before its TTL runs out and fence() refuses', async () => {
    const prefix = election('election-b');
    const c = candidate('solo', prefix, 2);
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);
    etcd.members[0]?.pause();
    try {
      await waitFor('leadership lost', () => !c.leadership.isLeader, 10_000);
      // Lost by the keepalive watchdog (TTL from the last keepalive sent), not by etcd3's own 2×TTL detection.
      expect(c.leadership.stillLeader()).toBe(false);
      await expect(c.leadership.fence(new AbortController().signal)).rejects.toThrow(FencedError);
      expect(c.events[1]).toMatch(/^lost: no successful keepalive/);
    } finally {
      etcd.members[0]?.resume();
    }
    // After etcd is back, it campaigns again and is re-elected.
    await waitFor('re-elected', () => c.leadership.isLeader, 20_000);
    await leave(c);
  });
});

describe('etcd leadership: keepalive freshness (real etcd)', () => {
  it('a keepalive counts from when its request was sent, not from its late answer', async () => {
    const delayMs = 300;
    const ages: number[] = [];
    let c: Candidate | undefined;
    const client = new Etcd3({ hosts: etcd.endpoints });
    const lease = client.lease.bind(client);
    client.lease = (...args) => {
      const l = lease(...args);
      const emit = l.emit.bind(l);
      l.emit = (event, ...rest) => {
        if (event !== 'keepaliveSucceeded') return emit(event, ...rest);
        // The answer reaches us late (a slow way back): the server renewed the lease when it got the request.
        setTimeout(() => {
          emit(event, ...rest);
          const session = c?.leadership.session;
          if (session?.backend === 'etcd') ages.push(session.keepaliveAgeMs);
        }, delayMs);
        return true;
      };
      return l;
    };
    c = candidate('late', election('keepalive-sent'), 2, { client });
    c.leadership.start();
    await waitFor('elected', () => c?.leadership.isLeader);
    await waitFor('three late answers', () => ages.length >= 3);
    // Right after each answer, the lease is as old as the request: at least the answer's delay.
    for (const age of ages) expect(age).toBeGreaterThanOrEqual(delayMs);
    expect(c.leadership.isLeader).toBe(true);
    await leave(c);
  });
});

/**
 * An etcd client whose first transaction on a key in `prefix` goes through `firstTxn` (given the real `txn`
 * and the request) instead of straight to etcd. The campaign's put-if-absent is that transaction.
 */
function clientWithFirstTxn(
  prefix: string,
  firstTxn: (txn: (req: ITxnRequest) => Promise<ITxnResponse>, req: ITxnRequest) => Promise<ITxnResponse>,
): Etcd3 {
  const client = new Etcd3({ hosts: etcd.endpoints });
  // The builders' commit() calls the client's KV stub: the very RPC etcd3 would retry.
  const kv = client.kv;
  const txn = kv.txn.bind(kv);
  let first = true;
  kv.txn = (req, o) => {
    if (!first || !req.compare?.[0]?.key?.toString().startsWith(prefix)) return txn(req, o);
    first = false;
    return firstTxn((r) => txn(r, o), req);
  };
  return client;
}

/** A real etcd client whose watches watch a key that never changes (a stream that silently stopped delivering). */
function clientWithStalledWatches(): { client: Etcd3; seen: { created: number } } {
  const client = new Etcd3({ hosts: etcd.endpoints });
  const watch = client.watch.bind(client);
  const seen = { created: 0 };
  client.watch = () => {
    const builder = watch();
    builder.prefix = () => builder.key('stalled-watch-of-nothing');
    const create = builder.create.bind(builder);
    builder.create = async () => {
      const w = await create();
      seen.created += 1;
      return w;
    };
    return builder;
  };
  return { client, seen };
}

/** The leadership's keys under `prefix`: replica id → lease ids (the key names). */
async function candidateKeys(client: Etcd3, prefix: string): Promise<Map<string, string[]>> {
  const kvs = await client.getAll().prefix(prefix).strings();
  const byId = new Map<string, string[]>();
  for (const [k, v] of Object.entries(kvs)) byId.set(v, [...(byId.get(v) ?? []), k.slice(prefix.length)]);
  return byId;
}

describe('etcd leadership: waiting for the predecessor (real etcd)', () => {
  it('the session lease revoked while waiting behind the leader → a new lease, the next term campaigns at once', async () => {
    const prefix = election('wait-lost');
    const a = candidate('a', prefix);
    a.leadership.start();
    await waitFor('a elected', () => a.leadership.isLeader);

    const leases: Lease[] = [];
    const bClient = new Etcd3({ hosts: etcd.endpoints });
    const lease = bClient.lease.bind(bClient);
    bClient.lease = (...args) => {
      const l = lease(...args);
      leases.push(l);
      return l;
    };
    const b = candidate('b', prefix, 2, { client: bClient });
    b.leadership.start();
    await waitFor('b waits behind a', async () => (await candidateKeys(a.client, prefix)).has('b'));
    const [bLease] = (await candidateKeys(a.client, prefix)).get('b') ?? [];
    if (!bLease) throw new Error('no key of b');
    // b's session lease ends behind its back (an operator, an expiry etcd3 has not noticed yet).
    const lost = Promise.withResolvers<void>();
    leases[0]?.on('lost', () => lost.resolve());
    await a.client.leaseClient.leaseRevoke({ ID: bLease });
    await lost.promise;
    // b campaigns again on a new lease while a still leads.
    await waitFor('b campaigns again with a new key', async () => {
      const keys = (await candidateKeys(a.client, prefix)).get('b') ?? [];
      return keys.length === 1 && keys[0] !== bLease;
    });
    expect(leases).toHaveLength(2);
    expect(a.leadership.isLeader).toBe(true);
    expect(b.leadership.isLeader).toBe(false);
    await a.leadership.resign();
    await waitFor('b elected', () => b.leadership.isLeader);
    expect(b.events).toEqual(['elected']);
    await leave(a);
    await leave(b);
  });

  it("a watch that stalls → the predecessor's key is re-read once per TTL: elected after the predecessor left", async () => {
    const prefix = election('wait-stalled');
    const a = candidate('a', prefix);
    a.leadership.start();
    await waitFor('a elected', () => a.leadership.isLeader);
    const { client: bClient, seen } = clientWithStalledWatches();
    const b = candidate('b', prefix, 2, { client: bClient });
    b.leadership.start();
    await waitFor("b's view watches (a stalled watch)", () => seen.created === 1);
    await waitFor('b waits behind a', async () => (await candidateKeys(a.client, prefix)).has('b'));
    await a.leadership.resign();
    // No watch ever reports the deletion: only the re-read can tell.
    await waitFor('b elected', () => b.leadership.isLeader, 10_000);
    expect(seen.created).toBe(1);
    await leave(a);
    await leave(b);
  });

  it('a leader whose view has not yet seen its own key still names itself as the current leader', async () => {
    // CI run of 931f179: currentLeader() read the shared view, which lagged the term, and returned undefined.
    const prefix = election('view-lags-term');
    const { client, seen } = clientWithStalledWatches();
    const c = candidate('solo', prefix, 2, { client });
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);
    expect(seen.created).toBe(1);
    expect(await c.leadership.currentLeader()).toBe('solo');
    await leave(c);
  });
});

describe('etcd leadership: the campaign transaction (real etcd)', () => {
  it('a campaign whose first put was applied but its answer lost (etcd3 retried it) is still elected', async () => {
    const prefix = election('campaign-retried');
    let sent = 0;
    // As etcd3's retry after a lost answer: the same Txn reaches etcd twice. Other writes (here one key
    // elsewhere) happen in between, so the second answer's header revision is past our key's.
    const client = clientWithFirstTxn(prefix, async (txn, req) => {
      sent += 1;
      await txn(req);
      await client.put('test/unrelated').value('bump');
      sent += 1;
      return txn(req);
    });
    const c = candidate('retried', prefix, 2, { client });
    c.leadership.start();
    await waitFor('elected despite the retried transaction', () => c.leadership.isLeader, 10_000);
    expect(sent).toBe(2);
    const keys = await client.getAll().prefix(prefix).keys();
    expect(keys).toHaveLength(1); // one candidate key: the retry did not put a second one
    await c.leadership.fence(new AbortController().signal);
    await leave(c);
  });

  it('a candidate key that exists but is not ours fails the campaign; the next one is elected on its own key', async () => {
    const prefix = election('campaign-foreign');
    const client = clientWithFirstTxn(prefix, async (txn, req) => {
      // Someone else's value under our lease id's key (no lease): the compare fails.
      const key = req.compare?.[0]?.key;
      if (!key) throw new Error('no compare key');
      await client.put(key.toString()).value('someone-else');
      return txn(req);
    });
    const mem = memoryLogger();
    const c = candidate('mine', prefix, 2, { client, log: mem.log });
    c.leadership.start();
    await waitFor('the campaign failed on the foreign key', () =>
      mem.lines.find((l) => l.msg === 'campaign failed; retrying'),
    );
    expect(c.leadership.isLeader).toBe(false);
    expect(JSON.stringify(mem.lines.find((l) => l.msg === 'campaign failed; retrying'))).toMatch(
      /exists but is not ours \(value \\"someone-else\\"/,
    );
    // Clear the foreign keys: the retry campaigns on a new lease and is elected on a key of its own.
    await client.delete().prefix(prefix).exec();
    await waitFor('elected', () => c.leadership.isLeader, 10_000);
    await c.leadership.fence(new AbortController().signal);
    const kvs = await client.getAll().prefix(prefix).strings();
    expect(Object.values(kvs)).toEqual(['mine']);
    await leave(c);
  });
});

/** A fencing-read wrapper whose reads each wait for `release(n)` (1-based) unless auto-released. */
function heldReads(log: string[] = []) {
  const gates: PromiseWithResolvers<void>[] = [];
  let autoFrom = Number.POSITIVE_INFINITY;
  const gate = (n: number) => {
    while (gates.length < n) gates.push(Promise.withResolvers<void>());
    return gates[n - 1] as PromiseWithResolvers<void>;
  };
  let count = 0;
  const readLeaderKey: NonNullable<EtcdLeadershipGroupOptions['readLeaderKey']> = async (key, read) => {
    count += 1;
    const n = count;
    log.push(`read ${n} started`);
    if (n < autoFrom) await gate(n).promise;
    const rev = await read(key);
    log.push(`read ${n} done`);
    return rev;
  };
  return {
    readLeaderKey,
    get count() {
      return count;
    },
    release: (n: number) => gate(n).resolve(),
    /** Reads from the n-th on are not held. */
    autoReleaseFrom: (n: number) => {
      autoFrom = n;
      for (let i = n; i <= gates.length; i++) gate(i).resolve();
    },
  };
}

/** Settles `p` into a record readable synchronously. */
function track(p: Promise<void>) {
  const t: { settled: boolean; error?: unknown } = { settled: false };
  p.then(
    () => {
      t.settled = true;
    },
    (err: unknown) => {
      t.settled = true;
      t.error = err;
    },
  );
  return t;
}

describe('etcd leadership: coalesced fencing reads (real etcd)', () => {
  const signal = () => new AbortController().signal;

  it('a fence() called while a read is in flight is satisfied only by a read that started after it', async () => {
    const log: string[] = [];
    const reads = heldReads(log);
    const c = candidate('order', election('fence-order'), 2, { readLeaderKey: reads.readLeaderKey });
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);

    log.push('call A');
    const a = c.leadership.fence(signal()).then(() => log.push('A resolved'));
    log.push('call B');
    const b = track(c.leadership.fence(signal()).then(() => void log.push('B resolved')));
    log.push('call C');
    const cc = track(c.leadership.fence(signal()).then(() => void log.push('C resolved')));
    expect(reads.count).toBe(1); // B and C wait for the next read, none started for them yet

    reads.release(1);
    await a;
    await waitFor('the second read started', () => reads.count === 2);
    // Read 1 finished, but B and C called after it started: they wait for read 2, which is held.
    expect(b.settled).toBe(false);
    expect(cc.settled).toBe(false);
    log.push('call D');
    const d = track(c.leadership.fence(signal()).then(() => void log.push('D resolved')));

    reads.release(2);
    await waitFor('B and C resolved', () => b.settled && cc.settled);
    expect(b.error).toBeUndefined();
    expect(cc.error).toBeUndefined();
    await waitFor('the third read started', () => reads.count === 3);
    expect(d.settled).toBe(false); // D called during read 2: only read 3 may satisfy it
    reads.release(3);
    await waitFor('D resolved', () => d.settled);
    expect(d.error).toBeUndefined();

    // Each caller was satisfied by a read that started after its call (microtask details aside).
    const at = (entry: string) => {
      const i = log.indexOf(entry);
      expect(i, entry).toBeGreaterThanOrEqual(0);
      return i;
    };
    expect(at('call A')).toBeLessThan(at('read 1 started'));
    expect(at('read 1 done')).toBeLessThan(at('A resolved'));
    for (const x of ['B', 'C']) {
      expect(at(`call ${x}`)).toBeLessThan(at('read 2 started'));
      expect(at('read 2 done')).toBeLessThan(at(`${x} resolved`));
    }
    expect(at('read 2 started')).toBeLessThan(at('call D'));
    expect(at('call D')).toBeLessThan(at('read 3 started'));
    expect(at('read 3 done')).toBeLessThan(at('D resolved'));
    expect(reads.count).toBe(3);
    await leave(c);
  });

  it("a caller's abort rejects it at once without cancelling the shared read of the others", async () => {
    const reads = heldReads();
    const c = candidate('abort', election('fence-abort'), 2, { readLeaderKey: reads.readLeaderKey });
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);

    const first = track(c.leadership.fence(signal()));
    const ac = new AbortController();
    const aborted = track(c.leadership.fence(ac.signal));
    const other = track(c.leadership.fence(signal()));
    ac.abort();
    await waitFor('the aborted caller rejected', () => aborted.settled);
    expect((aborted.error as Error).name).toBe('AbortError');
    expect(first.settled || other.settled).toBe(false);
    expect(reads.count).toBe(1);

    reads.autoReleaseFrom(1);
    await waitFor('the others resolved', () => first.settled && other.settled);
    expect(first.error).toBeUndefined();
    expect(other.error).toBeUndefined();
    expect(reads.count).toBe(2);
    // An already-aborted signal: rejected without a read.
    const gone = new AbortController();
    gone.abort();
    await expect(c.leadership.fence(gone.signal)).rejects.toMatchObject({ name: 'AbortError' });
    expect(reads.count).toBe(2);
    await leave(c);
  });

  it('a timed-out shared read fences its callers (FencedError) without ending the term', async () => {
    let hang = true;
    let reads = 0;
    const c = candidate('slow', election('fence-timeout'), 2, {
      fenceTimeoutMs: 200,
      readLeaderKey: (key, read) => {
        reads += 1;
        return hang ? new Promise<string | undefined>(() => {}) : read(key);
      },
    });
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => c.leadership.fence(signal())));
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as Error;
      expect(err).toBeInstanceOf(FencedError);
      expect(err.message).toMatch(/cannot confirm the leader key: fencing read timed out after 200 ms/);
    }
    expect(reads).toBeLessThanOrEqual(2);
    expect(c.leadership.isLeader).toBe(true);
    hang = false;
    await c.leadership.fence(signal());
    await leave(c);
  });

  it('leader key deleted behind its back → every concurrent caller fenced, leadership lost once', async () => {
    const prefix = election('fence-deleted');
    let reads = 0;
    const c = candidate('victim', prefix, 2, {
      readLeaderKey: (key, read) => {
        reads += 1;
        return read(key);
      },
    });
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);
    await c.client.delete().prefix(prefix).exec();
    const results = await Promise.allSettled(Array.from({ length: 50 }, () => c.leadership.fence(signal())));
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as Error;
      expect(err).toBeInstanceOf(FencedError);
      expect(err.message).toMatch(/^(leader key gone or re-created|no leader key)$/);
    }
    expect(reads).toBeLessThanOrEqual(2);
    expect(c.events.filter((e) => e === 'lost: leader key gone or re-created')).toHaveLength(1);
    expect(c.events.slice(0, 2)).toEqual(['elected', 'lost: leader key gone or re-created']);
    // It campaigns again with a new key and fences fine under it.
    await waitFor('re-elected', () => c.leadership.isLeader);
    await c.leadership.fence(signal());
    await leave(c);
  });
});
