/**
 * Whether the Redis user may run every command the cleaner sends, on the keys it uses — proven by running
 * them, harmlessly, on one probe key under the queue prefix: Redis checks a command and its keys against
 * the user's ACL before it runs it (a refusal is `NOPERM …`), and a script's `redis.pcall` is checked the same
 * way as a command sent alone. So one `EVAL` tries every command BullMQ's scripts call (a refusal inside it
 * comes back as an error value, not an abort) on a key of the queues' hash tag, and the commands that cannot
 * run inside a script (`EVAL`, `EVALSHA`, `CLIENT`, `MULTI`/`EXEC`) and those sent outside one are sent alone.
 * The probe key lives for the script only: it is created and deleted inside it (and given a 10 s TTL first,
 * should `DEL` be refused).
 *
 * The list: every `rcall` of BullMQ 6.7.0's Lua scripts (node_modules/bullmq/dist/esm/commands/*.lua;
 * test/unit/check-parts.test.ts fails when a new BullMQ calls one that is missing here), and what BullMQ and
 * the cleaner send themselves (INFO at connect, CLIENT SETNAME/LIST, BZPOPMIN, EVALSHA, the tombstones'
 * SET/GET/EXISTS/PTTL/DEL, MULTI/EXEC).
 */
import type { RedisClient } from '../queue/redis-client.ts';

/**
 * Each command of BullMQ's scripts with harmless arguments on the probe key `k` (valid arity, changing at most
 * the probe key): its name (upper case) → its arguments after the key.
 */
export const SCRIPT_COMMANDS: Readonly<Record<string, readonly (string | number)[]>> = {
  EXISTS: [],
  TYPE: [],
  PTTL: [],
  PEXPIRE: [10_000],
  PEXPIREAT: [4_102_444_800_000],
  GET: [],
  SET: ['v', 'XX'],
  INCR: [],
  INCRBY: [1],
  HSET: ['f', 'v'],
  HMSET: ['f', 'v'],
  HGET: ['f'],
  HMGET: ['f'],
  HGETALL: [],
  HDEL: ['f'],
  HEXISTS: ['f'],
  HINCRBY: ['f', 1],
  HLEN: [],
  LLEN: [],
  LRANGE: [0, 0],
  LINDEX: [0],
  LPOS: ['v'],
  LREM: [0, 'v'],
  LTRIM: [0, -1],
  LPUSH: ['v'],
  RPUSH: ['v'],
  LPOP: [],
  RPOP: [],
  RPOPLPUSH: ['@k'],
  SADD: ['m'],
  SREM: ['m'],
  SCARD: [],
  SISMEMBER: ['m'],
  SMEMBERS: [],
  ZADD: ['XX', 0, 'm'],
  ZREM: ['m'],
  ZSCORE: ['m'],
  ZCARD: [],
  ZCOUNT: [0, 1],
  ZRANGE: [0, 0],
  ZREVRANGE: [0, 0],
  ZRANGEBYSCORE: [0, 1],
  ZRANGEBYLEX: ['-', '+'],
  ZLEXCOUNT: ['-', '+'],
  ZREMRANGEBYSCORE: [2, 1],
  XADD: ['NOMKSTREAM', 'MAXLEN', 0, '*', 'f', 'v'],
  XLEN: [],
  XRANGE: ['-', '+', 'COUNT', 1],
  XTRIM: ['MAXLEN', 1000],
  XDEL: ['0-1'],
  RENAME: ['@k'],
  DEL: [],
};

/** Script commands whose key is not the first argument: `XREAD COUNT 1 STREAMS k 0`, and `TIME` (no key). */
const SPECIAL = `try({'XREAD', 'COUNT', 1, 'STREAMS', k, '0'})
try({'TIME'})`;

/** The probe script: returns `{command, error}` pairs of every refused command. */
const PROBE_SCRIPT = `local k = KEYS[1]
local refused = {}
local function try(args)
  local r = redis.pcall(unpack(args))
  if type(r) == 'table' and r.err and string.find(r.err, 'NOPERM', 1, true) then
    refused[#refused + 1] = string.lower(args[1])
    refused[#refused + 1] = r.err
  end
end
redis.pcall('PEXPIRE', k, 10000)
${Object.entries(SCRIPT_COMMANDS)
  .filter(([c]) => c !== 'DEL')
  .map(
    ([c, args]) =>
      `try({'${c}', k${args.map((a) => `, ${a === '@k' ? 'k' : typeof a === 'number' ? a : `'${a}'`}`).join('')}})`,
  )
  .join('\n')}
${SPECIAL}
try({'DEL', k})
return refused`;

/** One command the user may not run, with Redis's own refusal (`NOPERM …`, naming the command or the key). */
export interface RefusedCommand {
  readonly command: string;
  readonly error: string;
}

/** What the probe found: the refused commands, empty when every one may run. */
export interface AclProbe {
  readonly refused: readonly RefusedCommand[];
  /** How many commands were tried. */
  readonly tried: number;
}

const isNoPerm = (err: unknown) => /^NOPERM/.test((err as Error)?.message ?? '');

/**
 * Runs the probe on `probeKey` (a key under the queue prefix, with a queue's hash tag).
 * @throws the client's error for anything but a refusal (the server stopped answering).
 */
export async function probeAcl(redis: RedisClient, probeKey: string): Promise<AclProbe> {
  const refused: RefusedCommand[] = [];
  const alone = async (command: string, send: () => Promise<unknown>) => {
    try {
      await send();
    } catch (err) {
      if (isNoPerm(err)) refused.push({ command, error: (err as Error).message });
      else if (!/NOSCRIPT|WRONGTYPE|no such key/i.test((err as Error).message)) throw err;
    }
  };
  await alone('ping', () => redis.ping());
  await alone('info', () => redis.info('server'));
  await alone('client|setname', () => redis.call('CLIENT', 'SETNAME', 'sdc:check'));
  await alone('client|list', () => redis.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
  // The cluster-name claims' script stamps them with Redis's clock (src/cleaner/cluster-claims.ts).
  await alone('time', () => redis.call('TIME'));
  await alone('evalsha', () => redis.evalsha('0000000000000000000000000000000000000000', 1, probeKey));
  await alone('multi', async () => {
    const results = await redis.multi().ping().exec();
    const err = results?.find(([e]) => e)?.[0];
    if (err) throw err;
  });
  await alone('bzpopmin', () => redis.call('BZPOPMIN', probeKey, '0.01'));
  let scriptRan = true;
  let inScript: unknown[] = [];
  try {
    inScript = (await redis.eval(PROBE_SCRIPT, 1, probeKey)) as unknown[];
  } catch (err) {
    if (!isNoPerm(err)) throw err;
    refused.push({ command: 'eval', error: (err as Error).message });
    scriptRan = false;
  }
  for (let i = 0; i + 1 < inScript.length; i += 2)
    refused.push({ command: String(inScript[i]), error: String(inScript[i + 1]) });
  const scriptCommands = Object.keys(SCRIPT_COMMANDS).length + 2;
  return { refused, tried: 8 + (scriptRan ? scriptCommands : 0) };
}
