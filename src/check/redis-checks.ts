/**
 * The checks of the queues' Redis, in its configured shape (one server, Sentinel, Cluster): it answers; on
 * every master, `maxmemory-policy noeviction` (BullMQ's requirement: an evicted job is a pod never cleaned),
 * persistence (AOF or RDB snapshots: a restart without it loses the pending jobs and tombstones), and memory
 * headroom below `maxmemory` (with noeviction, writes fail once it is reached); and that the configured user
 * may run every command the cleaner sends on the queue keys (src/check/redis-acl.ts).
 */
import { Cluster, Redis } from 'ioredis';
import { type CheckResult, firstLine, resultsOf } from '../check-result.ts';
import { describeRedis } from '../config/redact.ts';
import type { CleanerConfig } from '../config/schema.ts';
import { queueName, type TargetRef } from '../queue/job-identity.ts';
import { createRedisClient, type RedisClient } from '../queue/redis-client.ts';
import { withTimeout } from '../with-timeout.ts';
import { probeAcl } from './redis-acl.ts';

/** A refusal by the user's ACL (`NOPERM …`): Redis answered. */
const isNoPerm = (err: unknown) => /^NOPERM/.test((err as Error)?.message ?? '');

/** The fix of an ACL refusal: the commands BullMQ needs, on the queue keys. */
const aclFix = (prefix: string) =>
  `grant the user the commands BullMQ needs on its keys, e.g. ACL SETUSER <user> ~${prefix}:* +@all -@dangerous +info +client|setname +client|list +time`;

/** Used memory over `maxmemory` at which headroom is a warning, then a failure. */
export const MEMORY_WARN_RATIO = 0.75;
export const MEMORY_FAIL_RATIO = 0.9;

/** The `field:value` lines of an INFO answer. */
export function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return out;
}

/** Where Redis is, without the setting's name (`redis://:***@redis:6379`, `s1:26379,s2:26379, master m`). */
export function redisAddress(conn: CleanerConfig['redis']): string {
  return describeRedis(conn).replace(/^\w+ \([^)]*\) /, '');
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0)} MiB`;

/** Opens the client `check` uses: one reconnect, each command within `timeoutMs`. */
export function openCheckRedis(redis: CleanerConfig['redis'], timeoutMs: number): RedisClient {
  const client = createRedisClient(redis, {
    connectionName: 'sdc:check',
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => (times > 1 ? null : 200),
    connectTimeoutMs: timeoutMs,
    commandTimeoutMs: timeoutMs,
    disconnectTimeoutMs: 100,
  });
  client.on('error', () => undefined); // each command reports its own failure
  return client;
}

/** The Redis servers whose settings matter: the master (one server, Sentinel) or every Cluster master. */
function masters(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

const nodeName = (r: Redis) => `${r.options.host ?? '?'}:${r.options.port ?? '?'}`;

/**
 * Runs the Redis checks.
 * @param probeTarget the target whose queue hash tag the ACL probe key takes (undefined: a tag of its own)
 * @returns the results; never rejects.
 */
export async function checkRedis(
  config: Pick<CleanerConfig, 'redis' | 'queuePrefix'>,
  probeTarget: TargetRef | undefined,
  timeoutMs: number,
): Promise<{ results: CheckResult[]; answered: boolean }> {
  const r = resultsOf('redis');
  const where = describeRedis(config.redis);
  const out: CheckResult[] = [];
  const client = openCheckRedis(config.redis, timeoutMs);
  try {
    // Reachable, in its shape.
    const sentinel =
      config.redis.mode === 'sentinel' ? await sentinelsAnswering(config.redis, timeoutMs) : undefined;
    const started = performance.now();
    try {
      await withTimeout(client.ping(), timeoutMs * 2, 'PING');
    } catch (err) {
      if (isNoPerm(err)) {
        // It answered, and refused: an ACL user without PING cannot run BullMQ at all.
        out.push(
          r.fail('redis.acl', `ACL: the user may not run PING (${firstLine(err)})`, {
            fix: aclFix(config.queuePrefix),
          }),
        );
        return { results: out, answered: true };
      }
      out.push(
        r.unreachable('redis.reachable', `reachable: ${where} does not answer: ${firstLine(err)}`, {
          fix: 'check the address and password, that Redis runs, and that the NetworkPolicy lets the pods reach it (6379; Sentinels 26379)',
          ...(sentinel
            ? { details: { sentinelsAnswering: sentinel.answering, sentinels: sentinel.total } }
            : {}),
        }),
      );
      out.push(r.skip('redis.settings', 'settings, memory and ACL: skipped: Redis did not answer'));
      return { results: out, answered: false };
    }
    const elapsedMs = Math.round(performance.now() - started);
    // INFO refused is the ACL probe's to report (BullMQ needs it); meanwhile the version is unknown.
    const server = parseInfo(
      await client.info('server').catch((err: unknown) => (isNoPerm(err) ? '' : Promise.reject(err))),
    );
    const version = server.get('redis_version') ?? server.get('valkey_version') ?? 'unknown';
    out.push(
      r.pass(
        'redis.reachable',
        `reachable: ${redisAddress(config.redis)} (Redis ${version}) answered PING in ${elapsedMs} ms`,
        {
          details: { mode: config.redis.mode, version, elapsedMs },
        },
      ),
    );
    if (sentinel)
      out.push(
        sentinel.answering * 2 > sentinel.total
          ? r.pass(
              'redis.sentinel',
              `Sentinel: ${sentinel.answering} of ${sentinel.total} Sentinels name the master ${sentinel.master}`,
              {
                details: sentinel,
              },
            )
          : r.warn(
              'redis.sentinel',
              `Sentinel: only ${sentinel.answering} of ${sentinel.total} Sentinels answer: a failover needs a majority`,
              {
                fix: 'bring the Sentinels back, or fix redisSentinels (--redis-sentinels, SDC_REDIS_SENTINELS)',
                details: sentinel,
              },
            ),
      );
    if (config.redis.mode === 'cluster') {
      const info = parseInfo(String(await client.call('CLUSTER', 'INFO')));
      const state = info.get('cluster_state');
      out.push(
        state === 'ok'
          ? r.pass(
              'redis.cluster',
              `Cluster: state ok, ${info.get('cluster_slots_ok') ?? '?'} of 16384 slots served, ${masters(client).length} masters`,
            )
          : r.fail(
              'redis.cluster',
              `Cluster: state ${state ?? 'unknown'} (${info.get('cluster_slots_fail') ?? '?'} slots failing)`,
              {
                fix: 'every slot needs a master that answers: see CLUSTER NODES',
              },
            ),
      );
    }

    // Settings of every master.
    for (const node of masters(client)) {
      const label = config.redis.mode === 'cluster' ? ` (${nodeName(node)})` : '';
      out.push(...(await masterSettings(node, label, r)));
    }

    // The ACL user: every command on the queue keys.
    const tag = probeTarget ? queueName(probeTarget) : '{sdc-check}';
    const key = `${config.queuePrefix}:${tag}:check-probe`;
    const probe = await probeAcl(client, key);
    out.push(
      probe.refused.length === 0
        ? r.pass(
            'redis.acl',
            `ACL: the user may run the ${probe.tried} commands the cleaner sends on ${config.queuePrefix}:* keys`,
            {
              details: { tried: probe.tried, probeKey: key },
            },
          )
        : r.fail(
            'redis.acl',
            `ACL: the user may not run ${probe.refused.map((c) => c.command.toUpperCase()).join(', ')} (${probe.refused[0]?.error})`,
            {
              fix: aclFix(config.queuePrefix),
              details: { refused: probe.refused, probeKey: key },
            },
          ),
    );
    return { results: out, answered: true };
  } catch (err) {
    out.push(
      r.unreachable('redis.settings', `Redis stopped answering: ${firstLine(err)}`, {
        fix: 'check that Redis runs and answers, then run check again',
      }),
    );
    return { results: out, answered: false };
  } finally {
    client.disconnect();
  }
}

/** Eviction policy, persistence and memory headroom of one master. */
async function masterSettings(
  node: Redis,
  label: string,
  r: ReturnType<typeof resultsOf>,
): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  let memory: Map<string, string>;
  let persistence: Map<string, string>;
  try {
    memory = parseInfo(await node.info('memory'));
    persistence = parseInfo(await node.info('persistence'));
  } catch (err) {
    if (!isNoPerm(err)) throw err;
    return [
      r.warn(
        'redis.settings',
        `settings: INFO refused (${firstLine(err)})${label}: eviction policy, persistence and memory unknown`,
        {
          fix: 'BullMQ needs INFO: grant +info to the user (the ACL line below)',
        },
      ),
    ];
  }
  const policy = memory.get('maxmemory_policy') ?? 'unknown';
  out.push(
    policy === 'noeviction'
      ? r.pass('redis.eviction-policy', `maxmemory-policy: noeviction${label}`)
      : r.fail(
          'redis.eviction-policy',
          `maxmemory-policy: ${policy}${label}: Redis may evict pending cleanup jobs and tombstones`,
          {
            fix: 'CONFIG SET maxmemory-policy noeviction (and in redis.conf, or your managed Redis parameter group): BullMQ requires it',
            details: { policy },
          },
        ),
  );
  if (persistence.get('aof_enabled') === '1')
    out.push(r.pass('redis.persistence', `persistence: AOF on${label}`));
  else {
    let save: string | undefined;
    let refused: string | undefined;
    try {
      const reply = (await node.config('GET', 'save')) as string[];
      save = reply[1] ?? '';
    } catch (err) {
      refused = firstLine(err);
    }
    if (save)
      out.push(
        r.pass('redis.persistence', `persistence: RDB snapshots (save ${save})${label}`, {
          details: { save },
        }),
      );
    else if (refused !== undefined)
      out.push(
        r.warn(
          'redis.persistence',
          `persistence: AOF off, and RDB snapshots cannot be read (CONFIG GET refused: ${refused})${label}`,
          {
            fix: 'make sure the server persists (appendonly yes, or save), or grant +config|get to see it',
          },
        ),
      );
    else
      out.push(
        r.fail(
          'redis.persistence',
          `persistence: off (appendonly no, save "")${label}: a restart loses every pending cleanup and tombstone`,
          {
            fix: 'CONFIG SET appendonly yes (and in redis.conf), or configure RDB snapshots (save 60 1000)',
          },
        ),
      );
  }
  const used = Number(memory.get('used_memory') ?? Number.NaN);
  const max = Number(memory.get('maxmemory') ?? Number.NaN);
  if (!Number.isFinite(used) || !Number.isFinite(max))
    out.push(r.warn('redis.memory', `memory: INFO memory did not say how much is used${label}`));
  else if (max === 0)
    out.push(
      r.pass(
        'redis.memory',
        `memory: ${mib(used)} used, no maxmemory (the host's memory is the limit)${label}`,
        {
          details: { usedBytes: used, maxmemoryBytes: 0 },
        },
      ),
    );
  else {
    const ratio = used / max;
    const text = `memory: ${mib(used)} of ${mib(max)} maxmemory used (${Math.round(ratio * 100)} %)${label}`;
    const details = { usedBytes: used, maxmemoryBytes: max, ratio: Math.round(ratio * 1000) / 1000 };
    const fix =
      'raise maxmemory, or lower what is kept: tombstoneTtl (a tombstone and a finished job per cleaned pod, for that long); with noeviction Redis refuses writes once it is full, and no new cleanup is queued';
    out.push(
      ratio >= MEMORY_FAIL_RATIO
        ? r.fail('redis.memory', text, { fix, details })
        : ratio >= MEMORY_WARN_RATIO
          ? r.warn('redis.memory', text, { fix, details })
          : r.pass('redis.memory', text, { details }),
    );
  }
  return out;
}

/** Asks each Sentinel for the master's address: how many answer, and what they name. */
async function sentinelsAnswering(
  conn: Extract<CleanerConfig['redis'], { mode: 'sentinel' }>,
  timeoutMs: number,
): Promise<{ answering: number; total: number; master: string | undefined }> {
  const answers = await Promise.all(
    conn.sentinels.map(async ({ host, port }) => {
      const s = new Redis({
        host,
        port,
        ...(conn.sentinelPassword ? { password: conn.sentinelPassword } : {}),
        ...(conn.tls ? { tls: {} } : {}),
        connectTimeout: timeoutMs,
        commandTimeout: timeoutMs,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        lazyConnect: true,
      });
      s.on('error', () => undefined);
      try {
        await s.connect();
        const addr = (await s.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', conn.masterName)) as
          | string[]
          | null;
        return addr ? `${addr[0]}:${addr[1]}` : undefined;
      } catch {
        return undefined;
      } finally {
        s.disconnect();
      }
    }),
  );
  const named = answers.filter((a): a is string => a !== undefined);
  return { answering: named.length, total: conn.sentinels.length, master: named[0] };
}
