/**
 * What a replica says when its ZooKeeper connect string is wrong, on a real ZooKeeper: no server answers (a
 * warn line after a session timeout, naming the connect string), or its chroot does not exist (the
 * registration's "no node" comes with the fix); and with a chroot that exists, every node goes below it.
 */
import { describe, expect, it } from 'vitest';
import { freePort } from '../../harness/sandbox/local-services.ts';
import { monotonicClock } from '../../src/clock.ts';
import { createZooKeeperLeadershipGroup } from '../../src/leadership/zookeeper/backend.ts';
import { createZkHandle, ZK_MODE } from '../../src/leadership/zookeeper/client.ts';
import { NO_CHROOT_FIX } from '../../src/leadership/zookeeper/session.ts';
import { zookeeperMembersDir } from '../../src/queue/job-identity.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';
import { useZooKeeper } from '../helpers/zookeeper.ts';

const zk = useZooKeeper();

function group(connect: string) {
  const { log, lines } = memoryLogger();
  const g = createZooKeeperLeadershipGroup({
    membersDir: zookeeperMembersDir('/spark-driver-cleaner', 'test'),
    settings: { connect, root: '/spark-driver-cleaner', sessionTimeoutMs: 1000 },
    replicaId: 'zc1',
    log,
    monotonicNow: monotonicClock,
  });
  g.start();
  return { g, lines };
}

describe('zookeeper connect string', () => {
  it('no server answers → a warn line naming the connect string after a session timeout, not before', async () => {
    const connect = `127.0.0.1:${await freePort()}`;
    const { g, lines } = group(connect);
    try {
      const said = () => lines.filter((l) => String(l.msg).startsWith('cannot connect to zookeeper'));
      const line = await waitFor('the unreachable warning', () => said()[0], 10_000);
      expect(line.level).toBe('warn');
      expect(line.connect).toBe(connect);
      expect(Number(line.waitedMs)).toBeGreaterThanOrEqual(1000);
      expect(said()).toHaveLength(1); // then at most once a minute
    } finally {
      await g.close();
    }
  });

  it('a chroot that does not exist → registering fails with the fix; once it exists, the nodes go below it', async () => {
    const chroot = '/apps-cleaner';
    const { g, lines } = group(`${zk().connect}${chroot}`);
    try {
      const refused = await waitFor(
        'a refused registration',
        () => lines.find((l) => l.msg === 'cannot register with zookeeper; reconnecting'),
        15_000,
      );
      expect(String((refused.err as { message?: string }).message)).toMatch(/^-101 /);
      expect(refused.fix).toBe(NO_CHROOT_FIX);
      expect(String(refused.fix)).toMatch(/^the chroot of zookeeper .* does not exist/);

      const admin = createZkHandle(zk().connect, 4000);
      await new Promise<void>((resolve) => {
        admin.on('connect', () => resolve());
        admin.init({});
      });
      try {
        await admin.create(chroot, '', ZK_MODE.persistent);
        await waitFor(
          'registered below the chroot',
          async () =>
            (
              await admin
                .get_children(`${chroot}${zookeeperMembersDir('/spark-driver-cleaner', 'test')}`, false)
                .catch((): string[] => [])
            ).includes('zc1'),
          20_000,
        );
        expect((await admin.get_children('/', false)).sort()).toEqual(['apps-cleaner', 'zookeeper']);
      } finally {
        admin.close();
      }
    } finally {
      await g.close();
    }
  });
});
