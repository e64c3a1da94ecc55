/**
 * The leadership backends the contract suites run against, behind one factory: a real etcd and a real
 * ZooKeeper, each started on free ports. A suite asks its backend for replica groups, election prefixes and
 * counts (live sessions in the store), so the same cases run on both.
 */
import { Etcd3 } from 'etcd3';
import { type LocalEtcd, startEtcd } from '../../harness/sandbox/local-services.ts';
import { fourLetters, type LocalZooKeeper, startZooKeeper } from '../../harness/sandbox/local-zookeeper.ts';
import { monotonicClock } from '../../src/clock.ts';
import type { BackendElection } from '../../src/leadership/backend.ts';
import { createEtcdLeadershipGroup } from '../../src/leadership/etcd/backend.ts';
import type { LeadershipGroup } from '../../src/leadership/leadership-group.ts';
import { createZooKeeperLeadershipGroup } from '../../src/leadership/zookeeper/backend.ts';
import { createZkHandle, type ZkHandle } from '../../src/leadership/zookeeper/client.ts';
import type { Logger } from '../../src/log.ts';
import {
  electionPrefix,
  membersPrefix,
  type TargetRef,
  zookeeperElectionPrefix,
  zookeeperMembersDir,
} from '../../src/queue/job-identity.ts';

/** The session length of the tests: etcd TTL 2 s, ZooKeeper session timeout 2 s. */
export const TEST_SESSION_SECONDS = 2;
/** The ZooKeeper root of the tests. */
export const TEST_ZOOKEEPER_ROOT = '/sdc-test';

/** One replica's leaderships on a backend. */
export interface TestGroup {
  readonly group: LeadershipGroup<BackendElection>;
  /** Closes the group and its client. */
  close(): Promise<void>;
}

/** A backend for the contract suites. */
export interface TestBackend {
  readonly name: 'etcd' | 'zookeeper';
  start(): Promise<void>;
  stop(): Promise<void>;
  /**
   * A replica's group (not started). `monotonicNow`: its monotonic clock, ms (default the real one; a test
   * moves it forward to stand for a process frozen that long).
   */
  group(
    replicaId: string,
    log: Logger,
    opts?: { balanced?: boolean; monotonicNow?: () => number },
  ): TestGroup;
  /** The election prefix of a target. */
  prefix(t: TargetRef): string;
  /** Live replica sessions in the store now (etcd: leases; ZooKeeper: membership nodes). */
  sessions(): Promise<number>;
  /** Candidates in an election now, read from the store. */
  candidates(prefix: string): Promise<number>;
  /**
   * Requests the server has received so far, by its own count: etcd's ranges (`etcd_mvcc_range_total` of its
   * `/metrics`), ZooKeeper's packets (`Received` of `srvr`, pings included). For comparing before and after.
   */
  requestCount(): Promise<number>;
  /** Deletes the election's first candidate (the leader's key or node) behind the replicas' backs. */
  deleteLeader(prefix: string): Promise<void>;
  /** The first argument of test/helpers/leadership-group-process.ts for this backend. */
  processTarget(): string;
}

/** Runs `fn` on a short-lived ZooKeeper handle of its own. */
async function withZk<T>(connect: string, fn: (h: ZkHandle) => Promise<T>): Promise<T> {
  const h = createZkHandle(connect, 4000);
  const ready = new Promise<void>((resolve) => h.on('connect', () => resolve()));
  h.init({});
  try {
    await ready;
    return await fn(h);
  } finally {
    h.close();
  }
}

/** A read of a ZooKeeper node's children ([] when it does not exist). */
const zkChildren = (connect: string, path: string) =>
  withZk(connect, (h) => h.get_children(path, false).catch(() => [] as string[]));

export function etcdBackend(): TestBackend {
  let etcd: LocalEtcd | undefined;
  let probe: Etcd3 | undefined;
  const need = () => {
    if (!etcd || !probe) throw new Error('etcd backend not started');
    return { etcd, probe };
  };
  return {
    name: 'etcd',
    async start() {
      etcd = await startEtcd();
      probe = new Etcd3({ hosts: etcd.endpoints });
    },
    async stop() {
      probe?.close();
      await etcd?.stop();
    },
    group(replicaId, log, opts = {}) {
      const client = new Etcd3({ hosts: need().etcd.endpoints });
      const group = createEtcdLeadershipGroup({
        membersPrefix: membersPrefix('test'),
        client,
        replicaId,
        ttlSeconds: TEST_SESSION_SECONDS,
        log,
        monotonicNow: opts.monotonicNow ?? monotonicClock,
        balanced: opts.balanced,
      });
      return {
        group,
        async close() {
          await group.close();
          client.close();
        },
      };
    },
    prefix: electionPrefix,
    async sessions() {
      return (await need().probe.leaseClient.leaseLeases()).leases.length;
    },
    async candidates(prefix) {
      return (await need().probe.getAll().prefix(prefix).keys()).length;
    },
    async requestCount() {
      const text = await (await fetch(`${need().etcd.endpoints[0]}/metrics`)).text();
      return Number(/^etcd_mvcc_range_total (\d+)/m.exec(text)?.[1] ?? Number.NaN);
    },
    async deleteLeader(prefix) {
      const first = (await need().probe.getAll().prefix(prefix).sort('Create', 'Ascend').limit(1).keys())[0];
      if (first) await need().probe.delete().key(first).exec();
    },
    processTarget: () => `etcd:${need().etcd.endpoints.join(',')}`,
  };
}

export function zookeeperBackend(): TestBackend {
  let zk: LocalZooKeeper | undefined;
  const connect = () => {
    if (!zk) throw new Error('zookeeper backend not started');
    return zk.connect;
  };
  return {
    name: 'zookeeper',
    async start() {
      zk = await startZooKeeper();
    },
    async stop() {
      await zk?.stop();
    },
    group(replicaId, log, opts = {}) {
      const group = createZooKeeperLeadershipGroup({
        membersDir: zookeeperMembersDir(TEST_ZOOKEEPER_ROOT, 'test'),
        settings: {
          connect: connect(),
          root: TEST_ZOOKEEPER_ROOT,
          sessionTimeoutMs: TEST_SESSION_SECONDS * 1000,
        },
        replicaId,
        log,
        monotonicNow: opts.monotonicNow ?? monotonicClock,
        balanced: opts.balanced,
      });
      return { group, close: () => group.close() };
    },
    prefix: (t) => zookeeperElectionPrefix(TEST_ZOOKEEPER_ROOT, t),
    async sessions() {
      return (await zkChildren(connect(), zookeeperMembersDir(TEST_ZOOKEEPER_ROOT, 'test'))).length;
    },
    async candidates(prefix) {
      return (await zkChildren(connect(), prefix.replace(/\/$/, ''))).length;
    },
    async requestCount() {
      const port = Number(connect().split(',')[0]?.split(':')[1]);
      return Number(/^Received: (\d+)/m.exec(await fourLetters(port, 'srvr'))?.[1] ?? Number.NaN);
    },
    deleteLeader: (prefix) =>
      withZk(connect(), async (h) => {
        const dir = prefix.replace(/\/$/, '');
        const line = (await h.get_children(dir, false)).sort(
          (a, b) => Number(a.slice(-10)) - Number(b.slice(-10)),
        );
        if (line[0]) await h.delete_(`${dir}/${line[0]}`, -1);
      }),
    processTarget: () => `zookeeper:${connect()}`,
  };
}

/** Both backends, for `describe.each`. */
export const leadershipBackends = (): TestBackend[] => [etcdBackend(), zookeeperBackend()];
