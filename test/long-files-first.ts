/**
 * The order vitest starts the test files in: the long ones first, longest first, then the rest as vitest orders
 * them (by its cached durations, else by file size). With two workers, a long file started last runs alone at
 * the end while the other worker idles: started first, the short files fill in beside it. On a fresh clone
 * vitest has no cached durations, and the nemesis's file (short, all its work in test/nemesis/run.ts) was
 * started after 135 of 161 files, its last runs alone — minutes of one idle core per CI run.
 *
 * The list holds the files that take about a minute or more in CI on this machine (2 cores), with their
 * measured seconds; `test/unit/long-files-first.test.ts` checks that each still exists.
 */
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Test files that take about a minute or more in CI, longest first, with the seconds measured there. */
export const LONG_FILES: readonly (readonly [file: string, seconds: number])[] = [
  ['test/ops/redis-fleet-cost.test.ts', 215],
  ['test/nemesis/nemesis.test.ts', 210],
  ['test/bench/quick.test.ts', 145],
  ['test/upgrade/rolling-update.test.ts', 135],
  ['test/bench/scale.test.ts', 131],
  ['test/deploy/image.test.ts', 99],
  ['test/failure/bad-input.test.ts', 94],
  ['test/e2e/shared-stores.test.ts', 81],
  ['test/e2e/demo.test.ts', 68],
  ['test/failure/stuck-leader.test.ts', 62],
  ['test/failure/etcd-secured.test.ts', 58],
  ['test/failure/process-crashes.test.ts', 55],
];

/** Vitest's sequencer (`test.sequence.sequencer`): {@link LONG_FILES} first, in that order, then the rest. */
export default class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rest = await super.sort(files);
    const root = this.ctx.config.root;
    const rank = (f: TestSpecification) => {
      const i = LONG_FILES.findIndex(([file]) => file === relative(root, f.moduleId).replaceAll('\\', '/'));
      return i < 0 ? LONG_FILES.length : i;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order.
    return rest.sort((a, b) => rank(a) - rank(b));
  }
}
