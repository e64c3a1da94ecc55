/**
 * What the HTTP server reads of a running replica: its id, its target cleaners and its connections. Declared
 * here, by the reader, so that http/ does not import the composition root (src/replica.ts), whose `Replica`
 * satisfies it.
 */
import type { TargetCleaner } from '../cleaner/target-cleaner.ts';
import type { DiscoveryView } from '../kube/namespace-discovery.ts';
import type { ElectionReader, LeadershipBackendKind } from '../leadership/election-reader.ts';
import type { LeadershipBalance } from '../leadership/leadership-group.ts';
import type { RedisClient } from '../queue/redis-client.ts';

/** The replica as /healthz, /readyz, /api/v1/* and the dashboard see it. */
export interface ServedReplica {
  readonly replicaId: string;
  readonly cleaners: readonly TargetCleaner[];
  /** Pinged by /readyz. */
  readonly redis: RedisClient;
  /** The leadership backend the replica elects through; undefined with local leadership. */
  readonly leadershipBackend: LeadershipBackendKind | undefined;
  /** Whether that backend answers now, within `timeoutMs` (ms): /readyz and the metrics. Never rejects. */
  leadershipAnswers?(timeoutMs: number): Promise<boolean>;
  /** The leadership backend's elections, read by /api/v1/explain; undefined with local leadership. */
  readonly elections?: ElectionReader | undefined;
  /** How leaderships are balanced over the live replicas (for /api/v1/leaders); undefined with local leadership. */
  leadershipBalance?(): LeadershipBalance | undefined;
  /** Per `context:*` target, the namespaces discovered (src/replica-supervisor.ts); absent without discovery. */
  discovery?(): readonly DiscoveryView[];
}
