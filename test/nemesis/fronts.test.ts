/**
 * The nemesis's restarts survive a taken port: while Redis or etcd is down, another process listens on the
 * port it had; the restart starts it on a fresh port, repoints the front proxy, and a client that only
 * knows the proxy's address works again (Redis empty, etcd with its data). Before, the restart reused the
 * old port and failed ("address already in use"), and a 30-minute soak ended with no verdict.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { type FrontedEtcd, type FrontedRedis, startFrontedEtcd, startFrontedRedis } from './fronts.ts';

/** Another process's listener on `port`, counting the connections it gets. */
async function squat(port: number): Promise<{ server: Server; accepted: () => number }> {
  let accepted = 0;
  const server = createServer((s) => {
    accepted++;
    s.destroy();
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return { server, accepted: () => accepted };
}

const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('nemesis fronts: a restart while another process holds the old port', () => {
  it('Redis restarted empty on a fresh port; the client reconnects through the proxy', async () => {
    const front: FrontedRedis = await startFrontedRedis();
    cleanup.push(() => front.stop());
    const client = new Redis(front.url, { lazyConnect: true, commandTimeout: 1000 });
    cleanup.push(() => client.disconnect());
    await client.connect();
    await client.set('before', '1');
    const oldPort = front.service.port;

    await front.service.kill();
    const squatter = await squat(oldPort);
    cleanup.push(() => new Promise((r) => squatter.server.close(r)));
    await front.restartEmpty();

    // Empty (a new process), and working through the same front address; the squatter saw nothing.
    expect(await waitFor('redis answers through the proxy', () => client.ping(), 5000)).toBe('PONG');
    expect(await client.get('before')).toBeNull();
    await client.set('after', '2');
    expect(await client.get('after')).toBe('2');
    expect(squatter.accepted()).toBe(0);
    expect(front.service.port).not.toBe(oldPort);
    expect(front.proxy.upstreamPort).toBe(front.service.port);
  });

  it('etcd restarted on its data dir on fresh ports; the client reconnects through the proxy', async () => {
    const front: FrontedEtcd = await startFrontedEtcd();
    cleanup.push(() => front.stop());
    const client = new Etcd3({ hosts: [front.proxy.url], dialTimeout: 1000 });
    cleanup.push(() => client.close());
    await client.put('before').value('1');
    const member = front.etcd.members[0];
    const oldPort = member?.port ?? 0;

    await front.kill();
    const squatter = await squat(oldPort);
    cleanup.push(() => new Promise((r) => squatter.server.close(r)));
    await front.restart();

    // Same data (same data dir), reached through the same front address; writes are accepted.
    expect(await waitFor('etcd answers through the proxy', () => client.get('before').string(), 5000)).toBe(
      '1',
    );
    await client.put('after').value('2');
    expect(await client.get('after').string()).toBe('2');
    expect(squatter.accepted()).toBe(0);
    expect(member?.port).not.toBe(oldPort);
  });
});
