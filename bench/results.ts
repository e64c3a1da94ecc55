/**
 * The shape of `bench/results/<name>.json`: the machine's facts and every raw figure of each benchmark,
 * so a later run can be compared with an earlier one. `schema` changes when a field changes meaning.
 */

import type { ApiRateResult } from './api-rate.ts';
import type { BurstResult } from './burst.ts';
import type { CostResult } from './cost.ts';
import type { DeletesPerPodResult } from './deletes-per-pod.ts';
import type { FailoverResult } from './failover.ts';
import type { BenchLeadership } from './harness.ts';
import type { LatenessResult } from './lateness.ts';
import type { RedisFailoverResult } from './redis-failover.ts';
import type { ScaleResult } from './scale.ts';

/** Where the figures came from. */
export interface MachineFacts {
  /** ISO 8601 start of the run. */
  date: string;
  cores: number;
  cpuModel: string;
  memoryMiB: number;
  freeMemoryMiB: number;
  /** Node version running the bench and the replicas (`process.version`). */
  node: string;
  platform: string;
  redis: string;
  etcd: string;
  /** ZooKeeper's version, when the run measured on it. */
  zookeeper?: string;
  /** 1, 5 and 15-minute load averages when the run started and ended (other work on the machine). */
  loadAverageAtStart: number[];
  loadAverageAtEnd: number[];
}

/** Everything one run measured; a benchmark not selected is absent. */
export interface BenchResults {
  schema: 1;
  name: string;
  quick: boolean;
  machine: MachineFacts;
  benchmarks: {
    deletesPerPod?: DeletesPerPodResult;
    failover?: FailoverResult;
    lateness?: LatenessResult;
    burst?: BurstResult;
    apiRate?: ApiRateResult;
    cost?: CostResult;
    scale?: ScaleResult;
    redisFailover?: RedisFailoverResult;
    /**
     * With more than one leadership backend (`--leadership etcd,zookeeper`): `deletes` and `failover` on
     * each, side by side (the first backend's are also `deletesPerPod` and `failover`).
     */
    byLeadership?: Partial<
      Record<BenchLeadership, { deletesPerPod?: DeletesPerPodResult; failover?: FailoverResult }>
    >;
  };
  /** Wall time of the whole run, ms. */
  durationMs: number;
  /**
   * Benchmarks measured again in a later run and merged in (their figures replace the first run's),
   * with that run's machine facts and why.
   */
  reruns?: { benchmarks: string[]; reason: string; machine: MachineFacts; durationMs: number }[];
}
