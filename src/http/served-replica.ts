/**
 * What the HTTP server reads of a running replica: its id, its target cleaners and its connections. Declared
 * here, by the reader, so that http/ does not import the composition root (src/replica.ts), whose `Replica`
 * satisfies it.
 */
import type { Etcd3 } from 'etcd3';
import type { TargetCleaner } from '../cleaner/target-cleaner.ts';
import type { DiscoveryView } from '../kube/namespace-discovery.ts';
import type { LeadershipBalance } from '../leadership/leadership-group.ts';
import type { RedisClient } from '../queue/redis-client.ts';
import type { ElectionReader } from '../status/election-read.ts';

/** The replica as /healthz, /readyz, /api/v1/* and the dashboard see it. */
export interface ServedReplica {
  readonly replicaId: string;
  readonly cleaners: readonly TargetCleaner[];
  /** Pinged by /readyz. */
  readonly redis: RedisClient;
  /** Checked by /readyz when the replica elects through etcd; undefined with local leadership. */
  readonly etcd: Etcd3 | undefined;
  /** The leadership backend's elections, read by /api/v1/explain; undefined with local leadership. */
  readonly elections?: ElectionReader | undefined;
  /** With ZooKeeper: whether the replica's session is connected now (reported by /readyz and the metrics). */
  zookeeperConnected?(): boolean;
  /** How leaderships are balanced over the live replicas (for /api/v1/leaders); undefined with local leadership. */
  leadershipBalance?(): LeadershipBalance | undefined;
  /** Per `context:*` target, the namespaces discovered (src/replica-supervisor.ts); absent without discovery. */
  discovery?(): readonly DiscoveryView[];
}
