import { defineConfig } from 'vitest/config';

// Integration tests start real redis-server / etcd processes; two cores, so keep parallelism low.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
