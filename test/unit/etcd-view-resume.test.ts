/**
 * Where the election view's watch resumes after its stream drops (src/leadership/etcd/view.ts), with etcd3's own
 * `Watcher` (its listeners included) over a stand-in for etcd3's watch manager and client. etcd3 moves a
 * watcher's resume revision to the store's revision of each *created* answer; a stream that drops after that
 * answer and before the history it announced would resume past that history. The view resumes after the last
 * revision it applied instead. The real-etcd case: test/integration/etcd-member-down.test.ts (a member killed
 * while the views still catch up).
 */
import { type IKeyValue, Watcher } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { createElectionView } from '../../src/leadership/etcd/view.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = 'sdc/';
const MEMBERS = `${ROOT}clusters/c/members/`;

function kv(key: string, value: string, rev: number): IKeyValue {
  return {
    key: Buffer.from(key),
    value: Buffer.from(value),
    create_revision: String(rev),
    mod_revision: String(rev),
    version: '1',
    lease: '1',
  };
}

/** A client whose one watch is an etcd3 Watcher attached to a manager that sends nothing. */
function fakeClient(readRevision: number) {
  let watcher: Watcher | undefined;
  const manager = { attach: () => undefined, detach: () => Promise.resolve() };
  const client = {
    getAll: () => ({
      prefix: () => ({ exec: async () => ({ kvs: [], header: { revision: String(readRevision) } }) }),
    }),
    watch: () => {
      const request: Record<string, unknown> = {};
      const builder = {
        prefix: (p: string) => {
          request.key = Buffer.from(p);
          return builder;
        },
        startRevision: (r: string) => {
          request.start_revision = r;
          return builder;
        },
        create: async () => {
          // The class etcd3's WatchBuilder creates, with its listeners ('connected' and 'data' move the revision).
          const Ctor = Watcher as unknown as new (m: unknown, ns: unknown, req: unknown) => Watcher;
          watcher = new Ctor(manager, { unprefix: (key: Buffer) => key }, request);
          return watcher;
        },
      };
      return builder;
    },
  };
  return { client, watcher: () => watcher };
}

describe('the election view resumes a dropped watch after the last revision it applied', () => {
  it('a drop between the created answer and the history it announced resumes at that history', async () => {
    const { client, watcher } = fakeClient(1);
    const view = createElectionView({
      client: client as never,
      log: memoryLogger().log,
      root: ROOT,
      membersPrefix: MEMBERS,
    });
    view.start();
    const w = await waitFor('the watch created', () => watcher());
    expect(w.request.start_revision).toBe('2');
    // etcd answers "created" when the store is at revision 4: revisions 2–4 are still to be sent.
    w.emit('connected', { header: { revision: '4' }, created: true });
    w.emit('disconnected', new Error('14 UNAVAILABLE: Connection dropped'));
    expect(w.request.start_revision).toBe('2');
    // The history arrives on the new stream; a later drop resumes after it.
    w.emit('connected', { header: { revision: '4' }, created: true });
    w.emit('data', {
      header: { revision: '4' },
      events: [2, 3, 4].map((rev) => ({ type: 'Put', kv: kv(`${MEMBERS}r${rev}`, `r${rev}`, rev) })),
    });
    expect(view.members()).toEqual(['r2', 'r3', 'r4']);
    w.emit('disconnected', new Error('14 UNAVAILABLE: Connection dropped'));
    expect(w.request.start_revision).toBe('5');
    await view.close();
  });
});
