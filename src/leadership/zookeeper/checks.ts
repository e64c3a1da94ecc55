/**
 * The checks of ZooKeeper, the other leadership backend: a session opens (with the digest user when one is
 * configured); `zookeeperRoot` lies outside Kyuubi's namespace — not only `/kyuubi` (refused by the
 * configuration) but any namespace found in this ZooKeeper: a node on the root's path whose children are Kyuubi
 * server registrations (`serverUri=host:port;version=…;sequence=…`, Kyuubi's ZooKeeper discovery), since Kyuubi
 * reads every child of its `kyuubi.ha.namespace` as a server address; and the replicas may write and read
 * there: an ephemeral probe node (`check-<random>`, the replicas' ACL) created in the root — or, when the root
 * does not exist yet, in its nearest existing parent, where the first replica will create it — read back and
 * deleted. An ephemeral node goes with the session anyway.
 */
import { randomUUID } from 'node:crypto';
import { type CheckResult, firstLine, resultsOf } from '../../check-result.ts';
import type { CleanerConfig } from '../../config/schema.ts';
import { withTimeout } from '../../with-timeout.ts';
import {
  addDigestAuth,
  CREATOR_ALL_ACL,
  createNode,
  createZkHandle,
  OPEN_ACL_UNSAFE,
  statOf,
  ZK_ERR,
  ZK_MODE,
  type ZkHandle,
  zkCode,
} from './client.ts';

/** The name of a Kyuubi server's (or engine's) registration node in its namespace. */
const KYUUBI_REGISTRATION = /^serverUri=[^;]+;version=/;

/** `/a/b/c` → `['/', '/a', '/a/b', '/a/b/c']`. */
function pathAndAncestors(path: string): string[] {
  const parts = path.split('/').filter(Boolean);
  return ['/', ...parts.map((_, i) => `/${parts.slice(0, i + 1).join('/')}`)];
}

/** Runs the ZooKeeper checks; never rejects. `answered` is false when no session could be opened. */
export async function checkZooKeeper(
  zk: NonNullable<CleanerConfig['zookeeper']>,
  timeoutMs: number,
): Promise<{ results: CheckResult[]; answered: boolean }> {
  const r = resultsOf('zookeeper');
  const out: CheckResult[] = [];
  const h = createZkHandle(zk.connect, Math.max(4000, timeoutMs * 2));
  const connected = new Promise<void>((resolve) => h.on('connect', () => resolve()));
  h.init({});
  const authed = zk.auth ? addDigestAuth(h, zk.auth) : Promise.resolve();
  try {
    try {
      await withTimeout(connected, timeoutMs, 'connecting');
    } catch (err) {
      out.push(
        r.unreachable(
          'zookeeper.reachable',
          `reachable: no server of ${zk.connect} answers: ${firstLine(err)}`,
          {
            fix: 'check zookeeper (--zookeeper, SDC_ZOOKEEPER), that the quorum runs, and that the NetworkPolicy lets the pods reach it (2181)',
          },
        ),
      );
      out.push(r.skip('zookeeper.root', 'root: skipped: ZooKeeper did not answer'));
      return { results: out, answered: false };
    }
    out.push(
      r.pass('zookeeper.reachable', `reachable: a session is open on ${zk.connect} (session ${h.client_id})`),
    );
    if (zk.auth) {
      try {
        await withTimeout(authed, timeoutMs, 'digest authentication');
        out.push(
          r.pass(
            'zookeeper.auth',
            `authentication: digest user ${JSON.stringify(zk.auth.split(':')[0])} accepted`,
          ),
        );
      } catch (err) {
        out.push(
          r.fail('zookeeper.auth', `authentication: refused: ${firstLine(err)}`, {
            fix: 'zookeeperAuth (--zookeeper-auth) or zookeeperAuthFile: user:password of the digest user',
          }),
        );
        return { results: out, answered: true };
      }
    }
    out.push(await kyuubiNamespaceCheck(h, zk.root, timeoutMs, r));
    out.push(await probeRoot(h, zk, timeoutMs, r));
    return { results: out, answered: true };
  } catch (err) {
    out.push(
      r.unreachable('zookeeper.root', `ZooKeeper stopped answering: ${firstLine(err)}`, {
        fix: 'check the quorum, then run check again',
      }),
    );
    return { results: out, answered: false };
  } finally {
    try {
      h.close();
    } catch {
      // already closed
    }
  }
}

/** Fails when a node on the root's path holds Kyuubi registrations (see the module comment). */
async function kyuubiNamespaceCheck(
  h: ZkHandle,
  root: string,
  timeoutMs: number,
  r: ReturnType<typeof resultsOf>,
): Promise<CheckResult> {
  for (const path of pathAndAncestors(root).slice(1)) {
    let children: string[];
    try {
      children = await withTimeout(h.get_children(path, false), timeoutMs, `listing ${path}`);
    } catch (err) {
      const code = zkCode(err);
      if (code === ZK_ERR.noNode) break;
      if (code === ZK_ERR.noAuth) continue;
      throw err;
    }
    const registration = children.find((c) => KYUUBI_REGISTRATION.test(c));
    if (registration)
      return r.fail(
        'zookeeper.kyuubi-namespace',
        `Kyuubi's namespace: zookeeperRoot ${root} is inside ${path}, which holds Kyuubi server registrations (${registration}): Kyuubi reads every child there as a server address`,
        {
          fix: `set zookeeperRoot (--zookeeper-root, SDC_ZOOKEEPER_ROOT) outside ${path}, e.g. /spark-driver-cleaner`,
          details: { root, namespace: path, registration },
        },
      );
  }
  return r.pass(
    'zookeeper.kyuubi-namespace',
    `Kyuubi's namespace: no Kyuubi registrations on the path of ${root}`,
  );
}

/** Creates, reads and deletes an ephemeral probe node in the root (or its nearest existing parent). */
async function probeRoot(
  h: ZkHandle,
  zk: NonNullable<CleanerConfig['zookeeper']>,
  timeoutMs: number,
  r: ReturnType<typeof resultsOf>,
): Promise<CheckResult> {
  const paths = pathAndAncestors(zk.root);
  let at: string | undefined;
  for (const p of [...paths].reverse()) {
    if (await withTimeout(statOf(h, p), timeoutMs, `reading ${p}`)) {
      at = p;
      break;
    }
  }
  if (at === undefined)
    return r.fail('zookeeper.root', `root: the chroot of ${zk.connect} does not exist`, {
      fix: 'create the chroot, or drop it from the connect string (the replicas do not create it)',
    });
  const probe = `${at === '/' ? '' : at}/check-${randomUUID()}`;
  const acl = zk.auth ? CREATOR_ALL_ACL : OPEN_ACL_UNSAFE;
  try {
    await withTimeout(createNode(h, probe, 'check', ZK_MODE.ephemeral, acl), timeoutMs, 'creating the probe');
    const [, data] = await withTimeout(h.get(probe, false), timeoutMs, 'reading the probe');
    await withTimeout(h.delete_(probe, -1), timeoutMs, 'deleting the probe');
    if (String(data) !== 'check') throw new Error(`read back ${JSON.stringify(String(data))}`);
  } catch (err) {
    if (zkCode(err) !== ZK_ERR.noAuth) throw err;
    return r.fail(
      'zookeeper.root',
      `root ${zk.root}: ZooKeeper refuses ${zk.auth ? 'this digest user' : 'an unauthenticated client'} creating nodes in ${at} (${firstLine(err)})`,
      {
        fix: "its nodes belong to another digest user: set zookeeperAuth (or zookeeperAuthFile) to the replicas' user:password, or choose another zookeeperRoot",
        details: { root: zk.root, at },
      },
    );
  }
  return at === zk.root
    ? r.pass('zookeeper.root', `root ${zk.root}: nodes can be created, read and deleted in it`)
    : r.pass(
        'zookeeper.root',
        `root ${zk.root}: does not exist yet; the replicas can create it (nodes can be created in ${at})`,
        {
          details: { root: zk.root, at },
        },
      );
}
