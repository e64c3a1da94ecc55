/**
 * Applies a nemesis schedule to the world: each fault starts at its offset, lasts its duration and is
 * undone (process restarted or thawed, etcd or ZooKeeper restarted, Redis resumed, clock stepped back, API fault
 * expired). The waits here are the faults' own durations — the schedule — and nothing else.
 *
 * Each applied fault leaves a {@link FaultRecord} with its real start and end by the sandbox clock, so
 * that a violation can be set beside the faults active at that moment.
 */
import type { FaultSpec } from '../../harness/sandbox/apiserver/faults.ts';
import type { ReplicaProcess } from '../../harness/sandbox/replica-process.ts';
import { queueName } from '../../src/queue/job-identity.ts';
import type { LeaderSample } from '../helpers/invariants.ts';
import type { NemesisEvent } from './schedule.ts';
import type { NemesisWorkload } from './workload.ts';
import type { NemesisWorld, ReplicaSlot } from './world.ts';
import { cutFollower } from './zookeeper-follower-cut.ts';

/** A fault as it happened. Times are epoch ms by the sandbox clock. */
export interface FaultRecord {
  event: NemesisEvent;
  startedAtMs: number;
  endedAtMs: number;
  /** What happened beyond the plan (answers lost, a replica already down, …). */
  note?: string;
  /**
   * Why the fault could not be applied as planned (a service did not start again, on two fresh ports):
   * the run still judges the invariants, over the faults it did apply, and reports this one.
   */
  notApplied?: string;
  /** Who the store said led each namespace, sampled while the fault lasted (a follower cut). */
  leaders?: LeaderSample[];
}

/** Attempts to bring a service back after its restart failed (each on fresh ports), 1 s apart. */
const RESTORE_ATTEMPTS = 10;

/**
 * Restarts a service (etcd, Redis); when that fails (it already tried two fresh ports) the fault is not
 * applied as planned: the service is restored — tried again every second, up to {@link RESTORE_ATTEMPTS}
 * times — so that the rest of the run still has it. Returns the failure, undefined when the restart worked.
 */
async function restartOrRestore(restart: () => Promise<void>): Promise<string | undefined> {
  try {
    await restart();
    return undefined;
  } catch (err) {
    if (process.env.NEMESIS_VERBOSE) console.info(`[nemesis] restart failed: ${(err as Error).message}`);
    const first = (err as Error).message.split('\n')[0];
    for (let i = 1; i <= RESTORE_ATTEMPTS; i++) {
      await sleep(1000);
      try {
        await restart();
        return `restart failed (${first}); restored after ${i} more attempt(s)`;
      } catch {}
    }
    return `restart failed (${first}); not restored after ${RESTORE_ATTEMPTS} more attempts`;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Longest wait for a Redis failover (a promotion, a resync), ms. */
const FAILOVER_TIMEOUT_MS = 60_000;

/** Longest wait for a SIGTERMed replica to exit (it forces its own exit after 15 s), ms. */
const TERM_EXIT_TIMEOUT_MS = 20_000;

/** Restarts the slot's process after it exited (unless the run is over), with `env` over the fleet's settings. */
function restart(slot: ReplicaSlot, env?: Record<string, string>): void {
  slot.exited();
  slot.start(env);
}

/**
 * SIGTERMs the slot's process, waits for its exit (SIGKILL past {@link TERM_EXIT_TIMEOUT_MS}) and starts the
 * next one with `env` over the fleet's settings. `note` records what went off plan.
 */
async function restartWith(
  slot: ReplicaSlot,
  env: Record<string, string> | undefined,
  note: (text: string) => void,
): Promise<void> {
  const proc = slot.current;
  if (proc) {
    slot.signal('SIGTERM');
    const exit = await Promise.race([proc.exited, sleep(TERM_EXIT_TIMEOUT_MS).then(() => 'timeout')]);
    if (exit === 'timeout') {
      note(`did not exit within ${TERM_EXIT_TIMEOUT_MS} ms of SIGTERM: SIGKILLed`);
      slot.signal('SIGKILL');
      await proc.exited;
    }
  }
  restart(slot, env);
}

/** The sandbox fault path pattern of one namespace's pods, or every path. */
const podsOf = (namespace: string | undefined) =>
  namespace === undefined ? undefined : `^/api/v1/namespaces/${namespace}/pods`;

/** One fault on a replica process, to its end (thawed, or restarted). `note` records what went off plan. */
async function processFault(
  kind: 'replica-kill' | 'replica-term' | 'replica-stop',
  durationMs: number,
  slot: ReplicaSlot,
  proc: ReplicaProcess,
  note: (text: string) => void,
): Promise<void> {
  if (kind === 'replica-stop') {
    slot.signal('SIGSTOP');
    slot.frozen = true;
    await sleep(durationMs);
    slot.signal('SIGCONT');
    slot.frozen = false;
    return;
  }
  slot.signal(kind === 'replica-kill' ? 'SIGKILL' : 'SIGTERM');
  const exit = await Promise.race([proc.exited, sleep(TERM_EXIT_TIMEOUT_MS).then(() => 'timeout')]);
  if (exit === 'timeout') {
    note(`did not exit within ${TERM_EXIT_TIMEOUT_MS} ms of SIGTERM: SIGKILLed`);
    slot.signal('SIGKILL');
    await proc.exited;
  } else if (kind === 'replica-term' && exit !== 0) {
    // Before its handler is installed (still starting), SIGTERM ends the process: no resign.
    const started = proc.lines.some((l) => l.msg === 'http server listening');
    note(`exited with ${exit} after SIGTERM (${started ? 'after' : 'before'} its start completed)`);
  }
  await sleep(durationMs);
  restart(slot);
}

/**
 * Runs one fault to its end. A service that does not start again is restored as far as possible and the
 * fault recorded as `notApplied`. @throws on any other harness failure (runSchedule records it likewise).
 */
export async function applyFault(
  world: NemesisWorld,
  e: NemesisEvent,
  hooks: ScheduleHooks = {},
): Promise<FaultRecord> {
  const now = () => world.server.clock.now();
  const startedAtMs = now();
  let note: string | undefined;
  let notApplied: string | undefined;
  let leaders: LeaderSample[] | undefined;
  const api = async (spec: FaultSpec) => {
    world.server.faults.inject({ ...spec, durationMs: e.durationMs });
    await sleep(e.durationMs);
  };
  switch (e.kind) {
    case 'replica-kill':
    case 'replica-term':
    case 'replica-stop': {
      // The leader if it is free, else the planned slot, else (an earlier fault took the planned one in the
      // leader's stead) another free one: as many slots are in process faults as the plan has, never all.
      // In a two-cluster world, the leader of one cluster or the other, by turns.
      const leader = e.leaderOf ? await world.leaderOf(e.leaderOf, e.id % world.servers.length) : undefined;
      const planned = world.slots[e.replica];
      const slot = [leader, planned, ...world.slots].find((s) => s && !s.busy && !s.cutForGood);
      if (e.leaderOf || slot !== planned)
        note = `hit ${slot?.id}${slot && slot === leader ? `, the leader of ${e.leaderOf}` : ''}`;
      const proc = slot?.current;
      if (!slot || !proc) {
        note = 'no process to signal';
        break;
      }
      slot.busy = true;
      try {
        await processFault(e.kind, e.durationMs, slot, proc, (n) => {
          note = note ? `${note}; ${n}` : n;
        });
      } finally {
        slot.busy = false;
      }
      break;
    }
    case 'retention-change': {
      // The planned slot, else another free one (a process fault placed in a leader's stead may hold it).
      const slot = [world.slots[e.replica], ...world.slots].find((s) => s && !s.busy);
      if (!slot) {
        note = 'no free replica';
        break;
      }
      if (slot !== world.slots[e.replica]) note = `hit ${slot.id}`;
      const off = (n: string) => {
        note = note ? `${note}; ${n}` : n;
      };
      slot.busy = true;
      try {
        await restartWith(slot, { SDC_RETENTION: `${e.retentionMs}ms` }, off);
        await sleep(e.durationMs);
        await restartWith(slot, undefined, off);
      } finally {
        slot.busy = false;
      }
      break;
    }
    case 'clock-step': {
      const clock = world.slots[e.replica]?.clock;
      if (!clock) throw new Error(`r${e.replica} does not run under libfaketime`);
      if (e.onceLeading) {
        const slot = world.slots[e.replica];
        const waitUntil = now() + e.durationMs;
        const leads = async () =>
          (await Promise.all((e.onceLeading ?? []).map((ns) => world.leaderOf(ns)))).some((s) => s === slot);
        while (now() < waitUntil && !(await leads())) await sleep(250);
        note = (await leads()) ? 'stepped while it led a target' : 'stepped; it led no target';
      }
      clock.step(e.offsetSeconds);
      await sleep(e.durationMs);
      clock.step(0);
      break;
    }
    case 'etcd-kill': {
      const front = world.etcdFront;
      if (!front) throw new Error(`etcd-kill needs etcd, not ${world.leadership}`);
      // Restarted on fresh ports (the old one may have been taken meanwhile), the proxy repointed.
      await front.kill();
      await sleep(e.durationMs);
      notApplied = await restartOrRestore(() => front.restart());
      note = `etcd now on port ${front.etcd.members[0]?.port}`;
      break;
    }
    case 'zookeeper-kill': {
      const front = world.zookeeperFront;
      if (!front) throw new Error(`zookeeper-kill needs ZooKeeper, not ${world.leadership}`);
      notApplied = await front.serially(async () => {
        await front.kill();
        await sleep(e.durationMs);
        return restartOrRestore(() => front.restart());
      });
      break;
    }
    case 'zookeeper-drop-answers': {
      const front = world.zookeeperFront;
      if (!front) throw new Error(`zookeeper-drop-answers needs ZooKeeper, not ${world.leadership}`);
      const lost = await front.dropAnswers({ count: e.count, durationMs: e.durationMs, holdMs: e.holdMs });
      note = `${lost} create answer(s) lost`;
      break;
    }
    case 'zookeeper-follower-cut': {
      const cut = await cutFollower(world, e);
      ({ note, notApplied, leaders } = cut);
      break;
    }
    case 'etcd-drop-answers': {
      const proxy = world.etcdProxy;
      if (!proxy) throw new Error(`etcd-drop-answers needs etcd, not ${world.leadership}`);
      const lost = await proxy.dropAnswers({
        path: e.path,
        count: e.count,
        durationMs: e.durationMs,
        mode: e.mode,
        holdMs: e.holdMs,
      }).done;
      note = `${lost} answer(s) lost`;
      break;
    }
    case 'redis-restart': {
      const front = world.redisFront;
      if (!front) throw new Error(`redis-restart needs single mode, not ${world.redisMode}`);
      notApplied = await restartOrRestore(() => front.restartEmpty());
      note = `redis now on port ${world.redis?.port}`;
      break;
    }
    case 'redis-pause': {
      const redis = world.redis;
      if (!redis) throw new Error(`redis-pause needs single mode, not ${world.redisMode}`);
      redis.pause();
      await sleep(e.durationMs);
      redis.resume();
      break;
    }
    case 'redis-path-cut': {
      // The leader if its path is not cut already, else the planned slot, else another one not cut.
      const leader = e.leaderOf ? await world.leaderOf(e.leaderOf) : undefined;
      const uncut = (s: ReplicaSlot | undefined) =>
        s?.redisPath !== undefined && s.redisPath.cut === undefined;
      const slot = e.forGood
        ? world.slots[e.replica]
        : [leader, world.slots[e.replica], ...world.slots].find((s) => uncut(s) && !s?.cutForGood);
      const path = slot?.redisPath;
      if (!slot || !path) throw new Error(`redis-path-cut needs single mode, not ${world.redisMode}`);
      note = `${slot.id}${slot === leader ? `, the leader of ${e.leaderOf}` : ''}`;
      if (e.forGood) slot.cutForGood = true;
      if (e.how === 'wedge') path.wedge();
      else await path.refuse();
      await sleep(e.durationMs);
      if (e.forGood) note += ', left cut until the run is judged';
      else await path.heal();
      break;
    }
    case 'redis-sentinel-failover': {
      const sentinel = world.sentinel;
      if (!sentinel) throw new Error(`redis-sentinel-failover needs sentinel mode, not ${world.redisMode}`);
      const oldPort = sentinel.masterPort();
      const old = sentinel.nodes.find((n) => n.port === oldPort);
      if (!old) throw new Error(`no Sentinel master known (the sentinels name ${oldPort})`);
      await old.kill();
      const promoted = await sentinel.waitForNewMaster(old.port, FAILOVER_TIMEOUT_MS);
      const promotedAfterMs = now() - startedAtMs;
      await sleep(e.durationMs);
      await old.restartAsReplicaOf(promoted);
      // Both replicas synced again: the next failover has a replica to promote.
      await sentinel.waitForReplicas(2, FAILOVER_TIMEOUT_MS);
      note = `master ${old.port} killed; ${promoted} promoted after ${promotedAfterMs} ms; ${old.port} back as its replica`;
      break;
    }
    case 'redis-cluster-master-kill': {
      const cluster = world.redisCluster;
      if (!cluster) throw new Error(`redis-cluster-master-kill needs cluster mode, not ${world.redisMode}`);
      // Any key with the queue's hash tag lives in the queue's slot.
      const key = `x:${queueName({ cluster: world.server.clusterName, namespace: e.namespace })}:x`;
      const masterPort = cluster.masterPortOf(key);
      const master = cluster.servers.find((x) => x.port === masterPort);
      if (!master) throw new Error(`no master serves ${e.namespace}'s queue slot (${masterPort})`);
      await master.kill();
      const promoted = await cluster.waitForFailover(key, master.port, FAILOVER_TIMEOUT_MS);
      const promotedAfterMs = now() - startedAtMs;
      await sleep(e.durationMs);
      await master.restart();
      // Back in sync as the new master's replica: the shard can fail over again.
      const end = performance.now() + FAILOVER_TIMEOUT_MS;
      while (!cluster.replicaOnline(master.port)) {
        if (performance.now() > end)
          throw new Error(
            `${master.port} not an online replica within ${FAILOVER_TIMEOUT_MS} ms of its restart`,
          );
        await sleep(200);
      }
      note = `master ${master.port} of ${e.namespace}'s slot killed; ${promoted} promoted after ${promotedAfterMs} ms; ${master.port} back as its replica`;
      break;
    }
    case 'api-status':
      await api({
        verb: e.verb,
        path: podsOf(e.namespace),
        status: e.status,
        retryAfterSeconds: e.retryAfterSeconds,
      });
      break;
    case 'api-reset':
      await api({ verb: e.verb, path: podsOf(e.namespace), reset: true });
      break;
    case 'api-slow':
      await api({ verb: e.verb, path: podsOf(e.namespace), latencyMs: e.latencyMs });
      break;
    case 'delete-outage':
      await api({ verb: 'delete', path: podsOf(e.namespace), status: 503 });
      break;
    case 'api-drop-watches':
      // The watches open now end (after a compaction their resume gets 410), and new ones for a while.
      if (e.compact) world.server.compact();
      world.server.dropWatches();
      await api({ verb: 'watch', path: podsOf(e.namespace), dropWatch: true });
      break;
    case 'api-stall-watches': {
      // Drivers that finish now (due a retention, 3 s, later), seen by the informers before the stall; a
      // person deletes them as it starts. Their jobs come due during the stall, with a cache that still shows
      // them undeleted: only the handler's re-check stands between them and a DELETE.
      const person = hooks.person;
      const held = person?.heldDrivers(e.namespace, STALL_HELD_PODS) ?? [];
      await sleep(STALL_LEAD_MS);
      world.server.stallWatches(e.durationMs, e.namespace);
      person?.personDelete(held);
      await sleep(e.durationMs);
      person?.release(held);
      note = person ? `${held.length} held driver(s) deleted by a person` : 'no workload: stall only';
      break;
    }
  }
  return { event: e, startedAtMs, endedAtMs: now(), note, notApplied, ...(leaders ? { leaders } : {}) };
}

/** Hooks of {@link runSchedule}. */
export interface ScheduleHooks {
  /** Called as each fault starts and ends. */
  onEvent?: (phase: 'start' | 'end', e: NemesisEvent, rec?: FaultRecord) => void;
  /**
   * Called `leadMs` before each fault on a replica process (SIGKILL, SIGSTOP, SIGTERM): the workload drops a
   * burst of due pods then, so that the process is hit with DELETEs in flight or queued in its rate limiter.
   */
  beforeProcessFault?: { leadMs: number; run: (e: NemesisEvent) => void };
  /** The person of a watch stall: drivers created before it, deleted as it starts, released after it. */
  person?: Pick<NemesisWorkload, 'heldDrivers' | 'personDelete' | 'release'>;
}

/** Drivers a person deletes at the start of each watch stall. */
const STALL_HELD_PODS = 4;
/** From their creation to the stall, ms: the informers see them (and enqueue their jobs) first. */
const STALL_LEAD_MS = 1500;

/**
 * Runs the whole schedule from now: each fault at its offset (by the monotonic clock), overlapping as
 * planned. Resolves when every fault has ended, with one record per fault: a fault the harness could not
 * apply (its injector threw, or a service did not start again) has `notApplied` — the run is still judged.
 */
export async function runSchedule(
  world: NemesisWorld,
  events: readonly NemesisEvent[],
  hooks: ScheduleHooks = {},
): Promise<FaultRecord[]> {
  const t0 = performance.now();
  const onEvent = hooks.onEvent ?? (() => {});
  const before = hooks.beforeProcessFault;
  const settled = await Promise.allSettled(
    events.map(async (e) => {
      if (before && (e.kind === 'replica-kill' || e.kind === 'replica-stop' || e.kind === 'replica-term')) {
        await sleep(Math.max(0, t0 + e.atMs - before.leadMs - performance.now()));
        before.run(e);
      }
      await sleep(Math.max(0, t0 + e.atMs - performance.now()));
      onEvent('start', e);
      const startedAtMs = world.server.clock.now();
      const rec = await applyFault(world, e, hooks).catch(
        (err: Error): FaultRecord => ({
          event: e,
          startedAtMs,
          endedAtMs: world.server.clock.now(),
          notApplied: err.message.split('\n')[0],
        }),
      );
      onEvent('end', e, rec);
      return rec;
    }),
  );
  return settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
}
