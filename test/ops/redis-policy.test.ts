/**
 * Redis configured to evict keys (BullMQ requires `maxmemory-policy noeviction`): the replica says so in a
 * structured warning naming the policy.
 */
import { Redis } from 'ioredis';
import { expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { useOpsEnv } from './ops-env.ts';

const env = useOpsEnv(['alpha']);

it('maxmemory-policy allkeys-lru → a warning naming the policy and the fix', async () => {
  const admin = new Redis(env().redis.url);
  try {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const r = await env().startReplica('evict-1', { SDC_TARGETS: 'alpha:evict', SDC_QUEUE_PREFIX: 'evict' });
    const line = await waitFor('the warning', () =>
      r.logs.lines.find((l) => l.level === 'warn' && String(l.msg).startsWith('redis maxmemory-policy')),
    );
    expect(line).toMatchObject({ policy: 'allkeys-lru' });
    expect(String(line.msg)).toContain('set maxmemory-policy noeviction');
  } finally {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    admin.disconnect();
  }
});
