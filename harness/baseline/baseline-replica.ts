/**
 * One replica of the uncoordinated baseline (see {@link createKyuubiLikeCleaner}): per context one
 * KubeConfig, rate limiter and pod API, as the coordinated replica has, and per target an informer and
 * a local-timer cleaner. No Redis, no etcd: that is the point.
 *
 * {@link spawnBaselineReplica} runs it as a real child process (`harness/cli.ts baseline-replica`,
 * configured by the same `SDC_*` variables as `run`), for the demo and the benchmarks.
 */

import { parseLabelSelector } from '../../src/config/label-selector.ts';
import type { CleanerConfig } from '../../src/config/schema.ts';
import { openContexts } from '../../src/kube/context-clients.ts';
import { createPodInformer } from '../../src/kube/pod-informer.ts';
import type { Logger } from '../../src/log.ts';
import { targetLabel } from '../../src/queue/job-identity.ts';
import {
  HARNESS_CLI_PATH,
  type ReplicaProcess,
  type SpawnReplicaOptions,
  spawnReplica,
} from '../sandbox/replica-process.ts';
import { createKyuubiLikeCleaner, type KyuubiLikeCleaner } from './kyuubi-like-cleaner.ts';

/** A running baseline replica. */
export interface BaselineReplica {
  readonly replicaId: string;
  readonly cleaners: readonly KyuubiLikeCleaner[];
  /** Cancels pending timers and stops the informers. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a baseline replica from a replica configuration (targets, kubeconfig, labelSelector, policy,
 * retention, apiQps/apiBurst, replicaId; queue and election fields are ignored). Resolves once every
 * informer has loaded its first list, after logging 'replica started'.
 * @throws KubeconfigError when a target's context cannot be loaded (a configuration error).
 */
export async function startBaselineReplica(
  config: CleanerConfig,
  deps: { log: Logger; now: () => number },
): Promise<BaselineReplica> {
  const { log, now } = deps;
  const selector = parseLabelSelector(config.labelSelector);
  const contexts = openContexts(config, { now });
  const cleaners: KyuubiLikeCleaner[] = [];
  for (const { namespace, clients } of contexts.targets) {
    const { context, http, limiter, pods } = clients;
    const target = { cluster: clients.cluster.name, context, namespace };
    const tlog = log.child({ cluster: target.cluster, context, namespace });
    const cleaner = createKyuubiLikeCleaner({
      target,
      selector,
      policy: config.policy,
      appState: config.applicationState,
      retentionMs: config.retentionMs,
      pods,
      log: tlog,
      now,
      informer: createPodInformer({
        http,
        limiter,
        namespace,
        labelSelector: config.labelSelector,
        log: tlog,
        now,
      }),
    });
    cleaners.push(cleaner);
  }
  await Promise.all(cleaners.map((c) => c.start()));
  log.info({ targets: cleaners.map((c) => targetLabel(c.target)), mode: 'baseline' }, 'replica started');
  let stopping: Promise<void> | undefined;
  return {
    replicaId: config.replicaId,
    cleaners,
    stop() {
      stopping ??= (async () => {
        await Promise.allSettled(cleaners.map((c) => c.stop()));
        await contexts.close();
        log.info('replica stopped');
      })();
      return stopping;
    },
  };
}

/** Options of {@link spawnBaselineReplica}: those of `spawnReplica` without the subcommand and entry point. */
export type SpawnBaselineReplicaOptions = Omit<SpawnReplicaOptions, 'command' | 'cliPath'>;

/**
 * Spawns one baseline replica process (`harness/cli.ts baseline-replica`) with the same Node
 * binary, configured by `SDC_*` variables in `opts.env` like `spawnReplica`. Its log lines: 'replica
 * started' once its informers synced; per pod and replica one 'driver pod deleted' (info, outcome
 * accepted, latenessMs) or 'Failed to delete pod' (warn, outcome failed, code, reason).
 */
export function spawnBaselineReplica(opts: SpawnBaselineReplicaOptions): ReplicaProcess {
  return spawnReplica({ ...opts, cliPath: HARNESS_CLI_PATH, command: 'baseline-replica' });
}
