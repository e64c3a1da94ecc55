/**
 * The leadership contract, one suite run against both backends (real etcd, real ZooKeeper): one leader per
 * election, resign and stepDown hand over at once, the balance over replicas (at most ⌈T / R⌉ each, one
 * session per replica), a replica added or killed, and — all along every handover — no two replicas whose
 * `fence()` succeeds for one target in the same round; a burst of `fence()` calls costs the server a few reads,
 * not one each; the session's freshness in each backend's own measure. This is the suite a new backend must
 * pass (test/helpers/leadership-backends.ts lists the backends: add one there). Cases of one backend's own
 * mechanics stay beside it: etcd-election.test.ts and etcd-balance.test.ts (lease revisions, the campaign
 * transaction, the order of coalesced fencing reads), zookeeper-*.test.ts (lost creates, ensembles).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BackendElection } from '../../src/leadership/backend.ts';
import { FencedError } from '../../src/leadership/fenced-error.ts';
import { type TargetRef, targetKey } from '../../src/queue/job-identity.ts';
import { leadershipBackends, TEST_SESSION_SECONDS, type TestGroup } from '../helpers/leadership-backends.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

interface Replica {
  id: string;
  g: TestGroup;
  elections: BackendElection[];
  /** Terms begun and ended, in order (`elected`, `lost: <reason>`), of every election. */
  events: string[];
}

/** The targets `ctx:<name>-0` … of a test. */
const targetsOf = (name: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ cluster: 'test', context: 'ctx', namespace: `${name}-${i}` }));

/** Targets led by exactly one replica (as the replicas themselves say). */
const ledOnce = (rs: readonly Replica[], t: number) =>
  Array.from({ length: t }, (_, i) => rs.filter((r) => r.elections[i]?.isLeader).length).every(
    (n) => n === 1,
  );
const leading = (rs: readonly Replica[]) =>
  Object.fromEntries(rs.map((r) => [r.id, r.elections.filter((e) => e.isLeader).length]));

/** Rounds of concurrent `fence()` of every replica for every target; a round with two successes is a double. */
function fenceRounds(rs: () => readonly Replica[], t: number) {
  const doubles: string[] = [];
  let rounds = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      await Promise.all(
        Array.from({ length: t }, async (_, i) => {
          const ok = await Promise.all(
            rs().map((r) =>
              r.elections[i]
                ?.fence(AbortSignal.timeout(2000))
                .then(() => r.id)
                .catch(() => undefined),
            ),
          );
          const winners = ok.filter((x) => x !== undefined);
          if (winners.length > 1) doubles.push(`target ${i}: ${winners.join(' and ')}`);
        }),
      );
      rounds += 1;
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  return {
    doubles,
    get rounds() {
      return rounds;
    },
    async stop() {
      running = false;
      await done;
    },
  };
}

describe.each(leadershipBackends())('leadership contract on $name (real server)', (backend) => {
  beforeAll(() => backend.start());
  afterAll(() => backend.stop());

  /**
   * Waits until the store holds exactly `n` live replica sessions. A session the previous case closed while
   * disconnected (or one that a replica gave up on) keeps its ephemeral nodes until the server expires it, within
   * one session timeout; more than `n` after that is a replica holding two sessions.
   */
  const waitForSessions = (n: number) =>
    waitFor(`${n} live sessions`, async () => (await backend.sessions()) === n, 15_000);

  function replica(
    id: string,
    targets: ReturnType<typeof targetsOf>,
    balanced = true,
    monotonicNow?: () => number,
  ): Replica {
    const log = memoryLogger().log;
    const g = backend.group(id, log, { balanced, monotonicNow });
    const events: string[] = [];
    const elections = targets.map((t) => {
      const e = g.group.election(targetKey(t), backend.prefix(t), log);
      e.addEventHandler({
        onElected: () => events.push('elected'),
        onLost: (r) => events.push(`lost: ${r}`),
      });
      e.start();
      return e;
    });
    g.group.start();
    return { id, g, elections, events };
  }

  it('three candidates → exactly one leader; resign → another elected at once, fence() refuses the first', async () => {
    const [t] = targetsOf('plain', 1);
    const cs = ['r1', 'r2', 'r3'].map((id) => replica(id, [t as TargetRef], false));
    try {
      const first = await waitFor('a leader', () => cs.find((c) => c.elections[0]?.isLeader));
      const prefix = backend.prefix(t as TargetRef);
      await waitFor('all campaigned', async () => (await backend.candidates(prefix)) === 3);
      expect(cs.filter((c) => c.elections[0]?.isLeader)).toHaveLength(1);
      expect(await first.elections[0]?.currentLeader()).toBe(first.id);
      await first.elections[0]?.fence(new AbortController().signal);
      await first.elections[0]?.resign();
      const second = await waitFor('a new leader', () =>
        cs.find((c) => c !== first && c.elections[0]?.isLeader),
      );
      expect(first.events).toEqual(['elected', 'lost: resigned']);
      await expect(first.elections[0]?.fence(new AbortController().signal)).rejects.toThrow(FencedError);
      expect(cs.filter((c) => c.elections[0]?.isLeader)).toEqual([second]);
      // Elected on the resigned candidate's deletion: the first replica's session lives on.
      await waitForSessions(3);
    } finally {
      for (const c of cs) await c.g.close();
    }
  });

  it("session: the backend's own measure while its session lives (etcd: keepalive age under the TTL; ZooKeeper: 0 s disconnected), none after resign", async () => {
    const [t] = targetsOf('session', 1);
    const r = replica('s1', [t as { cluster: string; context: string; namespace: string }], false);
    try {
      const e = r.elections[0] as BackendElection;
      await waitFor('elected', () => e.isLeader);
      const s = e.session;
      if (backend.name === 'etcd') {
        expect(s?.backend).toBe('etcd');
        expect(s?.backend === 'etcd' && s.keepaliveAgeMs).toBeLessThan(TEST_SESSION_SECONDS * 1000);
      } else {
        expect(s).toEqual({ backend: 'zookeeper', disconnectedMs: 0 });
      }
      await e.resign();
      expect(e.session).toBeUndefined();
    } finally {
      await r.g.close();
    }
  });

  it('50 concurrent fence() calls of a leader cost the server a few reads, not 50, and all resolve', async () => {
    const ts = targetsOf('fence-burst', 1);
    const a = replica('a', ts, false);
    try {
      await waitFor('a leads', () => a.elections[0]?.isLeader);
      const fence = () => a.elections[0]?.fence(new AbortController().signal);
      await fence(); // warm: the first call's own read
      const before = await backend.requestCount();
      await Promise.all(Array.from({ length: 50 }, fence));
      const reads = (await backend.requestCount()) - before;
      // Coalesced: one read in flight and one shared by the calls that arrived meanwhile (on ZooKeeper each is
      // a sync and a read: two requests), plus the probe's own request and a ping or two; uncoalesced it is 50
      // or more.
      console.info(`[contract] ${backend.name}: 50 concurrent fence() calls → ${reads} server requests`);
      expect(reads).toBeLessThanOrEqual(8);
      expect(a.elections[0]?.isLeader).toBe(true);
    } finally {
      await a.g.close();
    }
  });

  it('a leader whose process was frozen past its session (its monotonic clock jumps) → stillLeader() false before any I/O', async () => {
    // What the handler checks right before each DELETE, with no await between it and the request: a process
    // frozen between its fence and its DELETE (SIGSTOP, a long GC pause, a stalled node) must not send it on
    // waking, before its client has even read the socket that would tell it the session expired.
    const ts = targetsOf('frozen-still', 1);
    let frozenMs = 0;
    const a = replica('a', ts, false, () => performance.now() + frozenMs);
    try {
      await waitFor('a leads', () => a.elections[0]?.isLeader);
      await a.elections[0]?.fence(new AbortController().signal);
      expect(a.elections[0]?.stillLeader()).toBe(true);
      frozenMs = TEST_SESSION_SECONDS * 1000 + 500; // synchronously: no I/O is processed meanwhile
      expect(a.elections[0]?.stillLeader()).toBe(false);
    } finally {
      await a.g.close();
    }
  });

  it('a replica stopping while it leads: its terms end as a planned end (info), not as lost (warn)', async () => {
    const ts = targetsOf('stopping', 2);
    const { log, lines } = memoryLogger();
    const g = backend.group('s', log, { balanced: false });
    const elections = ts.map((t) => {
      const e = g.group.election(targetKey(t), backend.prefix(t), log);
      e.start();
      return e;
    });
    g.group.start();
    await waitFor('s leads both', () => elections.every((e) => e.isLeader));
    await g.close();
    const ends = lines.filter((l) => /^leadership (ended|lost)$/.test(String(l.msg)));
    expect(ends.map((l) => [l.level, l.msg])).toEqual([
      ['info', 'leadership ended'],
      ['info', 'leadership ended'],
    ]);
  });

  it('stepDown: the next candidate is elected, the one that stepped down campaigns again behind it', async () => {
    const ts = targetsOf('stepdown', 1);
    const prefix = backend.prefix(ts[0] as TargetRef);
    const a = replica('a', ts, false);
    await waitFor('a leads', () => a.elections[0]?.isLeader);
    const b = replica('b', ts, false);
    try {
      await waitFor('b campaigned', async () => (await backend.candidates(prefix)) === 2);
      a.elections[0]?.stepDown('stuck (test)');
      await waitFor('b leads', () => b.elections[0]?.isLeader);
      expect(a.events).toEqual(['elected', 'lost: stepped down: stuck (test)']);
      await waitFor('a campaigned again', async () => (await backend.candidates(prefix)) === 2);
      await b.elections[0]?.resign();
      await waitFor('a leads again', () => a.elections[0]?.isLeader);
      expect(a.events).toEqual(['elected', 'lost: stepped down: stuck (test)', 'elected']);
    } finally {
      for (const c of [a, b]) await c.g.close();
    }
  });

  it("the leader's entry deleted behind its back → fence() refuses, the term ends once, the next candidate leads", async () => {
    const ts = targetsOf('behind', 1);
    const t = ts[0] as TargetRef;
    const prefix = backend.prefix(t);
    const a = replica('ba', ts, false);
    await waitFor('ba leads', () => a.elections[0]?.isLeader);
    const b = replica('bb', ts, false);
    try {
      await waitFor('bb in line', async () => (await backend.candidates(prefix)) === 2);
      await backend.deleteLeader(prefix);
      // Concurrent fences: every one refused, the term lost once.
      const fences = await Promise.allSettled(
        Array.from({ length: 5 }, () => a.elections[0]?.fence(AbortSignal.timeout(2000))),
      );
      expect(fences.map((f) => f.status)).toEqual(fences.map(() => 'rejected'));
      await waitFor('bb leads', () => b.elections[0]?.isLeader);
      expect(
        a.events.filter((e) => e.startsWith('lost')),
        a.events.join('; '),
      ).toHaveLength(1);
      expect(a.events.filter((e) => e === 'elected')).toHaveLength(1);
      await b.elections[0]?.fence(new AbortController().signal);
    } finally {
      for (const c of [a, b]) await c.g.close();
    }
  });

  it('12 targets, 3 replicas: one session each, every target led once, none over ceil(12/3) = 4', async () => {
    const T = 12;
    const targets = targetsOf('bal', T);
    const rs = ['b1', 'b2', 'b3'].map((id) => replica(id, targets));
    try {
      await waitFor('balanced', () => Object.values(leading(rs)).every((n) => n === 4) && ledOnce(rs, T));
      await waitForSessions(3);
      for (const r of rs) expect(r.g.group.balance().members).toEqual(['b1', 'b2', 'b3']);
    } finally {
      for (const r of rs) await r.g.close();
    }
  });

  it('a replica added later reaches its share; the others hand over, never two leaders at once', async () => {
    const T = 12;
    const targets = targetsOf('added', T);
    const rs = [replica('a1', targets), replica('a2', targets)];
    const rounds = fenceRounds(() => rs, T);
    try {
      await waitFor(
        '2 replicas: 6 each',
        () => Object.values(leading(rs)).every((n) => n === 6) && ledOnce(rs, T),
      );
      const before = rounds.rounds;
      rs.push(replica('a3', targets));
      await waitFor(
        '3 replicas: 4 each',
        () => Object.values(leading(rs)).every((n) => n === 4) && ledOnce(rs, T),
      );
      await waitFor('a few more fence rounds', () => rounds.rounds > before + 5);
      await rounds.stop();
      expect(rounds.doubles).toEqual([]);
      const handedOver = rs
        .flatMap((r) => r.events)
        .filter((e) => e.startsWith('lost: stepped down: handing over to a3'));
      expect(handedOver).toHaveLength(4);
      expect(
        rs.flatMap((r) => r.events).filter((e) => e.startsWith('lost') && !e.includes('stepped down')),
      ).toEqual([]);
      await waitForSessions(3);
    } finally {
      await rounds.stop();
      for (const r of rs) await r.g.close();
    }
  });

  it('a replica that dies (SIGKILL: its session expires, nothing ended) → the survivors take its targets over', async () => {
    const T = 12;
    const targets = targetsOf('died', T);
    const victim = spawn(
      process.execPath,
      [
        fileURLToPath(new URL('../helpers/leadership-group-process.ts', import.meta.url)),
        backend.processTarget(),
        'd1',
        String(TEST_SESSION_SECONDS),
        ...targets.map((t) => t.namespace),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let victimLeads = 0;
    victim.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter(Boolean))
        victimLeads = (JSON.parse(line) as { leading: number }).leading;
    });
    const exited = new Promise<void>((resolve) => victim.on('exit', () => resolve()));
    const survivors = ['d2', 'd3'].map((id) => replica(id, targets));
    const rounds = fenceRounds(() => survivors, T);
    try {
      await waitFor(
        '4 each',
        () => victimLeads === 4 && Object.values(leading(survivors)).every((n) => n === 4),
      );
      await waitForSessions(3);
      victim.kill('SIGKILL');
      await exited;
      await waitFor('its session expired', async () => (await backend.sessions()) === 2, 10_000);
      await waitFor(
        'the survivors lead all, 6 each',
        () => Object.values(leading(survivors)).every((n) => n === 6) && ledOnce(survivors, T),
      );
      await rounds.stop();
      expect(rounds.doubles).toEqual([]);
      for (const r of survivors) expect(r.g.group.balance().members).toEqual(['d2', 'd3']);
    } finally {
      victim.kill('SIGKILL');
      await rounds.stop();
      for (const r of survivors) await r.g.close();
    }
  });
});
