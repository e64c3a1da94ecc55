/**
 * The sandbox API server with `http2: true` (h2 offered by ALPN, as kube-apiserver): an h2 client gets h2 and
 * many watches on one TCP connection (`openConnections()` counts it once); a client that does not offer h2 is
 * served HTTP/1.1; a `reset` fault resets the one stream (the other watches of the connection live on), on a
 * watch and on a GET; and `http2` without `tls` is refused.
 */
import { type ClientHttp2Session, type ClientHttp2Stream, connect, constants } from 'node:http2';
import { request as httpsRequest } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';

let server: SandboxApiServer;
let session: ClientHttp2Session;

beforeAll(async () => {
  server = await startSandboxApiServer({ tls: true, http2: true, contextName: 'h2' });
  session = connect(server.url, { ca: server.caCertPem });
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
});

afterAll(async () => {
  session?.destroy();
  await server?.close();
});

/** An open h2 watch: the event types it received, and whether (and with which code) it ended. */
interface H2Watch {
  stream: ClientHttp2Stream;
  status: Promise<number>;
  types: string[];
  ended: { rstCode?: number; done: boolean };
}

function watch(namespace: string): H2Watch {
  const stream = session.request({ ':path': `/api/v1/namespaces/${namespace}/pods?watch=true` });
  const w: H2Watch = {
    stream,
    status: new Promise((resolve) => stream.once('response', (h) => resolve(Number(h[':status'])))),
    types: [],
    ended: { done: false },
  };
  let buf = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buf += chunk;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      w.types.push((JSON.parse(buf.slice(0, i)) as { type: string }).type);
      buf = buf.slice(i + 1);
    }
  });
  stream.on('error', () => undefined);
  stream.on('close', () => {
    w.ended.done = true;
    w.ended.rstCode = stream.rstCode;
  });
  return w;
}

describe('sandbox API server with http2', () => {
  it('negotiates h2 by ALPN; 20 watches share one TCP connection and all get their events', async () => {
    expect(session.alpnProtocol).toBe('h2');
    const watches = Array.from({ length: 20 }, (_, i) => watch(`h2-ns-${i}`));
    for (const w of watches) expect(await w.status).toBe(200);
    await waitFor(() => server.openWatches() === 20, '20 open watches');
    expect(server.openConnections()).toBe(1);
    for (let i = 0; i < 20; i++) server.pods.create(pod(`h2-ns-${i}`, 'p'));
    await waitFor(() => watches.every((w) => w.types.includes('ADDED')), 'every watch got its ADDED');
    for (const w of watches) w.stream.close(constants.NGHTTP2_CANCEL);
    await waitFor(() => server.openWatches() === 0, 'watches closed by the client');
  });

  it('a reset fault on a watch resets that stream only; the connection and the other watch live on', async () => {
    const other = watch('h2-other');
    expect(await other.status).toBe(200);
    server.faults.inject({ verb: 'watch', path: '/namespaces/h2-reset/', reset: true, count: 1 });
    const reset = watch('h2-reset');
    expect(await reset.status).toBe(200);
    await waitFor(() => reset.ended.done, 'the reset watch ended');
    expect(reset.ended.rstCode).toBe(constants.NGHTTP2_INTERNAL_ERROR);
    expect(session.destroyed).toBe(false);
    expect(other.ended.done).toBe(false);
    server.pods.create(pod('h2-other', 'after-reset'));
    await waitFor(() => other.types.includes('ADDED'), 'the other watch still gets events');
    expect(server.openConnections()).toBe(1);
    other.stream.close(constants.NGHTTP2_CANCEL);
  });

  it('a reset fault on a GET resets its stream without an answer', async () => {
    server.faults.inject({ verb: 'get', path: '/pods/p$', reset: true, count: 1 });
    const stream = session.request({ ':path': '/api/v1/namespaces/h2-ns-0/pods/p' });
    let answered = false;
    stream.once('response', () => {
      answered = true;
    });
    stream.on('error', () => undefined);
    stream.resume();
    await new Promise((resolve) => stream.once('close', resolve));
    expect(answered).toBe(false);
    expect(stream.rstCode).toBe(constants.NGHTTP2_INTERNAL_ERROR);
    // The next GET on the same connection is served.
    const again = session.request({ ':path': '/api/v1/namespaces/h2-ns-0/pods/p' });
    again.resume();
    const [status] = await Promise.all([
      new Promise((resolve) => again.once('response', (h) => resolve(h[':status']))),
      new Promise((resolve) => again.once('end', resolve)),
    ]);
    expect(status).toBe(200);
  });

  it('serves HTTP/1.1 to a client that does not offer h2, on a connection of its own', async () => {
    const { status, version } = await new Promise<{ status: number; version: string }>((resolve, reject) => {
      const req = httpsRequest(
        `${server.url}/api/v1/namespaces/h2-ns-1/pods`,
        { ca: server.caCertPem, agent: false },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, version: res.httpVersion }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(200);
    expect(version).toBe('1.1');
  });

  it('refuses http2 without tls', async () => {
    await expect(startSandboxApiServer({ http2: true })).rejects.toThrow(/http2 needs tls/);
  });
});
