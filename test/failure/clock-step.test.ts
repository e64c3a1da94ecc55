/**
 * Failure mode: the leader's wall clock steps (NTP, an operator) by 10 minutes, back and forward.
 * Fencing, the watchdog and the API rate limiter measure intervals, so they must not care: no second
 * DELETE of any pod, no stalled API calls, at most one leadership change. And a leader whose clock is
 * ahead must not delete before the deadline as the API server's clock has it (src/kube/server-clock.ts). Real replica processes whose
 * wall clock is stepped at run time by Debian's libfaketime (`faketime` package), one timestamp file per
 * replica; `DONT_FAKE_MONOTONIC=1` leaves the monotonic clock (performance.now) alone, as a real step does.
 */
import { globSync, renameSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { LogLine, ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { deletesPer, tempFile } from '../helpers/cluster.ts';
import { judgePod } from '../helpers/invariants.ts';
import {
  createDrivers,
  firstLeader,
  httpUrl,
  replicaEnv,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();

/** libfaketime's preload library (Debian installs it under the multiarch directory). */
const LIBFAKETIME = globSync('/usr/lib/*/faketime/libfaketime.so.1')[0];

/** A replica process whose wall clock the test steps. */
interface SteppedReplica {
  readonly r: ReplicaProcess;
  /** Current offset of its wall clock from the real one, seconds. */
  readonly offsetS: number;
  /** Steps its wall clock by `byS` seconds, at once (the file is re-read on every clock read). */
  step(byS: number): void;
}

function startSteppable(id: string, env: Record<string, string>): SteppedReplica {
  if (!LIBFAKETIME)
    throw new Error('libfaketime not found (/usr/lib/*/faketime/libfaketime.so.1): run scripts/setup.sh');
  const file = tempFile(`faketime-${id}`, '+0\n');
  let offsetS = 0;
  const r = cluster().startReplica(id, {
    ...env,
    LD_PRELOAD: LIBFAKETIME,
    FAKETIME_TIMESTAMP_FILE: file,
    FAKETIME_NO_CACHE: '1',
    DONT_FAKE_MONOTONIC: '1',
  });
  return {
    r,
    get offsetS() {
      return offsetS;
    },
    step(byS) {
      offsetS += byS;
      // Renamed into place: libfaketime never reads a half-written file.
      writeFileSync(`${file}.next`, `${offsetS >= 0 ? '+' : ''}${offsetS}\n`);
      renameSync(`${file}.next`, file);
    },
  };
}

/** Which replica leads `ns` according to their logs (the last election, unless lost or ended since). */
function leaderOf(replicas: SteppedReplica[], ns: string): SteppedReplica | undefined {
  const isLeadership = (l: LogLine) =>
    l.namespace === ns &&
    (l.msg === 'elected leader' || l.msg === 'leadership lost' || l.msg === 'leadership ended');
  return replicas.find((s) => s.r.lines.findLast(isLeadership)?.msg === 'elected leader');
}

const elections = (replicas: SteppedReplica[], ns: string) =>
  replicas.flatMap((s) => s.r.lines.filter((l) => l.msg === 'elected leader' && l.namespace === ns)).length;

describe('wall clock steps', () => {
  it("the leader's clock stepped back 10 min, then forward twice: pods keep being deleted once, at most one leadership change", async () => {
    const ns = 'clock-step';
    const env = replicaEnv(cluster(), ns, 'cs1');
    const replicas = [startSteppable('c1', env), startSteppable('c2', env)];
    const uids: string[] = [];
    try {
      await firstLeader(
        replicas.map((s) => s.r),
        ns,
      );
      // Finished 30 min ago (retention 1 s): due by every clock of the test, stepped or not.
      const tookMs: number[] = [];
      const batch = async (name: string) => {
        const t0 = performance.now();
        const pods = createDrivers(cluster().server, ns, 10, name, 30 * 60_000);
        uids.push(...pods.map(uidOf));
        await waitGone(cluster().server, pods, `${name}: pods deleted after the step`, 30_000);
        tookMs.push(Math.round(performance.now() - t0));
      };
      const stepLeader = (byS: number) => {
        const leader = leaderOf(replicas, ns);
        if (!leader) throw new Error(`no leader of ${ns}`);
        const from = leader.r.lines.length;
        leader.step(byS);
        return { leader, from };
      };

      const back = stepLeader(-600);
      await batch('back');
      // The step did happen: the stepped replica's log lines (pino reads the wall clock) are 10 min behind.
      const line = back.leader.r.lines.slice(back.from).find((l) => l.msg === 'enqueue');
      expect(line, 'an enqueue line of the stepped leader').toBeDefined();
      expect((timeOf(line) - Date.now()) / 1000).toBeLessThan(-500);
      expect(elections(replicas, ns) - 1).toBeLessThanOrEqual(1);

      stepLeader(+600); // forward, back to the real time
      await batch('forward');
      expect(elections(replicas, ns) - 1).toBeLessThanOrEqual(1);

      stepLeader(+600); // forward again, 10 min ahead
      await batch('ahead');
      expect(elections(replicas, ns) - 1).toBeLessThanOrEqual(1);

      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      console.info(
        `[failure] clock steps −10/+10/+10 min on the leader: ${elections(replicas, ns) - 1} leadership ` +
          `change(s); each batch of 10 due pods deleted in ${tookMs.join(', ')} ms`,
      );
    } finally {
      await stopAll(replicas.map((s) => s.r));
    }
  }, 120_000);

  it("the leader's clock 20 s ahead: no DELETE arrives before its pod's deadline by the API server's clock", async () => {
    const ns = 'clock-ahead';
    const retentionMs = 6_000;
    const env = replicaEnv(cluster(), ns, 'ca1', { SDC_RETENTION: `${retentionMs / 1000}s` });
    const leader = startSteppable('a1', env);
    try {
      await firstLeader([leader.r], ns);
      leader.step(+20);
      // The step did happen before any pod exists: a log line written after it is ~20 s ahead.
      const probe = createDrivers(cluster().server, ns, 1, 'probe', 30 * 60_000);
      await waitGone(cluster().server, probe, 'probe pod deleted', 30_000);
      // Its line is read from the replica's stdout after the DELETE's answer made the pod gone.
      const probeUid = probe.map(uidOf)[0];
      const line = await leader.r.waitForLine((l) => l.msg === 'driver pod deleted' && l.uid === probeUid);
      expect((timeOf(line) - Date.now()) / 1000).toBeGreaterThan(15);

      // Finished just now: due in 6 s by the server's clock, already 14 s overdue by the leader's.
      const pods = createDrivers(cluster().server, ns, 10, 'ahead', 0);
      const uids = new Set(pods.map(uidOf));
      await waitGone(cluster().server, pods, 'pods deleted at their deadline', 30_000);
      const deletes = cluster()
        .server.requests.deletes()
        .filter((d) => d.preconditionUid !== undefined && uids.has(d.preconditionUid));
      expect(deletes).toHaveLength(pods.length);
      const earlyMs = deletes.map((d) => {
        const deadline = d.found ? judgePod(d.found, retentionMs).deadlineMs : undefined;
        return deadline === undefined ? Number.NaN : deadline - d.atMs;
      });
      expect(earlyMs.every((ms) => Number.isFinite(ms))).toBe(true);
      // ms before the deadline each DELETE arrived (≤ 0: on time).
      expect(earlyMs.filter((ms) => ms > 0)).toEqual([]);
      // Not due by the server's clock, each job goes back to delayed for the time it still has to wait, on the
      // leader's own clock (which BullMQ promotes by): a few put-backs per pod, not a spin until the deadline.
      const metrics = await (await fetch(`${await httpUrl(leader.r)}/metrics`)).text();
      const notYet = metrics
        .split('\n')
        .find(
          (l) =>
            l.startsWith('sdc_cleanup_outcomes_total{') &&
            l.includes(`namespace="${ns}"`) &&
            l.includes('outcome="not-yet"'),
        );
      const putBacks = notYet === undefined ? 0 : Number(notYet.slice(notYet.lastIndexOf(' ') + 1));
      expect(putBacks).toBeLessThanOrEqual(3 * pods.length);
      console.info(
        `[failure] leader clock +20 s: ${deletes.length} DELETEs, ${Math.round(-Math.max(...earlyMs))}–` +
          `${Math.round(-Math.min(...earlyMs))} ms after their deadline by the server's clock; ${putBacks} not-yet put-backs`,
      );
    } finally {
      await stopAll([leader.r]);
    }
  }, 90_000);
});
