/**
 * Single-server mode (no etcd): each replica leads every target on its own, so two of them on one Redis
 * are uncoordinated. Each says so: one warning at start, and one naming the other workers on the queue.
 */
import { expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { useOpsEnv } from './ops-env.ts';

const env = useOpsEnv(['alpha']);

it('two replicas without etcd on one queue: the second warns that another worker consumes it', async () => {
  const settings = { SDC_TARGETS: 'alpha:single', SDC_QUEUE_PREFIX: 'single' };
  const first = await env().startReplica('solo-1', settings);
  const warned = (l: Record<string, unknown>) =>
    l.level === 'warn' && String(l.msg).startsWith('another worker consumes this queue');
  expect(
    first.logs.lines.some((l) => l.level === 'warn' && String(l.msg).includes('single-server mode')),
  ).toBe(true);
  const second = await env().startReplica('solo-2', settings);
  const line = await waitFor('the warning', () => second.logs.lines.find(warned), 15_000);
  expect([...(line.workers as string[])].sort()).toEqual(['solo-1', 'solo-2']);
});
