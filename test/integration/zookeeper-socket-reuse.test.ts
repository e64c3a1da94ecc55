/**
 * The ZooKeeper client's socket and the process's other sockets. The reference C client closes its socket
 * inside a request whose send fails (the server died and the event loop has not seen it yet). The binding
 * as published keeps polling that descriptor number: the next socket the process opens gets the number,
 * its events go to ZooKeeper's poll handle, and it is then removed from epoll. It never hears back (or
 * libuv aborts the process: yfinkelstein/node-zookeeper#262). Our patch (patches/zookeeper+*.patch) drops
 * the poll handle in the same call. Here: a server killed, requests sent before the loop notices, then a
 * new socket must still get its echo, and the same handle must reconnect once the server is back.
 */
import { createServer, type Server, Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createZkHandle, type ZkHandle } from '../../src/leadership/zookeeper/client.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';

/** The C client's ZOO_NOTCONNECTED_STATE: it holds no socket. */
const NOT_CONNECTED = 999;

const zk = useZooKeeper();
let echo: Server;
let echoPort = 0;
beforeAll(async () => {
  echo = createServer((s) => {
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  echoPort = (echo.address() as { port: number }).port;
}, 60_000);
afterAll(() => {
  echo?.close();
});

/** Blocks the thread (not the process's other threads) for `ms`: the event loop sees nothing meanwhile. */
function blockFor(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

it('requests that find the connection broken leave the next socket the process opens working, and the session reconnects', async () => {
  const h: ZkHandle & { readonly state?: number } = createZkHandle(zk().connect, 4000);
  try {
    await new Promise<void>((resolve) => {
      h.on('connect', () => resolve());
      h.init({});
    });
    const server = zk().members[0];
    const pid = server?.pid;
    if (!server || !pid) throw new Error('no ZooKeeper process');

    // The server dies; until this turn of the loop ends, the client does not know.
    process.kill(pid, 'SIGKILL');
    blockFor(1500);
    const answers = [1, 2, 3].map(() =>
      h.exists('/', false).then(
        () => 'answered',
        (err: Error) => err.message,
      ),
    );
    // The precondition: a send failed and the C client closed its socket inside the call.
    expect(h.state).toBe(NOT_CONNECTED);

    // The lowest free descriptor number is the one the C client just closed.
    const sock = new Socket();
    let heard = false;
    sock.on('error', () => undefined);
    sock.on('data', () => {
      heard = true;
    });
    sock.connect(echoPort, '127.0.0.1', () => sock.write('ping'));
    try {
      await waitFor('the new socket hears its echo', () => heard, 5000);
    } finally {
      sock.destroy();
    }
    expect((await Promise.all(answers)).every((a) => a !== 'answered')).toBe(true);

    // The same handle reconnects (its session is still valid) once the server is back.
    await server.kill();
    await server.restart();
    await waitFor(
      'the handle answers again',
      async () =>
        (await h.exists('/', false).then(
          () => true,
          () => false,
        )) === true,
      30_000,
    );
  } finally {
    h.close();
  }
}, 90_000);
