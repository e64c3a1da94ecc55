/**
 * `sdc_queue_jobs`: read from Redis by the target's leader only, at most once per maximum age; followers and
 * past terms export nothing; a failed or slow read exports nothing (never a stale copy). The queue is a
 * counting stand-in for BullMQ's `getJobCounts` (test/ops/redis-fleet-cost.test.ts counts the real commands).
 */
import { describe, expect, it } from 'vitest';
import { createMetrics, type MetricsSource } from '../../src/telemetry/metrics.ts';

function source(namespace: string, leader: boolean) {
  const s = {
    isLeader: leader,
    ready: true,
    reads: 0,
    fail: false,
    hang: false,
    delayed: 3,
    target: { cluster: 'c1', context: 'c', namespace },
    informer: { restarts: 0, synced: true },
    leadership: { session: { backend: 'etcd' as const, keepaliveAgeMs: 0 } },
    queue: {
      bullQueue: {
        getJobCounts: async (...states: string[]): Promise<Record<string, number>> => {
          s.reads += 1;
          if (s.fail) throw new Error('redis says no');
          if (s.hang) return new Promise(() => undefined);
          return Object.fromEntries(states.map((st) => [st, st === 'delayed' ? s.delayed : 0]));
        },
      },
    },
    overdue: () => ({ count: 0, oldestAgeMs: 0 }),
  };
  return s satisfies MetricsSource;
}

function setup() {
  let nowMs = 0;
  const metrics = createMetrics({
    processMetrics: false,
    queueCountsMaxAgeMs: 30_000,
    queueCountTimeoutMs: 50,
    monotonicNow: () => nowMs,
  });
  const leader = source('led', true);
  const follower = source('followed', false);
  metrics.watch({ cleaners: [leader, follower], redis: { status: 'ready' } });
  const delayedOf = async (ns: string) => {
    const m = new RegExp(
      `^sdc_queue_jobs\\{cluster="c1",context="c",namespace="${ns}",state="delayed"\\} (\\d+)$`,
      'm',
    ).exec((await metrics.scrape()).text);
    return m ? Number(m[1]) : undefined;
  };
  return { leader, follower, delayedOf, advance: (ms: number) => (nowMs += ms) };
}

describe('sdc_queue_jobs', () => {
  it('the leader reads once per maximum age; the follower exports nothing and reads nothing', async () => {
    const { leader, follower, delayedOf, advance } = setup();
    expect(await delayedOf('led')).toBe(3);
    expect(await delayedOf('followed')).toBeUndefined();
    leader.delayed = 4;
    advance(29_999);
    expect(await delayedOf('led')).toBe(3); // served from the read above
    expect(leader.reads).toBe(1);
    advance(1);
    expect(await delayedOf('led')).toBe(4);
    expect(leader.reads).toBe(2);
    expect(follower.reads).toBe(0);
  });

  it('a term ends: nothing exported; the next term reads anew instead of serving the old counts', async () => {
    const { leader, delayedOf } = setup();
    expect(await delayedOf('led')).toBe(3);
    leader.isLeader = false;
    expect(await delayedOf('led')).toBeUndefined();
    leader.delayed = 7;
    leader.isLeader = true;
    expect(await delayedOf('led')).toBe(7);
    expect(leader.reads).toBe(2);
  });

  it('a failed or hung read exports nothing, and the next scrape tries again', async () => {
    const { leader, delayedOf, advance } = setup();
    expect(await delayedOf('led')).toBe(3);
    advance(30_000);
    leader.fail = true;
    expect(await delayedOf('led')).toBeUndefined();
    leader.fail = false;
    leader.hang = true;
    expect(await delayedOf('led')).toBeUndefined();
    leader.hang = false;
    expect(await delayedOf('led')).toBe(3);
    expect(leader.reads).toBe(4);
  });
});
