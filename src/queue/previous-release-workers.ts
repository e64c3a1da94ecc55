/**
 * Single-server mode during a rolling update from release 0.1.0: whether a 0.1.0 worker still consumes a
 * target's old queue (`{<context>.<namespace>}`, src/queue/job-identity.ts `previousReleaseQueueName`), so that
 * this version's replica waits for it instead of deleting the same pods from its own queue
 * (src/leadership/previous-release-gate.ts). BullMQ names each worker's Redis connection after its queue
 * (`<prefix>:<base64 of the queue name>`, then `:w:<worker name>`), so one CLIENT LIST answers for every target
 * of the replica: one call per {@link PREVIOUS_RELEASE_LOOK_MS}, on each master of a Redis Cluster, and one
 * before each DELETE (shared by the DELETEs of a burst: src/leadership/previous-release-gate.ts).
 */
import type { Logger } from '../log.ts';
import { sleep } from '../sleep.ts';
import type { RedisClient } from './redis-client.ts';

/** How often the connected workers are listed, ms. */
export const PREVIOUS_RELEASE_LOOK_MS = 10_000;

/** Options of {@link createPreviousReleaseWorkers}. */
export interface PreviousReleaseWorkersOptions {
  redis: RedisClient;
  /** `queuePrefix`. */
  prefix: string;
  log: Logger;
  /** Period of the look, ms (default {@link PREVIOUS_RELEASE_LOOK_MS}). */
  intervalMs?: number;
}

/** The connected workers of 0.1.0 queues, as last listed. */
export interface PreviousReleaseWorkers {
  /** True when a worker consumes `queue` (a 0.1.0 queue name), false when none, undefined before the first look. */
  consuming(queue: string): boolean | undefined;
  onChange(cb: () => void): void;
  /** Looks now (one CLIENT LIST); `consuming` answers from it. @throws the Redis error. */
  look(): Promise<void>;
  start(): void;
  stop(): void;
}

/** The BullMQ client name of a queue's workers (`<prefix>:<base64 name>`), as `Queue.getWorkers` matches it. */
export function workerClientName(prefix: string, queue: string): string {
  return `${prefix}:${Buffer.from(queue).toString('base64')}`;
}

/** The client names in a CLIENT LIST reply. */
function clientNames(list: string): string[] {
  const out: string[] = [];
  for (const line of list.split(/\r?\n/)) {
    const m = / name=(\S*)/.exec(` ${line}`);
    if (m?.[1]) out.push(m[1]);
  }
  return out;
}

/** Lists the workers every {@link PREVIOUS_RELEASE_LOOK_MS}; `start()` makes the first look at once. */
export function createPreviousReleaseWorkers(opts: PreviousReleaseWorkersOptions): PreviousReleaseWorkers {
  let names: Set<string> | undefined;
  const listeners: (() => void)[] = [];
  const stop = new AbortController();
  let running = false;

  async function list(): Promise<Set<string>> {
    const r = opts.redis;
    const replies: string[] =
      'nodes' in r && typeof r.nodes === 'function' && r.isCluster
        ? await Promise.all(r.nodes('master').map((n) => n.client('LIST') as Promise<string>))
        : [(await r.client('LIST')) as string];
    return new Set(replies.flatMap(clientNames));
  }

  async function look(): Promise<void> {
    names = await list();
    for (const cb of listeners) cb();
  }

  async function loop(): Promise<void> {
    let failing = false;
    while (running) {
      try {
        await look();
        failing = false;
      } catch (err) {
        if (!failing)
          opts.log.warn(
            { err: { message: (err as Error).message } },
            'cannot list the Redis clients to look for workers of release 0.1.0; retrying',
          );
        failing = true;
      }
      await sleep(names ? (opts.intervalMs ?? PREVIOUS_RELEASE_LOOK_MS) : 1000, stop.signal, { unref: true });
    }
  }

  return {
    consuming(queue) {
      if (!names) return undefined;
      const base = workerClientName(opts.prefix, queue);
      for (const n of names) if (n === base || n.startsWith(`${base}:w:`)) return true;
      return false;
    },
    onChange(cb) {
      listeners.push(cb);
    },
    look,
    start() {
      if (running || stop.signal.aborted) return;
      running = true;
      void loop();
    },
    stop() {
      running = false;
      stop.abort();
    },
  };
}
