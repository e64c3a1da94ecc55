/**
 * The nemesis at CI size on a Redis Cluster (3 masters with a replica each), the master of a queue’s slot SIGKILLed among the faults. It runs in the plain suite only: with `SEED`, `NEMESIS_REDIS`, … set,
 * nemesis.test.ts runs the one run asked for (`NEMESIS_REDIS=cluster SEED=… npx vitest run test/nemesis`).
 */
import { describe, it } from 'vitest';
import { describeNemesis, plainSuite } from './suite.ts';

if (plainSuite()) describeNemesis('cluster');
else
  describe('nemesis, Redis cluster', () => {
    it.skip('runs in the plain suite only: a replay or a soak runs in nemesis.test.ts', () => {});
  });
