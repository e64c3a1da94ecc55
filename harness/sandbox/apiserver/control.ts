/**
 * The HTTP control surface under `/_sandbox/`, so tests in other processes can drive a sandbox server
 * the way in-process tests use its handle. Not part of the Kubernetes API: no auth, not logged.
 *
 * - `GET /_sandbox/state` → `{ resourceVersion, compactedResourceVersion, pods, openWatches, nowMs }`
 * - `POST /_sandbox/faults` FaultSpec → 201 `{ id }`; `GET /_sandbox/faults`; `DELETE /_sandbox/faults[/<id>]`
 * - `GET /_sandbox/requests` → `{ countsByVerb, deletesByUid: {uid: codes[]}, deleteRequestTotal, recent }`;
 *   `DELETE /_sandbox/requests` resets the log
 * - `GET /_sandbox/clock` → `{ nowMs }`; `POST /_sandbox/clock/advance` `{ ms }` → `{ nowMs }`
 * - `POST /_sandbox/compact`, `POST /_sandbox/watches/drop` → 204
 * - `POST /_sandbox/namespaces` `{ name, labels? }` → 201 the Namespace; `PUT /_sandbox/namespaces/<name>/labels`
 *   `{ labels }` → 200 the Namespace; `DELETE /_sandbox/namespaces/<name>` → 200 (namespaces.ts)
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SandboxClock } from './clock.ts';
import type { FaultRegistry, FaultSpec } from './faults.ts';
import { FaultSpecError } from './faults.ts';
import { readBody, sendJson } from './http-io.ts';
import type { NamespaceStore } from './namespaces.ts';
import type { RequestLog } from './request-log.ts';
import { KubeStatusError } from './status.ts';
import type { PodStore } from './store.ts';
import type { WatchHub } from './watch.ts';

/** The reserved path prefix of the control surface. */
export const CONTROL_PREFIX = '/_sandbox/';

/** The parts of a server the control surface drives. */
export interface ControlTargets {
  store: PodStore;
  hub: WatchHub;
  faults: FaultRegistry;
  log: RequestLog;
  clock: SandboxClock;
  namespaces: NamespaceStore;
}

function controlError(res: ServerResponse, code: number, message: string): void {
  sendJson(res, code, JSON.stringify({ error: message }));
}

async function jsonBody(req: IncomingMessage): Promise<unknown> {
  const raw = await readBody(req);
  if (raw.trim() === '') return {};
  return JSON.parse(raw);
}

/** Serves one control request (path starts with {@link CONTROL_PREFIX}). Never throws. */
export async function handleControl(
  req: IncomingMessage,
  res: ServerResponse,
  pathname: string,
  t: ControlTargets,
): Promise<void> {
  const sub = pathname.slice(CONTROL_PREFIX.length);
  const method = req.method ?? 'GET';
  try {
    if (sub === 'state' && method === 'GET') {
      sendJson(
        res,
        200,
        JSON.stringify({
          resourceVersion: t.store.resourceVersion,
          compactedResourceVersion: t.store.compactedResourceVersion,
          pods: t.store.size,
          openWatches: t.hub.openCount,
          nowMs: t.clock.now(),
        }),
      );
    } else if (sub === 'faults' && method === 'POST') {
      const id = t.faults.inject((await jsonBody(req)) as FaultSpec);
      sendJson(res, 201, JSON.stringify({ id }));
    } else if (sub === 'faults' && method === 'GET') {
      sendJson(res, 200, JSON.stringify({ faults: t.faults.list() }));
    } else if ((sub === 'faults' || sub.startsWith('faults/')) && method === 'DELETE') {
      t.faults.clear(sub === 'faults' ? undefined : decodeURIComponent(sub.slice('faults/'.length)));
      res.writeHead(204).end();
    } else if (sub === 'requests' && method === 'GET') {
      sendJson(
        res,
        200,
        JSON.stringify({
          countsByVerb: t.log.countsByVerb(),
          deletesByUid: Object.fromEntries(t.log.deletesByUid()),
          deleteRequestTotal: t.log.deleteRequestTotal(),
          recent: t.log.recent(),
        }),
      );
    } else if (sub === 'requests' && method === 'DELETE') {
      t.log.reset();
      res.writeHead(204).end();
    } else if (sub === 'clock' && method === 'GET') {
      sendJson(res, 200, JSON.stringify({ nowMs: t.clock.now() }));
    } else if (sub === 'clock/advance' && method === 'POST') {
      const body = (await jsonBody(req)) as { ms?: unknown };
      if (typeof body.ms !== 'number') throw new FaultSpecError('clock/advance needs {"ms": number}');
      t.clock.advance(body.ms);
      sendJson(res, 200, JSON.stringify({ nowMs: t.clock.now() }));
    } else if (sub === 'compact' && method === 'POST') {
      t.store.compact();
      res.writeHead(204).end();
    } else if (sub === 'watches/drop' && method === 'POST') {
      t.hub.dropAll();
      t.namespaces.dropWatches();
      res.writeHead(204).end();
    } else if (sub === 'namespaces' && method === 'POST') {
      const body = (await jsonBody(req)) as { name?: unknown; labels?: unknown };
      if (typeof body.name !== 'string')
        throw new FaultSpecError('namespaces needs {"name": string, "labels"?: {}}');
      const ns = t.namespaces.create(body.name, (body.labels ?? {}) as Record<string, string>);
      sendJson(res, 201, JSON.stringify(ns));
    } else if (/^namespaces\/[^/]+\/labels$/.test(sub) && method === 'PUT') {
      const body = (await jsonBody(req)) as { labels?: unknown };
      const name = decodeURIComponent(sub.split('/')[1] as string);
      sendJson(
        res,
        200,
        JSON.stringify(t.namespaces.setLabels(name, (body.labels ?? {}) as Record<string, string>)),
      );
    } else if (/^namespaces\/[^/]+$/.test(sub) && method === 'DELETE') {
      sendJson(
        res,
        200,
        JSON.stringify(t.namespaces.delete(decodeURIComponent(sub.split('/')[1] as string))),
      );
    } else {
      controlError(res, 404, `no control endpoint ${method} ${pathname}`);
    }
  } catch (err) {
    if (err instanceof KubeStatusError) {
      sendJson(res, err.code, JSON.stringify(err.status));
      return;
    }
    const bad = err instanceof TypeError || err instanceof SyntaxError;
    controlError(res, bad ? 400 : 500, (err as Error).message);
  }
}
