/**
 * The ZooKeeper settings in their three forms (flag, SDC_* variable, config file): exactly one leadership
 * backend, the root kept outside Kyuubi's namespace, digest auth inline or from a file, masked when printed.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { redactConfig } from '../../src/config/redact.ts';

const base = { SDC_TARGETS: 'kind-a:spark' };

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  throw new Error('expected a ConfigError');
}

const file = (text: string) => {
  const p = join(mkdtempSync(join(tmpdir(), 'sdc-zkcfg-')), 'f');
  writeFileSync(p, text);
  return p;
};

describe('zookeeper configuration', () => {
  it('from the flag, the variable and the file alike, with the default root', () => {
    const want = { connect: 'zk1:2181,zk2:2181/apps', root: '/spark-driver-cleaner' };
    expect(loadConfig({ env: base, flags: { zookeeper: 'zk1:2181,zk2:2181/apps' } }).zookeeper).toMatchObject(
      want,
    );
    expect(loadConfig({ env: { ...base, SDC_ZOOKEEPER: 'zk1:2181,zk2:2181/apps' } }).zookeeper).toMatchObject(
      want,
    );
    expect(
      loadConfig({ file: file('zookeeper: zk1:2181,zk2:2181/apps\n'), env: base }).zookeeper,
    ).toMatchObject(want);
    expect(loadConfig({ env: base }).zookeeper).toBeUndefined();
  });

  it('etcdEndpoints and zookeeper together → refused, naming both', () => {
    expect(
      problems(() =>
        loadConfig({ env: { ...base, SDC_ZOOKEEPER: 'zk:2181', SDC_ETCD_ENDPOINTS: 'http://etcd:2379' } }),
      ).join('\n'),
    ).toMatch(/SDC_ZOOKEEPER: set together with etcdEndpoints.*set etcdEndpoints or zookeeper, not both/);
    // The shipped base sets the example etcd: the message says how to unset it.
    expect(
      problems(() =>
        loadConfig({ env: { ...base, SDC_ZOOKEEPER: 'zk:2181', SDC_ETCD_ENDPOINTS: 'http://etcd:2379' } }),
      ).join('\n'),
    ).toContain('SDC_ETCD_ENDPOINTS=)');
    expect(
      loadConfig({ env: { ...base, SDC_ZOOKEEPER: 'zk:2181', SDC_ETCD_ENDPOINTS: '' } }).zookeeper,
    ).toMatchObject({ connect: 'zk:2181' });
  });

  it('a chroot that puts the root inside Kyuubi’s default namespace → refused; another chroot is fine', () => {
    for (const connect of ['zk:2181/kyuubi', 'zk1:2181,zk2:2181/kyuubi/apps'])
      expect(problems(() => loadConfig({ env: { ...base, SDC_ZOOKEEPER: connect } })).join('\n')).toMatch(
        /SDC_ZOOKEEPER: its chroot \/kyuubi.* puts zookeeperRoot at \/kyuubi.*\/spark-driver-cleaner, inside Kyuubi's default/,
      );
    expect(loadConfig({ env: { ...base, SDC_ZOOKEEPER: 'zk:2181/kyuubi_prod' } }).zookeeper).toMatchObject({
      connect: 'zk:2181/kyuubi_prod',
    });
  });

  it('a root inside Kyuubi’s default namespace, a bad connect string or a malformed auth → refused', () => {
    const bad = (env: Record<string, string>) =>
      problems(() => loadConfig({ env: { ...base, ...env } })).join('\n');
    expect(bad({ SDC_ZOOKEEPER: 'zk:2181', SDC_ZOOKEEPER_ROOT: '/kyuubi/cleaner' })).toMatch(
      /SDC_ZOOKEEPER_ROOT: inside Kyuubi's default kyuubi.ha.namespace/,
    );
    expect(bad({ SDC_ZOOKEEPER: 'http://zk:2181' })).toMatch(/SDC_ZOOKEEPER: expected host:port/);
    expect(bad({ SDC_ZOOKEEPER: 'zk:2181', SDC_ZOOKEEPER_AUTH: 'nopassword' })).toMatch(
      /SDC_ZOOKEEPER_AUTH: expected user:password/,
    );
    expect(bad({ SDC_ZOOKEEPER_AUTH: 'u:p' })).toMatch(/only used with zookeeper/);
    expect(bad({ SDC_ZOOKEEPER: 'zk:2181', SDC_ZOOKEEPER_AUTH_FILE: '/nonexistent/digest' })).toMatch(
      /SDC_ZOOKEEPER_AUTH_FILE: cannot read \/nonexistent\/digest/,
    );
  });

  it('digest auth from a file; printed masked', () => {
    const c = loadConfig({
      env: { ...base, SDC_ZOOKEEPER: 'zk:2181', SDC_ZOOKEEPER_AUTH_FILE: file('cleaner:s3cret\n') },
    });
    expect(c.zookeeper?.auth).toBe('cleaner:s3cret');
    expect(JSON.stringify(redactConfig(c))).not.toContain('s3cret');
    expect(redactConfig(c).zookeeper).toMatchObject({ auth: 'cleaner:***' });
  });
});
