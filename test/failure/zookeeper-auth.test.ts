/**
 * Replica processes electing on a real ZooKeeper with digest authentication (`SDC_ZOOKEEPER_AUTH`, and
 * `SDC_ZOOKEEPER_AUTH_FILE`): they lead and delete each pod once; every node they created under the root
 * carries the digest ACL of their user only, from its creation (ACL version 0: never open, then changed); a session without authentication, or with the wrong password,
 * can neither remove nor change a candidate or member node nor join the election; `status` reads the leader
 * with the same authentication and, without it, exits 3 naming the field.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI_PATH } from '../../harness/sandbox/replica-process.ts';
import {
  CREATOR_ALL_ACL,
  createNode,
  createZkHandle,
  ZK_MODE,
  type ZkAcl,
  type ZkHandle,
  zkCode,
} from '../../src/leadership/zookeeper/client.ts';
import { ZOOKEEPER_DEFAULT_ROOT } from '../../src/leadership/zookeeper/session.ts';
import { zookeeperMembersDir } from '../../src/queue/job-identity.ts';
import { deletesPer, serviceEnv } from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  firstLeader,
  replicaEnv,
  stopAll,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const cluster = useFailureCluster();
const zk = useZooKeeper();
const open: ZkHandle[] = [];
afterAll(() => {
  for (const h of open) h.close();
});

const USER = 'cleaner';
const PASSWORD = 's3cret';
/** The identity ZooKeeper's digest scheme records: `user:base64(sha1(user:password))`. */
const DIGEST_ID = `${USER}:${createHash('sha1').update(`${USER}:${PASSWORD}`).digest('base64')}`;
const ROOT = ZOOKEEPER_DEFAULT_ROOT;
const NOAUTH = -102;

/** A connected session of the binding, authenticated with `digest` when given. */
async function session(digest?: string): Promise<ZkHandle> {
  const h = createZkHandle(zk().connect, 10_000);
  open.push(h);
  const up = new Promise<void>((resolve) => h.on('connect', () => resolve()));
  h.init({});
  await up;
  if (digest)
    await new Promise<void>((resolve, reject) =>
      h.add_auth('digest', digest, (rc, err) => (rc === 0 ? resolve() : reject(new Error(`${rc} ${err}`)))),
    );
  return h;
}

/** Every node at and under `path`. */
async function walk(h: ZkHandle, path: string): Promise<string[]> {
  const kids = await h.get_children(path, false);
  const below = await Promise.all(kids.map((k) => walk(h, `${path}/${k}`)));
  return [path, ...below.flat()];
}

/** The error code a call rejected with (0: it succeeded). */
const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 0,
    (err: unknown) => zkCode(err),
  );

/** Runs `src/cli.ts <args>`; resolves with its exit code, stdout and stderr. */
function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_PATH, ...args],
      { env: { ...process.env, ...env, SDC_LOG_LEVEL: 'silent' }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('replicas on ZooKeeper with digest authentication', () => {
  it('lead and delete each pod once; their nodes are theirs only; status reads with the same user', async () => {
    const ns = 'zk-auth';
    const authFile = join(mkdtempSync(join(tmpdir(), 'sdc-zk-auth-')), 'digest');
    writeFileSync(authFile, `${USER}:${PASSWORD}\n`);
    const env = (extra: Record<string, string>) =>
      replicaEnv(cluster(), ns, 'zka', {
        SDC_ETCD_ENDPOINTS: '',
        SDC_ZOOKEEPER: zk().connect,
        SDC_ELECTION_TTL_SECONDS: '10',
        ...extra,
      });
    const replicas = [
      cluster().startReplica('za1', env({ SDC_ZOOKEEPER_AUTH: `${USER}:${PASSWORD}` })),
      cluster().startReplica('za2', env({ SDC_ZOOKEEPER_AUTH_FILE: authFile })),
    ];
    const server = cluster().server;
    try {
      const leader = await firstLeader(replicas, ns);
      const pods = createDrivers(server, ns, 10, 'za', 10_000);
      const uids = pods.map(uidOf);
      await waitGone(server, pods, 'every driver pod deleted');
      expect(deletesPer(server, uids)).toEqual(uids.map(() => 1));
      expect(checkInvariants(server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);

      // Every node under the root, the root included, carries the digest ACL of the cleaner's user only.
      const owner = await session(`${USER}:${PASSWORD}`);
      const nodes = await walk(owner, ROOT);
      const membersDir = zookeeperMembersDir(ROOT, cluster().clusterName);
      const members = nodes.filter((p) => p.startsWith(`${membersDir}/`));
      const candidates = nodes.filter((p) => /\/_c_[^/]+-latch-\d+$/.test(p));
      expect(members.sort()).toEqual([`${membersDir}/za1`, `${membersDir}/za2`]);
      expect(candidates.length).toBeGreaterThanOrEqual(1);
      const leaderNode = candidates.find((p) => p.includes(`-${leader.id}-latch-`));
      if (!leaderNode) throw new Error(`no candidate node of ${leader.id} in ${candidates.join(', ')}`);
      const electionDir = leaderNode.replace(/\/[^/]+$/, '');
      const only: ZkAcl[] = [{ perms: 31, scheme: 'digest', auth: DIGEST_ID }];
      const acls = await Promise.all(nodes.map(async (p) => [p, ...(await owner.get_acl(p))] as const));
      expect(acls.filter(([, acl]) => JSON.stringify(acl) !== JSON.stringify(only))).toEqual([]);
      // Created with that ACL in the same request: a node created open and protected after has ACL version 1.
      expect(acls.filter(([, , stat]) => stat.aversion !== 0).map(([p]) => p)).toEqual([]);

      // Without authentication, or with the wrong password: no change to the cleaner's nodes, no candidacy,
      // no read of the line.
      for (const digest of [undefined, `${USER}:wrong`]) {
        const other = await session(digest);
        const tries = {
          deleteCandidate: await codeOf(other.delete_(leaderNode, -1)),
          setCandidate: await codeOf(other.set(leaderNode, 'x', -1)),
          deleteMember: await codeOf(other.delete_(`${membersDir}/${leader.id}`, -1)),
          setMember: await codeOf(other.set(`${membersDir}/${leader.id}`, 'x', -1)),
          joinElection: await codeOf(
            other.create(`${electionDir}/_c_x-intruder-latch-`, 'intruder', ZK_MODE.ephemeralSequential),
          ),
          addMember: await codeOf(other.create(`${membersDir}/intruder`, 'x', ZK_MODE.ephemeral)),
          readLine: await codeOf(other.get_children(electionDir, false)),
          setAcl: await codeOf(
            other.set_acl(leaderNode, -1, [{ perms: 31, scheme: 'world', auth: 'anyone' }]),
          ),
        };
        expect({ digest, tries }).toEqual({
          digest,
          tries: Object.fromEntries(Object.keys(tries).map((k) => [k, NOAUTH])),
        });
      }
      expect(await walk(owner, ROOT)).toEqual(nodes);

      // status with the same user reads the leader; without it (or with a wrong password) it exits 3 naming
      // the field, as for a backend that refuses.
      const c = cluster();
      const base = { ...serviceEnv(c.server.kubeconfigPath, c.redis, c.etcd), ...env({}) };
      const ok = await cli(['status', '--json'], { ...base, SDC_ZOOKEEPER_AUTH_FILE: authFile });
      expect(ok.code).toBe(0);
      const json = JSON.parse(ok.stdout) as { targets: { leader: string | null }[] };
      expect(json.targets[0]?.leader).toBe(leader.id);
      for (const auth of [{}, { SDC_ZOOKEEPER_AUTH: `${USER}:wrong` }] as Record<string, string>[]) {
        const refused = await cli(['status'], { ...base, ...auth });
        expect(refused.code).toBe(3);
        expect(refused.stderr).toContain('zookeeperAuth (--zookeeper-auth, SDC_ZOOKEEPER_AUTH)');
        expect(refused.stderr).toContain('not authenticated');
        if (!auth.SDC_ZOOKEEPER_AUTH)
          console.info(`[failure] zookeeper auth: status without auth: ${refused.stderr.trim()}`);
      }
      console.info(
        `[failure] zookeeper auth: ${nodes.length} nodes under ${ROOT}, each with ${DIGEST_ID} only`,
      );
    } finally {
      await stopAll(replicas);
    }
  }, 120_000);

  it('a replica without the digest, under a root of the digest user → it says which field to set, leads nothing', async () => {
    const ns = 'zk-noauth';
    const root = '/owned-by-cleaner';
    const owner = await session(`${USER}:${PASSWORD}`);
    for (const p of [root, `${root}/members`]) {
      await createNode(owner, p, '', ZK_MODE.persistent, CREATOR_ALL_ACL);
    }
    const replica = cluster().startReplica(
      'zn1',
      replicaEnv(cluster(), ns, 'zkn', {
        SDC_ETCD_ENDPOINTS: '',
        SDC_ZOOKEEPER: zk().connect,
        SDC_ZOOKEEPER_ROOT: root,
      }),
    );
    try {
      const refusedLines = () =>
        replica.lines.filter((l) => l.msg === 'cannot register with zookeeper; reconnecting');
      await waitFor('the replica retried registering three times', () => refusedLines().length >= 3, 30_000);
      for (const l of refusedLines()) {
        expect(String((l.err as { message?: string })?.message)).toMatch(/^-102 /);
        expect(String(l.fix)).toContain('zookeeperAuth (--zookeeper-auth, SDC_ZOOKEEPER_AUTH)');
      }
      expect(
        replica.lines.filter((l) => l.msg === 'zookeeper session connected' || l.msg === 'elected leader'),
      ).toEqual([]);
      expect(await owner.get_children(`${root}/members`, false)).toEqual([]);
    } finally {
      await stopAll([replica]);
    }
  }, 60_000);
});
