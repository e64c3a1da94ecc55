import { Etcd3, type ITxnRequest, type ITxnResponse, type Lease, type Namespace } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalEtcd, startEtcd } from '../../harness/sandbox/local-services.ts';
import { monotonicClock } from '../../src/clock.ts';
import { createEtcdLeadership, type EtcdLeadershipOptions } from '../../src/leadership/etcd-leadership.ts';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import type { Leadership } from '../../src/leadership/leadership.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

let etcd: LocalEtcd;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

interface Candidate {
  id: string;
  client: Etcd3;
  leadership: Leadership;
  events: string[];
}

function candidate(
  id: string,
  prefix: string,
  ttlSeconds = 2,
  extra: Partial<EtcdLeadershipOptions> = {},
): Candidate {
  const client = extra.client ?? new Etcd3({ hosts: etcd.endpoints });
  const events: string[] = [];
  const leadership = createEtcdLeadership({
    client,
    prefix,
    replicaId: id,
    ttlSeconds,
    log: memoryLogger().log,
    monotonicNow: monotonicClock,
    ...extra,
  });
  leadership.addEventHandler({
    onElected: () => events.push('elected'),
    onLost: (r) => events.push(`lost: ${r}`),
  });
  return { id, client, leadership, events };
}

describe('etcd leadership (real etcd)', () => {
  it('three candidates → exactly one leader; resign → another elected within a second', async () => {
    const prefix = 'test/election-a/';
    const cs = ['r1', 'r2', 'r3'].map((id) => candidate(id, prefix));
    for (const c of cs) c.leadership.start();
    const first = await waitFor('a leader', () => cs.find((c) => c.leadership.isLeader));
    // Give the others every chance to (wrongly) become leader too.
    await waitFor(
      'all campaigned',
      async () => (await cs[0]?.client.getAll().prefix(prefix).keys())?.length === 3,
    );
    expect(cs.filter((c) => c.leadership.isLeader)).toHaveLength(1);
    expect(await first.leadership.currentLeader()).toBe(first.id);
    await first.leadership.fence(new AbortController().signal);

    const t0 = Date.now();
    await first.leadership.resign();
    const second = await waitFor('a new leader', () => cs.find((c) => c !== first && c.leadership.isLeader));
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(first.leadership.isLeader).toBe(false);
    expect(first.events).toEqual(['elected', 'lost: resigned']);
    await expect(first.leadership.fence(new AbortController().signal)).rejects.toThrow(FencedError);
    expect(cs.filter((c) => c.leadership.isLeader)).toEqual([second]);
    for (const c of cs) {
      await c.leadership.resign();
      c.client.close();
    }
  });

  it('stepDown: the next candidate is elected, the one that stepped down campaigns again behind it', async () => {
    const prefix = 'test/election-stepdown/';
    const [a, b] = ['a', 'b'].map((id) => candidate(id, prefix)) as [Candidate, Candidate];
    a.leadership.start();
    await waitFor('a leads', () => a.leadership.isLeader);
    b.leadership.start();
    await waitFor('b campaigned', async () => (await a.client.getAll().prefix(prefix).keys()).length === 2);
    a.leadership.stepDown('stuck (test)');
    await waitFor('b leads', () => b.leadership.isLeader);
    expect(a.leadership.isLeader).toBe(false);
    expect(a.events).toEqual(['elected', 'lost: stepped down: stuck (test)']);
    // a is still a candidate: it leads again once b leaves.
    await waitFor(
      'a campaigned again',
      async () => (await a.client.getAll().prefix(prefix).keys()).length === 2,
    );
    await b.leadership.resign();
    await waitFor('a leads again', () => a.leadership.isLeader);
    expect(a.events).toEqual(['elected', 'lost: stepped down: stuck (test)', 'elected']);
    for (const c of [a, b]) {
      await c.leadership.resign();
      c.client.close();
    }
  });

  it('fencing: with etcd frozen, the leader stops before its TTL runs out and fence() refuses', async () => {
    const prefix = 'test/election-b/';
    const c = candidate('solo', prefix, 2);
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);
    etcd.members[0]?.pause();
    const frozenAt = Date.now();
    try {
      await waitFor('leadership lost', () => !c.leadership.isLeader, 10_000);
      // Lost within the TTL (2 s) plus the watchdog period, long before etcd3's own 2×TTL detection.
      expect(Date.now() - frozenAt).toBeLessThan(2500);
      expect(c.leadership.stillLeader()).toBe(false);
      await expect(c.leadership.fence(new AbortController().signal)).rejects.toThrow(FencedError);
      expect(c.events[1]).toMatch(/^lost: no successful keepalive/);
    } finally {
      etcd.members[0]?.resume();
    }
    // After etcd is back, it campaigns again and is re-elected.
    await waitFor('re-elected', () => c.leadership.isLeader, 20_000);
    await c.leadership.resign();
    c.client.close();
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
          const age = c?.leadership.keepaliveAgeMs;
          if (age !== undefined) ages.push(age);
        }, delayMs);
        return true;
      };
      return l;
    };
    c = candidate('late', 'test/keepalive-sent/', 2, { client });
    c.leadership.start();
    await waitFor('elected', () => c?.leadership.isLeader);
    await waitFor('three late answers', () => ages.length >= 3);
    // Right after each answer, the lease is as old as the request: at least the answer's delay.
    for (const age of ages) expect(age).toBeGreaterThanOrEqual(delayMs);
    expect(c.leadership.isLeader).toBe(true);
    await c.leadership.resign();
    client.close();
  });
});

/**
 * An etcd client whose first transaction in `prefix` goes through `firstTxn` (given the real `txn` and
 * the request) instead of straight to etcd. The campaign's put-if-absent is that transaction.
 */
function clientWithFirstTxn(
  prefix: string,
  firstTxn: (txn: (req: ITxnRequest) => Promise<ITxnResponse>, req: ITxnRequest) => Promise<ITxnResponse>,
): Etcd3 {
  return clientPatching(prefix, (ns) => {
    // The builders' commit() calls the namespace's KV stub: the very RPC etcd3 would retry.
    const kv = ns.kv;
    const txn = kv.txn.bind(kv);
    let first = true;
    kv.txn = (req, o) => {
      if (!first) return txn(req, o);
      first = false;
      return firstTxn((r) => txn(r, o), req);
    };
  });
}

/** A real etcd client whose namespace `prefix` (the one a leadership uses) is first handed to `patch`. */
function clientPatching(prefix: string, patch: (ns: Namespace) => void): Etcd3 {
  const client = new Etcd3({ hosts: etcd.endpoints });
  const namespace = client.namespace.bind(client);
  client.namespace = (p: string) => {
    const ns = namespace(p);
    if (p === prefix) patch(ns);
    return ns;
  };
  return client;
}

/**
 * Watch creations in `ns` wait for `gate` (when given), and the first `stalled` watches watch a key that
 * never changes instead of theirs (a watch stream that silently stopped delivering).
 */
function patchWatches(ns: Namespace, opts: { gate?: Promise<void>; stalled?: number }) {
  const watch = ns.watch.bind(ns);
  const seen = { created: 0, requested: 0 };
  ns.watch = () => {
    const builder = watch();
    const create = builder.create.bind(builder);
    builder.create = async () => {
      seen.requested += 1;
      if (seen.requested <= (opts.stalled ?? 0)) builder.key('stalled-watch-of-nothing');
      await opts.gate;
      const w = await create();
      seen.created += 1;
      return w;
    };
    return builder;
  };
  return seen;
}

/** The leadership's keys under `prefix`: replica id → lease ids (the key names). */
async function candidateKeys(client: Etcd3, prefix: string): Promise<Map<string, string[]>> {
  const kvs = await client.getAll().prefix(prefix).strings();
  const byId = new Map<string, string[]>();
  for (const [k, v] of Object.entries(kvs)) byId.set(v, [...(byId.get(v) ?? []), k.slice(prefix.length)]);
  return byId;
}

describe('etcd leadership: waiting for the predecessor (real etcd)', () => {
  it('a lease lost while the watch of the predecessor is being created → the next term campaigns at once', async () => {
    const prefix = 'test/wait-lost/';
    const a = candidate('a', prefix);
    a.leadership.start();
    await waitFor('a elected', () => a.leadership.isLeader);

    const gate = Promise.withResolvers<void>();
    let watches = { created: 0, requested: 0 };
    const leases: Lease[] = [];
    const bClient = clientPatching(prefix, (ns) => {
      watches = patchWatches(ns, { gate: gate.promise });
    });
    const lease = bClient.lease.bind(bClient);
    bClient.lease = (...args) => {
      const l = lease(...args);
      leases.push(l);
      return l;
    };
    const b = candidate('b', prefix, 2, { client: bClient });
    b.leadership.start();
    await waitFor("b is creating the watch of a's key", () => watches.requested === 1);
    // b's lease ends now, in the window between b's read of its predecessor and its watch.
    const [bLease] = (await candidateKeys(a.client, prefix)).get('b') ?? [];
    if (!bLease) throw new Error('no key of b');
    const lost = Promise.withResolvers<void>();
    leases[0]?.on('lost', () => lost.resolve());
    await a.client.leaseClient.leaseRevoke({ ID: bLease });
    await lost.promise; // b's own lease listener has run: the term is over
    gate.resolve();
    // b campaigns again on a new lease while a still leads (it was stuck on a's key until a left).
    await waitFor('b campaigns again with a new key', async () => {
      const keys = (await candidateKeys(a.client, prefix)).get('b') ?? [];
      return keys.length === 1 && keys[0] !== bLease;
    });
    expect(a.leadership.isLeader).toBe(true);
    expect(b.leadership.isLeader).toBe(false);
    await a.leadership.resign();
    await waitFor('b elected', () => b.leadership.isLeader);
    expect(b.events).toEqual(['elected']);
    await b.leadership.resign();
    a.client.close();
    bClient.close();
  });

  it("a watch that stalls → the predecessor's key is re-read once per TTL: elected after the predecessor left", async () => {
    const prefix = 'test/wait-stalled/';
    const a = candidate('a', prefix);
    a.leadership.start();
    await waitFor('a elected', () => a.leadership.isLeader);
    let watches = { created: 0, requested: 0 };
    const bClient = clientPatching(prefix, (ns) => {
      watches = patchWatches(ns, { stalled: Number.POSITIVE_INFINITY });
    });
    const b = candidate('b', prefix, 2, { client: bClient });
    b.leadership.start();
    await waitFor("b watches a's key (a stalled watch)", () => watches.created === 1);
    await a.leadership.resign();
    // No watch ever reports the deletion: only the re-read can tell.
    await waitFor('b elected', () => b.leadership.isLeader, 10_000);
    expect(watches.created).toBeGreaterThanOrEqual(1);
    await b.leadership.resign();
    a.client.close();
    bClient.close();
  });
});

describe('etcd leadership: the campaign transaction (real etcd)', () => {
  it('a campaign whose first put was applied but its answer lost (etcd3 retried it) is still elected', async () => {
    const prefix = 'test/campaign-retried/';
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
    await c.leadership.resign();
    client.close();
  });

  it('a candidate key that exists but is not ours fails the campaign; the next one is elected on its own key', async () => {
    const prefix = 'test/campaign-foreign/';
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
    await c.leadership.resign();
    client.close();
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
  const readLeaderKey: NonNullable<EtcdLeadershipOptions['readLeaderKey']> = async (key, read) => {
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

  it('50 concurrent fence() calls share at most 2 etcd reads, and all resolve', async () => {
    let reads = 0;
    const c = candidate('burst', 'test/fence-burst/', 2, {
      readLeaderKey: (key, read) => {
        reads += 1;
        return read(key);
      },
    });
    c.leadership.start();
    await waitFor('elected', () => c.leadership.isLeader);
    await Promise.all(Array.from({ length: 50 }, () => c.leadership.fence(signal())));
    expect(reads).toBeLessThanOrEqual(2);
    // A second burst: again at most two more.
    await Promise.all(Array.from({ length: 50 }, () => c.leadership.fence(signal())));
    expect(reads).toBeLessThanOrEqual(4);
    expect(c.leadership.isLeader).toBe(true);
    await c.leadership.resign();
    c.client.close();
  });

  it('a fence() called while a read is in flight is satisfied only by a read that started after it', async () => {
    const log: string[] = [];
    const reads = heldReads(log);
    const c = candidate('order', 'test/fence-order/', 2, { readLeaderKey: reads.readLeaderKey });
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
    await c.leadership.resign();
    c.client.close();
  });

  it("a caller's abort rejects it at once without cancelling the shared read of the others", async () => {
    const reads = heldReads();
    const c = candidate('abort', 'test/fence-abort/', 2, { readLeaderKey: reads.readLeaderKey });
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
    await c.leadership.resign();
    c.client.close();
  });

  it('a timed-out shared read fences its callers (FencedError) without ending the term', async () => {
    let hang = true;
    let reads = 0;
    const c = candidate('slow', 'test/fence-timeout/', 2, {
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
    await c.leadership.resign();
    c.client.close();
  });

  it('leader key deleted behind its back → every concurrent caller fenced, leadership lost once', async () => {
    const prefix = 'test/fence-deleted/';
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
    await c.leadership.resign();
    c.client.close();
  });
});
