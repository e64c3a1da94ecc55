/**
 * Helpers of the Redis failover cases (Sentinel and Cluster): a steady stream of driver pods over several
 * targets, the cases' invariants from the sandbox's DELETE log, and the figures they print.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { SandboxApiServer } from '../../harness/sandbox/apiserver/server.ts';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { parseLabelSelector } from '../../src/config/label-selector.ts';
import { KYUUBI_STATE_DEFAULTS } from '../../src/kube/application-state.ts';
import { trimPod } from '../../src/kube/driver-pod.ts';
import { decide } from '../../src/rules/decision.ts';
import { waitFor } from '../helpers/wait.ts';
import { createDrivers, SELECTOR, uidOf } from './helpers.ts';

const selector = parseLabelSelector(SELECTOR);

/** A stream of terminated drivers, one every `everyMs`, round-robin over `namespaces`. */
export interface PodStream {
  readonly pods: V1Pod[];
  /** When each pod (by UID) was created, sandbox clock, ms. */
  readonly createdAt: Map<string, number>;
  stop(): void;
}

/** Starts a {@link PodStream}: each pod finished when it is created (its deadline: now + retention). */
export function startPodStream(
  server: SandboxApiServer,
  namespaces: readonly string[],
  prefix: string,
  everyMs: number,
): PodStream {
  const pods: V1Pod[] = [];
  const createdAt = new Map<string, number>();
  let i = 0;
  const timer = setInterval(() => {
    const ns = namespaces[i % namespaces.length] as string;
    for (const p of createDrivers(server, ns, 1, `${prefix}-${i}`)) {
      pods.push(p);
      createdAt.set(uidOf(p), server.clock.now());
    }
    i += 1;
  }, everyMs);
  return { pods, createdAt, stop: () => clearInterval(timer) };
}

/** The pod's deadline as the cleaner computes it (finishedAt, a whole second, + retention), epoch ms. */
export function deadlineOf(pod: V1Pod, retentionMs: number): number {
  const d = decide(trimPod(pod), { selector, policy: 'ALL', appState: KYUUBI_STATE_DEFAULTS });
  if (d.action !== 'enqueue' || d.state.finishedAtMs === undefined)
    throw new Error(`${pod.metadata?.name} is not an eligible terminated driver`);
  return d.state.finishedAtMs + retentionMs;
}

/** Accepted (applied) DELETEs of the sandbox by UID: the arrival time (sandbox clock) of each. */
export function acceptedDeletes(server: SandboxApiServer): Map<string, number[]> {
  const m = new Map<string, number[]>();
  for (const d of server.requests.deletes()) {
    if (!d.applied || !d.uid) continue;
    m.set(d.uid, [...(m.get(d.uid) ?? []), d.atMs]);
  }
  return m;
}

/** Waits until `n` more DELETEs were accepted after `sinceMs` (sandbox clock): cleaning goes on. */
export async function waitForDeletesAfter(
  server: SandboxApiServer,
  sinceMs: number,
  n: number,
  what: string,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    what,
    () => server.requests.deletes().filter((d) => d.applied && d.atMs >= sinceMs).length >= n,
    timeoutMs,
    100,
  );
}

/** What a failover did to the pods: the invariants' violations and the figures. */
export interface FailoverReport {
  /** Pods with more than one accepted DELETE. */
  repeated: string[];
  /** Pods whose accepted DELETE arrived before their deadline. */
  early: string[];
  /** ms from the kill to the first accepted DELETE of a pod due after the kill (its job fetched after it). */
  killToFirstDeleteMs: number | undefined;
  /** Lateness after its deadline of each pod pending at the kill (not deleted by then), ms, sorted. */
  pendingLatenessMs: number[];
}

/** Reads the sandbox's DELETE log for `pods` against a kill at `killAtMs` (sandbox clock). */
export function failoverReport(
  server: SandboxApiServer,
  stream: PodStream,
  retentionMs: number,
  killAtMs: number,
): FailoverReport {
  const accepted = acceptedDeletes(server);
  const report: FailoverReport = {
    repeated: [],
    early: [],
    killToFirstDeleteMs: undefined,
    pendingLatenessMs: [],
  };
  let first = Number.POSITIVE_INFINITY;
  for (const pod of stream.pods) {
    const uid = uidOf(pod);
    const times = accepted.get(uid) ?? [];
    const deadline = deadlineOf(pod, retentionMs);
    if (times.length > 1) report.repeated.push(uid);
    const at = times[0];
    if (at === undefined) continue;
    if (at < deadline) report.early.push(uid);
    if (deadline > killAtMs) first = Math.min(first, at);
    const created = stream.createdAt.get(uid) ?? Number.POSITIVE_INFINITY;
    if (created <= killAtMs && at > killAtMs) report.pendingLatenessMs.push(at - deadline);
  }
  report.pendingLatenessMs.sort((a, b) => a - b);
  report.killToFirstDeleteMs = Number.isFinite(first) ? first - killAtMs : undefined;
  return report;
}

/** `median / worst` of sorted ms, for the printed figures. */
export function medianWorst(sorted: readonly number[]): string {
  if (sorted.length === 0) return 'none';
  return `${sorted[Math.floor(sorted.length / 2)]} / ${sorted.at(-1)} ms`;
}

/** For a failed wait: the pods still there, and what each replica logged about them and about Redis. */
export function diagnose(
  server: SandboxApiServer,
  pods: readonly V1Pod[],
  replicas: readonly ReplicaProcess[],
): string {
  const left = pods.filter((p) => {
    const cur = server.pods.get(p.metadata?.namespace ?? '', p.metadata?.name ?? '');
    return cur?.metadata?.uid === uidOf(p);
  });
  const lines: string[] = [`${left.length} pods left`];
  for (const p of left.slice(0, 5)) {
    lines.push(`- ${p.metadata?.namespace}/${p.metadata?.name} ${uidOf(p)}`);
    for (const r of replicas)
      for (const l of r.lines.filter((x) => x.uid === uidOf(p)))
        lines.push(`  ${r.id} ${l.time} ${l.msg} ${l.result ?? l.outcome ?? ''}`);
  }
  for (const r of replicas)
    for (const l of r.lines
      .filter((x) => /redis|reconcile|worker|elected|leadership|stuck|overdue/.test(String(x.msg)))
      .slice(-25))
      lines.push(
        `${r.id} ${l.time} ${l.level} ${l.namespace ?? ''} ${l.msg} ${JSON.stringify(l.err ?? l.reason ?? l.added ?? '')}`,
      );
  return lines.join('\n');
}
