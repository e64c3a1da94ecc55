/**
 * A replica's leaderships alone, in a process of its own, so that a test can SIGKILL it (its session is then
 * neither kept alive nor ended: it expires, as after a crash) or SIGSTOP it (frozen past its session).
 * Usage: node leadership-group-process.ts <backend> <replica id> <ttl s> <ns>…
 * with <backend> `etcd:<endpoints, comma-separated>` or `zookeeper:<connect string>` (a bare endpoint list
 * means etcd). Prints `{"leading":n}` each time the number of targets it leads changes, and with `--fence`
 * (env SDC_FENCE=1) `{"fenced":"<ns>","term":k}` for every fence() that succeeds (one round every 50 ms).
 */
import { Etcd3 } from 'etcd3';
import { monotonicClock } from '../../src/clock.ts';
import type { BackendElection } from '../../src/leadership/backend.ts';
import { createEtcdLeadershipGroup } from '../../src/leadership/etcd/backend.ts';
import type { LeadershipGroup } from '../../src/leadership/leadership-group.ts';
import { createZooKeeperLeadershipGroup } from '../../src/leadership/zookeeper/backend.ts';
import { createLogger } from '../../src/log.ts';
import {
  electionPrefix,
  membersPrefix,
  type TargetRef,
  targetKey,
  zookeeperElectionPrefix,
  zookeeperMembersDir,
} from '../../src/queue/job-identity.ts';

const [backend = '', replicaId = '', ttl = '2', ...namespaces] = process.argv.slice(2);
const log = createLogger({ level: 'warn' });
const zookeeper = backend.startsWith('zookeeper:') ? backend.slice('zookeeper:'.length) : undefined;
const ROOT = '/sdc-test';
let group: LeadershipGroup<BackendElection>;
let prefixOf: (t: TargetRef) => string;
if (zookeeper) {
  group = createZooKeeperLeadershipGroup({
    membersDir: zookeeperMembersDir(ROOT, 'test'),
    settings: { connect: zookeeper, root: ROOT, sessionTimeoutMs: Number(ttl) * 1000 },
    replicaId,
    log,
    monotonicNow: monotonicClock,
  });
  prefixOf = (t) => zookeeperElectionPrefix(ROOT, t);
} else {
  const client = new Etcd3({ hosts: backend.replace(/^etcd:/, '').split(',') });
  group = createEtcdLeadershipGroup({
    membersPrefix: membersPrefix('test'),
    client,
    replicaId,
    ttlSeconds: Number(ttl),
    log,
    monotonicNow: monotonicClock,
  });
  prefixOf = electionPrefix;
}
let leading = 0;
const report = (delta: number) => {
  leading += delta;
  process.stdout.write(`${JSON.stringify({ leading })}\n`);
};
const fencing = process.env.SDC_FENCE === '1';
for (const namespace of namespaces) {
  const t = { cluster: 'test', context: 'ctx', namespace };
  const e = group.election(targetKey(t), prefixOf(t), log);
  let term = 0;
  e.addEventHandler({
    onElected: () => {
      term += 1;
      report(1);
      if (!fencing) return;
      const mine = term;
      void (async () => {
        while (e.isLeader && term === mine) {
          // As the cleanup handler does before each DELETE.
          const ok = await e.fence(AbortSignal.timeout(2000)).then(
            () => true,
            () => false,
          );
          if (ok) process.stdout.write(`${JSON.stringify({ fenced: namespace, term: mine })}\n`);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
    },
    onLost: () => report(-1),
  });
  e.start();
}
group.start();
