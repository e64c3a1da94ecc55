/**
 * The nemesis at CI size on a Sentinel setup (1 master, 2 replicas, 3 sentinels), its master SIGKILLed among the faults. It runs in the plain suite only: with `SEED`, `NEMESIS_REDIS`, … set,
 * nemesis.test.ts runs the one run asked for (`NEMESIS_REDIS=sentinel SEED=… npx vitest run test/nemesis`).
 */
import { describe, it } from 'vitest';
import { describeNemesis, plainSuite } from './suite.ts';

if (plainSuite()) describeNemesis('sentinel');
else
  describe('nemesis, Redis sentinel', () => {
    it.skip('runs in the plain suite only: a replay or a soak runs in nemesis.test.ts', () => {});
  });
