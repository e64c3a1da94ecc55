/**
 * Benchmark: with the default API limit (20 QPS, burst 30 per context), a leader facing more due pods
 * than it may clean should send API requests (GET + DELETE) at that rate: target within 5 % of it.
 * The rate is measured at the API server over a window that starts after the burst allowance is spent.
 */
import {
  type BenchEnv,
  createDrivers,
  round,
  sampleSeries,
  spawnFleet,
  stopFleet,
  until,
} from './harness.ts';

/** Options of {@link benchApiRate}. */
export interface ApiRateOptions {
  /** SDC_API_QPS, requests/s. */
  qps: number;
  /** SDC_API_BURST. */
  burst: number;
  /** Measuring window, ms. */
  windowMs: number;
  /** Skipped after the first request (the burst allowance), ms. */
  warmupMs: number;
}

/** Result of {@link benchApiRate}. */
export interface ApiRateResult {
  config: ApiRateOptions & { recheck: 'live'; pods: number };
  /** GET + DELETE requests per second in the window. */
  achievedQps: number;
  /** DELETE requests per second in the window. */
  deletesPerSecond: number;
  /** |achieved − qps| / qps. */
  relativeError: number;
  /** `[ms since the pods were created, GET + DELETE requests so far]`, every 100 ms. */
  series: [number, number][];
}

/**
 * One leader, live re-check, default limits, more due pods than the window can clean.
 * @throws BenchTimeoutError when no request arrives within 60 s.
 */
export async function benchApiRate(
  env: BenchEnv,
  opts: ApiRateOptions,
  progress: (msg: string) => void,
): Promise<ApiRateResult> {
  const { server } = env;
  const namespace = 'api-rate';
  // Two requests per pod (GET + DELETE): enough pods to keep the limiter busy past the window.
  const pods = Math.ceil((((opts.windowMs + opts.warmupMs) / 1000) * opts.qps) / 2) + opts.burst + 50;
  progress(`api-rate: ${pods} due pods, one leader at ${opts.qps} QPS (burst ${opts.burst})`);
  const fleet = await spawnFleet(env, {
    mode: 'coordinated',
    count: 1,
    namespace,
    queuePrefix: namespace,
    idPrefix: namespace,
    env: { SDC_API_QPS: String(opts.qps), SDC_API_BURST: String(opts.burst), SDC_RECHECK: 'live' },
  });
  try {
    const before = server.requests.countsByVerb();
    const counted = (verb?: 'delete') => {
      const c = server.requests.countsByVerb();
      const d = (c.delete ?? 0) - (before.delete ?? 0);
      return verb ? d : d + (c.get ?? 0) - (before.get ?? 0);
    };
    const sampler = sampleSeries(() => counted(), env.now);
    const deletes = sampleSeries(() => counted('delete'), env.now);
    createDrivers(server, namespace, pods, () => env.now() - 10_000, 1000);
    await until('the first cleanup request', () => counted() > 0, 60_000, 10);
    const firstAt = env.now() - sampler.startMs;
    await until(
      'the end of the window',
      () => env.now() - sampler.startMs >= firstAt + opts.warmupMs + opts.windowMs,
      opts.warmupMs + opts.windowMs + 10_000,
      50,
    );
    const series = sampler.stop();
    const deleteSeries = deletes.stop();
    const at = (s: [number, number][], t: number) => {
      // Linear interpolation between the samples around t.
      const i = s.findIndex(([x]) => x >= t);
      if (i <= 0) return (s[Math.max(0, i)] as [number, number])[1];
      const [x0, y0] = s[i - 1] as [number, number];
      const [x1, y1] = s[i] as [number, number];
      return y0 + ((y1 - y0) * (t - x0)) / Math.max(1, x1 - x0);
    };
    const from = firstAt + opts.warmupMs;
    const to = from + opts.windowMs;
    const achievedQps = round(((at(series, to) - at(series, from)) / opts.windowMs) * 1000, 2);
    const deletesPerSecond = round(
      ((at(deleteSeries, to) - at(deleteSeries, from)) / opts.windowMs) * 1000,
      2,
    );
    const result: ApiRateResult = {
      config: { ...opts, recheck: 'live', pods },
      achievedQps,
      deletesPerSecond,
      relativeError: round(Math.abs(achievedQps - opts.qps) / opts.qps, 4),
      series,
    };
    progress(`  → ${achievedQps} requests/s (${deletesPerSecond} DELETE/s)`);
    return result;
  } finally {
    await stopFleet(fleet);
  }
}
