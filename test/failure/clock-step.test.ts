/**
 * Failure mode: the leader's wall clock steps (NTP, an operator) by 10 minutes, back and forward.
 * Fencing, the watchdog and the API rate limiter measure intervals, so they must not care: no second
 * DELETE of any pod, no stalled API calls, at most one leadership change. Real replica processes whose
 * wall clock is stepped at run time by Debian's libfaketime (`faketime` package), one timestamp file per
 * replica; `DONT_FAKE_MONOTONIC=1` leaves the monotonic clock (performance.now) alone, as a real step does.
 */
import { globSync, renameSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { LogLine, ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { deletesPer, tempFile } from '../helpers/cluster.ts';
import {
  createDrivers,
  firstLeader,
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
});
