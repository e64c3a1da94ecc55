/**
 * The harness's local services (harness/sandbox/local-services.ts) under overlapping lifecycle calls, as the
 * nemesis makes them when a restart overruns its fault and the next fault on the same service starts: at most
 * one process of a service may run (etcd locks its data directory: a second one waits for the lock forever).
 */
import { execFileSync } from 'node:child_process';
import { afterAll, expect, it } from 'vitest';
import { type LocalEtcd, startEtcd } from '../../harness/sandbox/local-services.ts';

let etcd: LocalEtcd | undefined;
afterAll(async () => {
  await etcd?.stop();
});

/** The etcd processes this test process spawned and that still run. */
function etcdChildren(): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(process.pid), 'etcd'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

it('overlapping kill and restarts of one etcd member leave exactly one process, and it answers', async () => {
  etcd = await startEtcd();
  const member = etcd.members[0];
  if (!member) throw new Error('no member');
  await Promise.all([
    member.restartOnFreshPort(),
    member.kill().then(() => member.restartOnFreshPort()),
    member.restart(),
    member.restartOnFreshPort(),
  ]);
  expect(etcdChildren()).toHaveLength(1);
  expect(etcdChildren()).toEqual([member.pid]);
  const res = await fetch(`${member.url}/health`);
  expect(await res.text()).toContain('"health":"true"');
}, 120_000);
