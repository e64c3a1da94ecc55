/**
 * `spark-driver-cleaner explain <context:namespace/pod | uid>`: what each part of the cleaner knows about one
 * pod — the API server's copy (a live GET unless `--offline`), the classification and deadline, the job, the
 * tombstone, the leader — ending in one sentence (src/status/explain.ts). Same configuration as `run`.
 * Exit codes: 0 explained, 2 bad configuration or pod reference, 3 Redis or etcd unreachable.
 */
import type { Command } from 'commander';
import { systemClock } from '../clock.ts';
import { parseLabelSelector } from '../config/label-selector.ts';
import { openContexts } from '../kube/context-clients.ts';
import { KubeconfigError } from '../kube/kubeconfig.ts';
import type { TargetRef } from '../queue/job-identity.ts';
import { tombstoneKey } from '../queue/job-identity.ts';
import { explain, formatExplanation } from '../status/explain.ts';
import { gatherFacts } from '../status/explain-facts.ts';
import { parsePodRef } from '../status/pod-ref.ts';
import {
  checkReachable,
  openStateStore,
  readFailure,
  resolveTargets,
  UnreachableError,
} from '../status/state-store.ts';
import { EXIT_UNREACHABLE } from '../status/status-format.ts';
import { addConfigOptions, loadConfigOrExit } from './config-options.ts';

/** Registers `explain` on the program. */
export function registerExplainCommand(program: Command): void {
  const cmd = program
    .command('explain')
    .argument('<pod>', 'context:namespace/pod, namespace/pod, or the pod UID')
    .description(
      'Why is this pod still here? What the API server, the queue, the tombstones and the election know ' +
        'about one pod, and one sentence. Exit 0 explained, 2 bad configuration or pod, ' +
        '3 Redis, etcd or ZooKeeper unreachable.',
    )
    .option('--json', 'print JSON instead of text')
    .option('--offline', 'do not GET the pod from the API server (Redis and etcd only)');
  addConfigOptions(cmd);
  cmd.action(async (ref: string, flags: Record<string, unknown>) => {
    process.exitCode = await explainCommand(ref, flags);
  });
}

const bad = (message: string): number => {
  process.stderr.write(`spark-driver-cleaner: ${message}\n`);
  return 2;
};

/** Runs `explain` and returns its exit code. */
async function explainCommand(text: string, flags: Record<string, unknown>): Promise<number> {
  const config = loadConfigOrExit(flags);
  const ref = parsePodRef(text);
  if (typeof ref === 'string') return bad(`explain: ${ref}`);
  let configured: TargetRef[];
  let asked: TargetRef | undefined;
  try {
    configured = resolveTargets(config).targets;
    if ('target' in ref) [asked] = resolveTargets({ ...config, targets: [ref.target], discover: [] }).targets;
  } catch (err) {
    if (!(err instanceof KubeconfigError)) throw err;
    return bad(`invalid configuration:\n  - ${err.message}`);
  }
  // As /api/v1/explain answers 404: a namespace no target names is not this cleaner's to explain.
  if (asked && !configured.some((t) => t.cluster === asked.cluster && t.namespace === asked.namespace)) {
    const list = configured.map((t) => `${t.context}:${t.namespace}`).join(', ');
    return bad(
      `explain: ${asked.context}:${asked.namespace} is not a configured target (targets: ${list}): this cleaner does not clean its pods; check --targets (SDC_TARGETS)`,
    );
  }
  const store = openStateStore(config);
  const contexts = new Map<string, ReturnType<typeof openContexts>>();
  try {
    await checkReachable(store, config);
    let target = asked;
    if (!target && 'uid' in ref) {
      // A UID alone: the target whose queue has its job or tombstone.
      for (const t of configured) {
        const q = store.queueOf(t);
        if ((await q.getJob(ref.uid)) || (await store.redis.exists(tombstoneKey(store.prefix, t, ref.uid))))
          target = t;
        if (target) break;
      }
      if (!target) {
        process.stdout.write(
          `no job and no tombstone for uid ${ref.uid} in ${configured.map((t) => `${t.context}:${t.namespace}`).join(', ')}\n`,
        );
        return 0;
      }
    }
    if (!target) return bad('explain: no target');
    const t = target;
    const getPod =
      flags.offline === true
        ? undefined
        : (namespace: string, name: string) => {
            let opened = contexts.get(t.context);
            if (!opened) {
              opened = openContexts(
                { ...config, targets: [{ context: t.context, namespace }] },
                { now: systemClock },
              );
              contexts.set(t.context, opened);
            }
            return (opened.targets[0]?.clients.pods ?? failNoClient()).get(namespace, name);
          };
    const facts = await gatherFacts(
      { target: t, queue: store.queueOf(t), redis: store.redis, elections: store.elections, getPod },
      'uid' in ref ? { uid: ref.uid } : { name: ref.name },
    );
    const e = explain(facts, {
      selector: parseLabelSelector(config.labelSelector),
      selectorText: config.labelSelector,
      policy: config.policy,
      appState: config.applicationState,
      retentionMs: config.retentionMs,
      nowMs: systemClock(),
    });
    process.stdout.write(flags.json === true ? `${JSON.stringify(e, null, 2)}\n` : formatExplanation(e));
    return 0;
  } catch (err) {
    if (err instanceof KubeconfigError) return bad(`invalid configuration:\n  - ${err.message}`);
    const why = err instanceof UnreachableError ? err.message : readFailure(err, store, config);
    process.stderr.write(`spark-driver-cleaner: explain: ${why}\n`);
    return EXIT_UNREACHABLE;
  } finally {
    await Promise.allSettled([...contexts.values()].map((c) => c.close()));
    await store.close();
  }
}

function failNoClient(): never {
  throw new Error('no API client for the context');
}
