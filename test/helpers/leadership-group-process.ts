/**
 * A replica's leaderships alone, in a process of its own, so that a test can SIGKILL it (its lease is then
 * neither kept alive nor revoked: it expires after its TTL, as after a crash).
 * Usage: node leadership-group-process.ts <etcd endpoints, comma-separated> <replica id> <ttl s> <ns>…
 * Prints `{"leading":n}` each time the number of targets it leads changes.
 */
import { Etcd3 } from 'etcd3';
import { monotonicClock } from '../../src/clock.ts';
import { createEtcdLeadershipGroup } from '../../src/leadership/etcd-leadership-group.ts';
import { createLogger } from '../../src/log.ts';
import { electionPrefix, targetLabel } from '../../src/queue/job-identity.ts';

const [endpoints = '', replicaId = '', ttl = '2', ...namespaces] = process.argv.slice(2);
const client = new Etcd3({ hosts: endpoints.split(',') });
const log = createLogger({ level: 'warn' });
const group = createEtcdLeadershipGroup({
  client,
  replicaId,
  ttlSeconds: Number(ttl),
  log,
  monotonicNow: monotonicClock,
});
let leading = 0;
const report = (delta: number) => {
  leading += delta;
  process.stdout.write(`${JSON.stringify({ leading })}\n`);
};
for (const namespace of namespaces) {
  const t = { context: 'ctx', namespace };
  const e = group.election(targetLabel(t), electionPrefix(t), log);
  e.addEventHandler({ onElected: () => report(1), onLost: () => report(-1) });
  e.start();
}
group.start();
