import { defineConfig } from 'vitest/config';
import LongFilesFirst from './test/long-files-first.ts';

// Integration tests start real redis-server / etcd processes; two cores, so keep parallelism low.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', './test/summary-reporter.ts'],
    // The long files first, so that none runs alone at the end (test/long-files-first.ts).
    sequence: { sequencer: LongFilesFirst },
  },
});
