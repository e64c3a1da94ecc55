/**
 * `/api/v1/explain` has a budget of its own per replica: a flood of explain requests while the leader cleans
 * (a low API rate, so that every GET it lets through would take a DELETE's place in the context's rate
 * limiter) is answered `429` with `Retry-After` beyond the budget, and those requests never reach the API
 * server. Counted from the sandbox API server's request log: the live GETs of the explained pod, the DELETEs.
 */
import { describe, expect, it } from 'vitest';
import { sparkDriverPod } from '../../harness/sandbox/workload.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  httpUrl,
  nameOf,
  replicaEnv,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from '../failure/helpers.ts';
import { deletesPer } from '../helpers/cluster.ts';

const cluster = useFailureCluster({ context: 'xb' });
const NS = 'explain-flood';

describe('explain budget', () => {
  it('a flood of explains while the leader cleans: beyond the budget 429 + Retry-After, no API request; every pod deleted once', async () => {
    const r = cluster().startReplica(
      'xb1',
      replicaEnv(cluster(), NS, 'xb', { SDC_API_QPS: '5', SDC_API_BURST: '5' }),
    );
    try {
      await firstLeader([r], NS);
      const url = await httpUrl(r);
      // A running driver to ask about: never deleted, so every explain of it makes a live GET.
      const asked = cluster().server.pods.create(
        sparkDriverPod({ namespace: NS, phase: 'Running', nowMs: cluster().server.clock.now() }),
      );
      const getPath = `/api/v1/namespaces/${NS}/pods/${nameOf(asked)}`;
      const due = createDrivers(cluster().server, NS, 20, 'flood', 10_000);
      const started = performance.now();
      // 10 clients, 10 explains each, back to back.
      const answers = (
        await Promise.all(
          Array.from({ length: 10 }, async () => {
            const codes: { status: number; retryAfter: string | null }[] = [];
            for (let i = 0; i < 10; i++) {
              const res = await fetch(`${url}/api/v1/explain/${NS}/${nameOf(asked)}`);
              await res.arrayBuffer();
              codes.push({ status: res.status, retryAfter: res.headers.get('retry-after') });
            }
            return codes;
          }),
        )
      ).flat();
      const elapsedS = (performance.now() - started) / 1000;
      const ok = answers.filter((a) => a.status === 200).length;
      const refused = answers.filter((a) => a.status === 429);
      expect(ok + refused.length).toBe(100);
      // The budget (docs/operations.md): a burst of 5, then 1 per second over the flood's duration.
      expect(ok).toBeLessThanOrEqual(5 + Math.ceil(elapsedS));
      expect(refused.every((a) => Number(a.retryAfter) >= 1)).toBe(true);
      // Only admitted explains reached the API server: one live GET each.
      const gets = cluster()
        .server.requests.recent()
        .filter((q) => q.verb === 'get' && q.path.startsWith(getPath));
      expect(gets.length).toBe(ok);
      await waitGone(cluster().server, due, 'the due pods deleted during the flood', 60_000);
      const uids = due.map(uidOf);
      expect(checkInvariants(cluster().server, NS, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      expect(deletesPer(cluster().server, uids)).toEqual(uids.map(() => 1));
      console.info(
        `[explain budget] 100 explains in ${elapsedS.toFixed(1)} s: ${ok} answered, ${refused.length} refused (429); ${gets.length} GETs of the pod`,
      );
    } finally {
      await stopAll([r]);
    }
  }, 120_000);
});
