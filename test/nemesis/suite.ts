/**
 * The nemesis's test body (nemesis.test.ts declares it once per Redis mode, one after another): one seeded run of
 * faults against three replica processes, judged by invariants.ts; docs/failure-modes.md has the details.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { checkOverdueMetric } from '../helpers/invariants.ts';
import { OVERDUE_METRIC } from './overdue-sampler.ts';
import { seedFromEnv } from './prng.ts';
import { CI_DURATION_MS, failureMessage, replayCommand } from './report.ts';
import { type NemesisRun, nemesisConfig, planOf, runNemesis } from './run.ts';
import { formatSchedule, type Leadership, parseExclude, type RedisMode } from './schedule.ts';
import type { NemesisWorld } from './world.ts';

/** Overdue windows shorter than this are not judged; the gauge may lag the facts by the lag, ms. */
const OVERDUE_MIN_WINDOW_MS = 10_000;
const OVERDUE_LAG_MS = 15_000;

/**
 * True when no `SEED`, `NEMESIS_*` or `SOAK` setting asks for one particular run: the plain suite (and CI),
 * where one CI-size run per Redis mode runs. A replay or a soak is one run of nemesis.test.ts.
 */
export function plainSuite(env: NodeJS.ProcessEnv = process.env): boolean {
  return [
    'SEED',
    'NEMESIS_REDIS',
    'NEMESIS_LEADERSHIP',
    'NEMESIS_CLUSTERS',
    'NEMESIS_MINUTES',
    'NEMESIS_EXCLUDE',
    'SOAK',
  ].every((k) => !env[k]);
}

/**
 * Declares the nemesis run on `redisMode`'s Redis and the `leadership` backend, shaped by the environment (`SEED`, `NEMESIS_MINUTES`,
 * `SOAK`, `NEMESIS_EXCLUDE`): the run itself (every invariant but the overdue metric's), then the overdue
 * metric's judgement. @throws TypeError naming the variable when one of them is malformed.
 */
export function describeNemesis(
  redisMode: RedisMode,
  leadership: Leadership = 'etcd',
  clusters: 1 | 2 = 1,
): void {
  const SOAK = process.env.SOAK === '1';
  const MINUTES = Number(process.env.NEMESIS_MINUTES ?? (SOAK ? 30 : CI_DURATION_MS / 60_000));
  if (!(MINUTES > 0))
    throw new TypeError(
      `NEMESIS_MINUTES: "${process.env.NEMESIS_MINUTES}" is not a positive number of minutes`,
    );
  const CFG = nemesisConfig(
    seedFromEnv(),
    Math.round(MINUTES * 60_000),
    parseExclude(process.env.NEMESIS_EXCLUDE),
    redisMode,
    leadership,
    clusters,
  );
  const PLAN = planOf(CFG);
  const REPLAY = replayCommand(
    CFG.seed,
    CFG.durationMs,
    CFG.exclude,
    CFG.redisMode,
    CFG.leadership,
    CFG.clusters,
  );
  let world: NemesisWorld | undefined;
  let run: NemesisRun | undefined;

  const redis = CFG.redisMode === 'single' ? '' : `, Redis ${CFG.redisMode}`;
  const backend =
    CFG.leadership === 'etcd' ? '' : `, on ${CFG.leadership === 'zookeeper' ? 'ZooKeeper' : CFG.leadership}`;
  const two = CFG.clusters === 1 ? '' : `, ${CFG.clusters} clusters sharing them`;
  describe(`nemesis, seed ${CFG.seed}${redis}${backend}${two}`, () => {
    // Within the describe: a file that declares several runs stops each world before the next run starts.
    afterAll(async () => {
      await world?.stop();
    });

    it(
      `${MINUTES} fault-minute(s), ${CFG.replicas} replicas, ${CFG.namespaces.length} targets: every pod DELETEd at most once, never early, never a wrong pod; none leaked`,
      async () => {
        console.info(
          `[nemesis] ${formatSchedule(CFG.seed, PLAN.schedule, CFG.durationMs, CFG.exclude)}\n` +
            `[nemesis] r${PLAN.fakedReplica} runs under libfaketime; replay: ${REPLAY}`,
        );
        run = await runNemesis(CFG, (w) => {
          world = w;
        });
        console.info(`[nemesis] ${run.summary}`);
        if (run.violations.length > 0) expect.fail(failureMessage(run, CFG.artifactsDir));
      },
      // Settling, judging and the overdue gauge's return (≤ 60 s), plus a service that will not restart at the
      // very end (the finale's etcd: up to 10 restore attempts of ~21 s each, injectors.ts).
      CFG.durationMs + CFG.settleMs + 420_000,
    );

    it(`${OVERDUE_METRIC} is non-zero while pods are in fact overdue, and back to 0 after`, (ctx) => {
      const r = run;
      if (!r) return ctx.skip('the nemesis run did not complete (see the test above)');
      if (!r.metricSeen) {
        console.info(`[nemesis] ${OVERDUE_METRIC} is absent from every replica's /metrics: skipped`);
        return ctx.skip(
          `${OVERDUE_METRIC} is absent from the replicas' /metrics (no self-check in this build)`,
        );
      }
      const rel = (ms: number | undefined) => `+${(((ms ?? 0) - r.startedAtMs) / 1000).toFixed(1)} s`;
      const missed = checkOverdueMetric(r.samples, {
        minWindowMs: OVERDUE_MIN_WINDOW_MS,
        lagMs: OVERDUE_LAG_MS,
      });
      expect(
        missed.map((v) => `${v.pod} from ${rel(v.atMs)}: ${v.detail}`),
        `seed ${CFG.seed}; ${REPLAY}`,
      ).toEqual([]);
      if (!r.leaked) {
        // Every replica that answered reports 0 for every target once nothing is overdue.
        const nonZero = Object.entries(r.finalGauges).flatMap(([replica, byNs]) =>
          CFG.namespaces
            .filter((ns) => byNs[ns] !== 0)
            .map((ns) => `${replica} ${ns}: ${byNs[ns] ?? 'absent'}`),
        );
        expect(nonZero, `${OVERDUE_METRIC} after settling; seed ${CFG.seed}; ${REPLAY}`).toEqual([]);
      }
    });
  });
}
