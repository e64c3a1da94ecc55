/**
 * Query parameters as kube-apiserver reads them (harness/sandbox/apiserver/query-params.ts): apimachinery's
 * booleans and int64s, the 400 and 422 answers for malformed values and forbidden combinations, list
 * resourceVersion / resourceVersionMatch / limit semantics, the watch-list (initial events and their end
 * bookmark), DELETE options from the query or the body, `pretty`, and unknown parameters ignored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxApiServer, startSandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import { pod, waitFor } from './helpers.ts';
import { openRawWatch, type RawEvent } from './raw-watch.ts';

let server: SandboxApiServer;
beforeAll(async () => {
  server = await startSandboxApiServer({ bookmarkIntervalMs: 50, compactionIntervalMs: 0 });
  for (const name of ['a', 'b', 'c', 'd']) server.pods.create(pod('qp', name));
});
afterAll(async () => {
  await server.close();
});

interface Answer {
  status: number;
  text: string;
  body: {
    kind?: string;
    message?: string;
    reason?: string;
    code?: number;
    metadata?: { resourceVersion?: string; continue?: string };
    items?: { metadata: { name: string } }[];
    details?: Record<string, unknown>;
  };
}

async function call(path: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, init);
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as Answer['body'] };
}

const names = (a: Answer) => a.body.items?.map((p) => p.metadata.name);

/** Opens a watch and waits for its first event (or its end: a plain list answer has no newline-ended line). */
async function firstEvent(query: string, ns = 'qp'): Promise<RawEvent | undefined> {
  const w = await openRawWatch(`${server.url}/api/v1/namespaces/${ns}/pods?${query}`);
  try {
    await waitFor(() => w.events.length > 0 || w.ended, 'a first event or the end');
    return w.events[0];
  } finally {
    await w.close();
  }
}

describe('booleans: apimachinery reads 0 and any case of false as false, anything else as true', () => {
  for (const spelling of ['True', 'TRUE', 't', 'T', 'yes', '']) {
    it(`watch=${spelling} is a watch`, async () => {
      expect((await firstEvent(`watch=${spelling}`))?.type).toBe('ADDED');
    });
  }
  for (const spelling of ['0', 'false', 'FALSE', 'False', 'fAlSe']) {
    it(`watch=${spelling} is a list`, async () => {
      const a = await call(`/api/v1/namespaces/qp/pods?watch=${spelling}`);
      expect(a.body.kind).toBe('PodList');
    });
  }

  it('allowWatchBookmarks=True asks for bookmarks', async () => {
    const rv = server.resourceVersion();
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/qp/pods?watch=1&resourceVersion=${rv}&allowWatchBookmarks=True`,
    );
    try {
      await waitFor(() => w.events.some((e) => e.type === 'BOOKMARK') || w.ended, 'a bookmark');
      expect(w.events.find((e) => e.type === 'BOOKMARK')?.object).toEqual({
        kind: 'Pod',
        apiVersion: 'v1',
        metadata: { resourceVersion: String(server.resourceVersion()), creationTimestamp: null },
        spec: { containers: null },
        status: {},
      });
    } finally {
      await w.close();
    }
  });
});

describe('integers: Go strconv.ParseInt(s, 10, 64), a 400 with its error text otherwise', () => {
  const malformed: [string, string, string][] = [
    ['timeoutSeconds', '1.0', 'invalid syntax'],
    ['timeoutSeconds', 'abc', 'invalid syntax'],
    ['timeoutSeconds', '', 'invalid syntax'],
    ['timeoutSeconds', '0x10', 'invalid syntax'],
    ['timeoutSeconds', '1e3', 'invalid syntax'],
    ['timeoutSeconds', '1_000', 'invalid syntax'],
    ['timeoutSeconds', '99999999999999999999', 'value out of range'],
    ['limit', '2.5', 'invalid syntax'],
    ['limit', '', 'invalid syntax'],
    ['limit', '9223372036854775808', 'value out of range'],
  ];
  for (const [param, value, why] of malformed) {
    it(`${param}=${value} → 400 "${why}"`, async () => {
      const a = await call(`/api/v1/namespaces/qp/pods?${param}=${encodeURIComponent(value)}`);
      expect(a.status).toBe(400);
      expect(a.body).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `strconv.ParseInt: parsing ${JSON.stringify(value)}: ${why}`,
        reason: 'BadRequest',
        code: 400,
      });
    });
  }

  it('timeoutSeconds takes a sign and leading zeros', async () => {
    expect((await call('/api/v1/namespaces/qp/pods?timeoutSeconds=%2B007')).status).toBe(200);
  });

  it('a negative limit is no limit: the whole list, no continue token', async () => {
    const a = await call('/api/v1/namespaces/qp/pods?limit=-1');
    expect(a.status).toBe(200);
    expect(names(a)).toEqual(['a', 'b', 'c', 'd']);
    expect(a.body.metadata?.continue).toBeUndefined();
  });

  it('limit=9223372036854775807 (int64 max) is accepted', async () => {
    expect(names(await call('/api/v1/namespaces/qp/pods?limit=9223372036854775807'))).toEqual([
      'a',
      'b',
      'c',
      'd',
    ]);
  });

  it('timeoutSeconds=0 is the server default, not an immediate end', async () => {
    const rv = server.resourceVersion();
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/qp-t0/pods?watch=1&resourceVersion=${rv}&timeoutSeconds=0`,
    );
    try {
      server.pods.create(pod('qp-t0', 'later'));
      await waitFor(() => w.events.length > 0 || w.ended, 'the ADDED event or the end');
      expect(w.events.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual(['ADDED later']);
      expect(w.ended).toBe(false);
    } finally {
      await w.close();
    }
  });

  it('a negative timeoutSeconds ends the watch at once (an expired deadline)', async () => {
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/qp/pods?watch=1&resourceVersion=${server.resourceVersion()}&timeoutSeconds=-1`,
    );
    expect(w.status).toBe(200);
    await waitFor(() => w.ended, 'the end of the stream');
  });
});

describe('list resourceVersion and resourceVersionMatch', () => {
  const invalid = (message: string, causes: { reason: string; message: string; field: string }[]) => ({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `ListOptions.meta.k8s.io "" is invalid: ${message}`,
    reason: 'Invalid',
    details: { group: 'meta.k8s.io', kind: 'ListOptions', causes },
    code: 422,
  });

  it('resourceVersion=0 is served whole from the watch cache: limit ignored, no continue token', async () => {
    const a = await call('/api/v1/namespaces/qp/pods?resourceVersion=0&limit=2');
    expect(names(a)).toEqual(['a', 'b', 'c', 'd']);
    expect(a.body.metadata?.continue).toBeUndefined();
  });

  it('Exact reads the list as it was at that resourceVersion; a later page keeps it', async () => {
    const ns = 'qp-exact';
    server.pods.create(pod(ns, 'old-1'));
    server.pods.create(pod(ns, 'old-2'));
    const rv = server.resourceVersion();
    server.pods.delete(ns, 'old-1');
    server.pods.create(pod(ns, 'new'));
    const exact = await call(
      `/api/v1/namespaces/${ns}/pods?resourceVersion=${rv}&resourceVersionMatch=Exact`,
    );
    expect(names(exact)).toEqual(['old-1', 'old-2']);
    expect(exact.body.metadata?.resourceVersion).toBe(String(rv));
    // resourceVersion > 0 with a limit and no match: the legacy exact case, paged at that resourceVersion.
    const page1 = await call(`/api/v1/namespaces/${ns}/pods?resourceVersion=${rv}&limit=1`);
    expect(names(page1)).toEqual(['old-1']);
    const page2 = await call(
      `/api/v1/namespaces/${ns}/pods?limit=1&continue=${encodeURIComponent(page1.body.metadata?.continue ?? '')}`,
    );
    expect(names(page2)).toEqual(['old-2']);
    expect(page2.body.metadata?.resourceVersion).toBe(String(rv));
    // NotOlderThan, or a resourceVersion alone: the latest state.
    const latest = await call(
      `/api/v1/namespaces/${ns}/pods?resourceVersion=${rv}&resourceVersionMatch=NotOlderThan`,
    );
    expect(names(latest)).toEqual(['new', 'old-2']);
    expect(Number(latest.body.metadata?.resourceVersion)).toBe(server.resourceVersion());
    expect(names(await call(`/api/v1/namespaces/${ns}/pods?resourceVersion=${rv}`))).toEqual([
      'new',
      'old-2',
    ]);
  });

  it('Exact at a compacted resourceVersion → 410 Expired', async () => {
    const rv = server.resourceVersion();
    server.pods.create(pod('qp-compact', 'x'));
    server.compact();
    const a = await call(`/api/v1/namespaces/qp/pods?resourceVersion=${rv}&resourceVersionMatch=Exact`);
    expect(a.status).toBe(410);
    expect(a.body).toMatchObject({
      reason: 'Expired',
      message: 'The resourceVersion for the provided list is too old.',
    });
  });

  it('Exact at a resourceVersion not reached yet → 504 Timeout (ResourceVersionTooLarge)', async () => {
    const current = server.resourceVersion();
    const a = await call(
      `/api/v1/namespaces/qp/pods?resourceVersion=${current + 5}&resourceVersionMatch=Exact`,
    );
    expect(a.status).toBe(504);
    expect(a.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `Timeout: Too large resource version: ${current + 5}, current: ${current}`,
      reason: 'Timeout',
      details: { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }] },
      code: 504,
    });
  });

  it('NotOlderThan a resourceVersion not reached waits for it, then answers 504 with retryAfterSeconds 1', async () => {
    const current = server.resourceVersion();
    const a = await call(
      `/api/v1/namespaces/qp/pods?resourceVersion=${current + 5}&resourceVersionMatch=NotOlderThan`,
    );
    expect(a.status).toBe(504);
    expect(a.body.details).toEqual({
      causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
      retryAfterSeconds: 1,
    });
  });

  it('NotOlderThan the next resourceVersion is answered once a write reaches it', async () => {
    const next = server.resourceVersion() + 1;
    const pending = call(
      `/api/v1/namespaces/qp-wait/pods?resourceVersion=${next}&resourceVersionMatch=NotOlderThan`,
    );
    server.pods.create(pod('qp-wait', 'arrives'));
    const a = await pending;
    expect(a.status).toBe(200);
    expect(names(a)).toEqual(['arrives']);
  });

  const forbidden: [string, string, { reason: string; message: string; field: string }[]][] = [
    [
      'resourceVersionMatch=NotOlderThan',
      'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
      [
        {
          reason: 'FieldValueForbidden',
          message: 'Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
          field: 'resourceVersionMatch',
        },
      ],
    ],
    [
      'resourceVersion=0&resourceVersionMatch=Exact',
      'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
      [
        {
          reason: 'FieldValueForbidden',
          message: 'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
          field: 'resourceVersionMatch',
        },
      ],
    ],
    [
      'resourceVersion=5&resourceVersionMatch=Newest',
      'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
      [
        {
          reason: 'FieldValueNotSupported',
          message: 'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
          field: 'resourceVersionMatch',
        },
      ],
    ],
    [
      'resourceVersionMatch=Exact&continue=x',
      '[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]',
      [
        {
          reason: 'FieldValueForbidden',
          message: 'Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
          field: 'resourceVersionMatch',
        },
        {
          reason: 'FieldValueForbidden',
          message: 'Forbidden: resourceVersionMatch is forbidden when continue is provided',
          field: 'resourceVersionMatch',
        },
      ],
    ],
    [
      'sendInitialEvents=false',
      'sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list',
      [
        {
          reason: 'FieldValueForbidden',
          message: 'Forbidden: sendInitialEvents is forbidden for list',
          field: 'sendInitialEvents',
        },
      ],
    ],
  ];
  for (const [query, message, causes] of forbidden) {
    it(`list ?${query} → 422 Invalid ListOptions`, async () => {
      const a = await call(`/api/v1/namespaces/qp/pods?${query}`);
      expect(a.status).toBe(422);
      expect(a.body).toEqual(invalid(message, causes));
    });
  }

  it('a malformed list resourceVersion → 400 with the versioner parse error', async () => {
    for (const rv of ['abc', '-1', '+5']) {
      const a = await call(`/api/v1/namespaces/qp/pods?resourceVersion=${encodeURIComponent(rv)}`);
      expect(a.status).toBe(400);
      const q = JSON.stringify(rv);
      expect(a.body.message).toBe(
        `invalid resource version: resourceVersion: Invalid value: ${q}: strconv.ParseUint: parsing ${q}: invalid syntax`,
      );
    }
  });

  it('a malformed watch resourceVersion → 500 without a reason (the watch cache error)', async () => {
    const a = await call('/api/v1/namespaces/qp/pods?watch=1&resourceVersion=abc');
    expect(a.status).toBe(500);
    expect(a.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
      code: 500,
    });
  });
});

describe('order of the answers: integers, then selectors, then validation', () => {
  it('a malformed integer is reported before a malformed selector', async () => {
    const a = await call(`/api/v1/namespaces/qp/pods?limit=x&labelSelector=${encodeURIComponent('a in')}`);
    expect(a.status).toBe(400);
    expect(a.body.message).toBe('strconv.ParseInt: parsing "x": invalid syntax');
  });

  it('a malformed selector is reported before a forbidden combination (400, not 422)', async () => {
    const a = await call(
      `/api/v1/namespaces/qp/pods?resourceVersionMatch=Exact&labelSelector=${encodeURIComponent('a in')}`,
    );
    expect(a.status).toBe(400);
    expect(a.body.reason).toBe('BadRequest');
  });
});

describe('bookmarks before the deadline', () => {
  it('a watch with timeoutSeconds gets a BOOKMARK 2 s before its end, whatever the bookmark interval', async () => {
    const quiet = await startSandboxApiServer({ bookmarkIntervalMs: 600_000 });
    try {
      const w = await openRawWatch(
        `${quiet.url}/api/v1/namespaces/x/pods?watch=1&resourceVersion=${quiet.resourceVersion()}&allowWatchBookmarks=1&timeoutSeconds=3`,
      );
      await waitFor(() => w.ended, 'the end of the stream after 3 s');
      expect(w.events.map((e) => `${e.type} ${e.object.metadata?.resourceVersion}`)).toEqual([
        `BOOKMARK ${quiet.resourceVersion()}`,
      ]);
    } finally {
      await quiet.close();
    }
  });
});

describe('watch-list: sendInitialEvents', () => {
  const endBookmark = (e: RawEvent | undefined) =>
    e?.type === 'BOOKMARK' &&
    (e.object.metadata as { annotations?: Record<string, string> } | undefined)?.annotations?.[
      'k8s.io/initial-events-end'
    ] === 'true';

  it('sendInitialEvents=true from a resourceVersion: the current state as ADDED, then the end bookmark, then changes', async () => {
    const ns = 'qp-wl';
    server.pods.create(pod(ns, 'one'));
    const rv = server.resourceVersion();
    server.pods.create(pod(ns, 'two'));
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/${ns}/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=${rv}&allowWatchBookmarks=true`,
    );
    try {
      await waitFor(() => w.events.some(endBookmark), 'the initial-events-end bookmark');
      const end = w.events.findIndex(endBookmark);
      expect(w.events.slice(0, end).map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual([
        'ADDED one',
        'ADDED two',
      ]);
      expect(w.events[end]?.object.metadata?.resourceVersion).toBe(String(server.resourceVersion()));
      server.pods.patchStatus(ns, 'one', { phase: 'Running' });
      await waitFor(() => w.events.some((e) => e.type === 'MODIFIED'), 'MODIFIED');
    } finally {
      await w.close();
    }
  });

  it('a watch from "" with bookmarks allowed is a watch-list by default: the end bookmark follows the ADDED events', async () => {
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/qp/pods?watch=true&allowWatchBookmarks=true`,
    );
    try {
      await waitFor(() => w.events.some(endBookmark), 'the initial-events-end bookmark');
      const end = w.events.findIndex(endBookmark);
      expect(w.events.slice(0, end).map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual([
        'ADDED a',
        'ADDED b',
        'ADDED c',
        'ADDED d',
      ]);
    } finally {
      await w.close();
    }
  });

  it('sendInitialEvents=false from "": no initial events, only what changes next', async () => {
    const ns = 'qp-noinit';
    server.pods.create(pod(ns, 'before'));
    const w = await openRawWatch(
      `${server.url}/api/v1/namespaces/${ns}/pods?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan`,
    );
    try {
      server.pods.create(pod(ns, 'after'));
      await waitFor(() => w.events.length > 0, 'an event');
      expect(w.events.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual(['ADDED after']);
    } finally {
      await w.close();
    }
  });

  it('sendInitialEvents without resourceVersionMatch=NotOlderThan → 422', async () => {
    const a = await call('/api/v1/namespaces/qp/pods?watch=1&sendInitialEvents=true');
    expect(a.status).toBe(422);
    expect(a.body.message).toBe(
      'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
    );
    const b = await call(
      '/api/v1/namespaces/qp/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact',
    );
    expect(b.body.message).toBe(
      'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]',
    );
  });

  it('resourceVersionMatch on a watch without sendInitialEvents → 422', async () => {
    const a = await call(
      '/api/v1/namespaces/qp/pods?watch=1&resourceVersion=5&resourceVersionMatch=NotOlderThan',
    );
    expect(a.status).toBe(422);
    expect(a.body.message).toBe(
      'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
    );
  });
});

describe('DELETE options', () => {
  const running = (ns: string, name: string) =>
    server.pods.create(
      pod(ns, name, { spec: { containers: [{ name: 'c' }], nodeName: 'n1' }, status: { phase: 'Running' } }),
    );
  const del = (path: string, body?: string) =>
    call(path, {
      method: 'DELETE',
      ...(body === undefined ? {} : { body, headers: { 'Content-Type': 'application/json' } }),
    });

  it('gracePeriodSeconds in the query is an int64: 0x10 and the empty string → 400', async () => {
    server.pods.create(pod('qp-del', 'g'));
    for (const v of ['0x10', '']) {
      const a = await del(`/api/v1/namespaces/qp-del/pods/g?gracePeriodSeconds=${v}`);
      expect(a.status).toBe(400);
      expect(a.body.message).toBe(`strconv.ParseInt: parsing ${JSON.stringify(v)}: invalid syntax`);
    }
    expect(server.pods.get('qp-del', 'g')).toBeDefined();
  });

  it('with a body, the query is not read at all', async () => {
    server.pods.create(pod('qp-del', 'body'));
    const a = await del('/api/v1/namespaces/qp-del/pods/body?gracePeriodSeconds=abc&dryRun=bogus', '{}');
    expect(a.status).toBe(200);
    expect(server.pods.get('qp-del', 'body')).toBeUndefined();
  });

  it('orphanDependents=True is true: a pod kept for its grace period is answered 200, not 202', async () => {
    running('qp-del', 'orphan');
    const a = await del('/api/v1/namespaces/qp-del/pods/orphan?orphanDependents=True');
    expect(a.status).toBe(200);
    expect(server.pods.get('qp-del', 'orphan')?.metadata?.deletionTimestamp).toBeDefined();
  });

  it('propagationPolicy and dryRun are validated: 422 Invalid DeleteOptions', async () => {
    running('qp-del', 'v');
    const bogus = await del('/api/v1/namespaces/qp-del/pods/v?propagationPolicy=Bogus');
    expect(bogus.status).toBe(422);
    expect(bogus.body.message).toBe(
      'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil"',
    );
    const both = await del(
      '/api/v1/namespaces/qp-del/pods/v?orphanDependents=false&propagationPolicy=Background',
    );
    expect(both.body.message).toBe(
      'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Background": orphanDependents and deletionPropagation cannot be both set',
    );
    const dry = await del('/api/v1/namespaces/qp-del/pods/v?dryRun=');
    expect(dry.status).toBe(422);
    expect(dry.body.message).toBe(
      'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: [""]: supported values: "All"',
    );
    expect(server.pods.get('qp-del', 'v')?.metadata?.deletionTimestamp).toBeUndefined();
  });
});

describe('write options: CreateOptions, UpdateOptions, PatchOptions', () => {
  const create = (query: string, name: string) =>
    call(`/api/v1/namespaces/qp-write/pods?${query}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(pod('qp-write', name)),
    });

  it('fieldValidation takes "", Ignore, Strict or Warn: anything else → 422 Invalid CreateOptions', async () => {
    const a = await create('fieldValidation=Bogus', 'fv');
    expect(a.status).toBe(422);
    expect(a.body.message).toBe(
      'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn"',
    );
    expect(server.pods.get('qp-write', 'fv')).toBeUndefined();
    expect((await create('fieldValidation=Strict&unknown=1', 'fv')).status).toBe(201);
  });

  it('dryRun=All is refused (400), not stored; another dryRun value is 422 Invalid PatchOptions', async () => {
    const a = await create('dryRun=All', 'dry');
    expect(a.status).toBe(400);
    expect(server.pods.get('qp-write', 'dry')).toBeUndefined();
    server.pods.create(pod('qp-write', 'patched'));
    const p = await call('/api/v1/namespaces/qp-write/pods/patched?dryRun=Some', {
      method: 'PATCH',
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { x: 'y' } } }),
    });
    expect(p.status).toBe(422);
    expect(p.body.message).toBe(
      'PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"',
    );
    expect(server.pods.get('qp-write', 'patched')?.metadata?.labels).toEqual({});
  });
});

describe('pretty and unknown parameters', () => {
  it('pretty is Go strconv.ParseBool: 1 indents the answer, yes does not', async () => {
    const pretty = await call('/api/v1/namespaces/qp/pods/a?pretty=1');
    expect(pretty.text).toMatch(/^\{\n {2}"kind": "Pod",\n/);
    const plain = await call('/api/v1/namespaces/qp/pods/a?pretty=yes');
    expect(plain.text.startsWith('{"kind":"Pod"')).toBe(true);
    const error = await call('/api/v1/namespaces/qp/pods/absent?pretty=True');
    expect(error.status).toBe(404);
    expect(error.text).toContain('\n  "reason": "NotFound"');
  });

  it('unknown parameters are ignored on list, watch, get and delete', async () => {
    expect(names(await call('/api/v1/namespaces/qp/pods?nope=1&fieldValidation=Strict'))).toEqual([
      'a',
      'b',
      'c',
      'd',
    ]);
    expect((await firstEvent('watch=1&nope=1'))?.type).toBe('ADDED');
    expect((await call('/api/v1/namespaces/qp/pods/a?nope=1')).status).toBe(200);
    server.pods.create(pod('qp-unknown', 'x'));
    expect((await call('/api/v1/namespaces/qp-unknown/pods/x?nope=1', { method: 'DELETE' })).status).toBe(
      200,
    );
  });
});
