/**
 * etcd as production runs it: TLS with `--client-cert-auth` and auth enabled (Debian's etcd, a CA and
 * certificates made with openssl), the cleaner's user granted a role on its key prefix only. Real replica
 * processes, the sandbox API server, real Redis.
 */

import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EtcdTlsOptions } from '../../harness/sandbox/local-services.ts';
import { createEtcdClient, type EtcdClient } from '../../src/leadership/etcd/client.ts';
import { createElectionView } from '../../src/leadership/etcd/view.ts';
import { membersPrefix } from '../../src/queue/job-identity.ts';
import { withTimeout } from '../../src/with-timeout.ts';
import { serviceEnv } from '../helpers/cluster.ts';
import { type CertFiles, issueCert, makeCa } from '../helpers/etcd-pki.ts';
import { memoryLogger } from '../helpers/log.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  CLEAN,
  checkInvariants,
  createDrivers,
  httpUrl,
  replicaEnv,
  stopAll,
  timeOf,
  uidOf,
  useFailureCluster,
  waitGone,
} from './helpers.ts';

const pki = mkdtempSync(join(tmpdir(), 'sdc-etcd-pki-'));
const ca = makeCa(pki, 'ca');
const serverCert = issueCert(ca, pki, 'server', 'etcd');
const rootCert = issueCert(ca, pki, 'root', 'root');
const cleanerCert = issueCert(ca, pki, 'cleaner', 'spark-driver-cleaner');
/** A CA etcd does not trust, and a client certificate it signed. */
const otherCa = makeCa(pki, 'other-ca');
const otherCert = issueCert(otherCa, pki, 'other', 'spark-driver-cleaner');

const tls: EtcdTlsOptions = {
  ...serverCert,
  clientCaFile: ca.certFile,
  readyClient: { caFile: ca.certFile, ...rootCert },
};
const cluster = useFailureCluster({ etcdTls: tls });

const CLI_PATH = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
/** The default `etcdKeyPrefix`, set explicitly: the prefix the README's role covers. */
const PREFIX = 'spark-driver-cleaner/';
const USER = 'spark-driver-cleaner';
/** Another prefix, also granted to the cleaner's role: the replicas of one case use it instead. */
const CUSTOM_PREFIX = 'teams/spark/cleaner/';
const PASSWORD = 'cleaner-pw-1';

/** An etcd client as root (client certificate CN=root, password). */
function rootClient(cert: CertFiles = rootCert): EtcdClient {
  return createEtcdClient(cluster().etcd.endpoints, {
    security: { caFile: ca.certFile, ...cert, username: 'root', password: 'root-pw' },
  });
}

/**
 * Makes the next restart of etcd forget every auth token given so far. etcd re-applies a login from its log
 * at a restart, unless a later write reached its database: a write, and the database committed now (a
 * hash commits it).
 */
async function forgetTokensAtRestart(): Promise<void> {
  const root = rootClient();
  try {
    await root.put(`${PREFIX}restart-marker`).value(String(Date.now()));
    await root.maintenance.hash();
  } finally {
    root.close();
  }
}

/**
 * The README's commands ("Secured etcd") that give the cleaner its etcd role, run as written by an operator
 * with etcdctl as root (ETCDCTL_* variables).
 */
const README_ETCDCTL = [
  'etcdctl role add spark-driver-cleaner',
  'etcdctl role grant-permission spark-driver-cleaner --prefix=true readwrite spark-driver-cleaner/',
  'etcdctl user add spark-driver-cleaner --new-user-password "$ETCD_CLEANER_PASSWORD"',
  'etcdctl user grant-role spark-driver-cleaner spark-driver-cleaner',
];

beforeAll(async () => {
  // An etcd secured as in production: a root user, auth on; then the cleaner's role and user as the README says.
  const root = createEtcdClient(cluster().etcd.endpoints, { security: { caFile: ca.certFile, ...rootCert } });
  try {
    await root.user('root').create('root-pw');
    await root.user('root').addRole('root');
    await root.auth.authEnable();
  } finally {
    root.close();
  }
  const env = {
    PATH: process.env.PATH ?? '',
    ETCDCTL_API: '3',
    ETCDCTL_ENDPOINTS: cluster().etcd.endpoints.join(','),
    ETCDCTL_CACERT: ca.certFile,
    ETCDCTL_CERT: rootCert.certFile,
    ETCDCTL_KEY: rootCert.keyFile,
    ETCDCTL_USER: 'root:root-pw',
    ETCD_CLEANER_PASSWORD: PASSWORD,
  };
  for (const command of README_ETCDCTL)
    await new Promise<void>((resolve, reject) =>
      execFile('bash', ['-c', command], { env, timeout: 30_000 }, (err, _stdout, stderr) =>
        err ? reject(new Error(`${command}: ${stderr || err.message}`)) : resolve(),
      ),
    );
  const admin = rootClient();
  try {
    await admin.role(USER).grant({ permission: 'Readwrite', range: admin.range({ prefix: CUSTOM_PREFIX }) });
  } finally {
    admin.close();
  }
}, 60_000);

/**
 * A replica's mounted Secret: the files in a directory of their own, replaced as Kubernetes replaces a
 * Secret volume's files (a new file renamed over the old one).
 */
function secretDir(name: string, cert: CertFiles, password: string) {
  const dir = join(pki, name);
  mkdirSync(dir, { recursive: true });
  const put = (file: string, text: string | Buffer) => {
    writeFileSync(join(dir, `.${file}.tmp`), text);
    renameSync(join(dir, `.${file}.tmp`), join(dir, file));
  };
  const putCert = (c: CertFiles) => {
    put('tls.crt', readFileSync(c.certFile));
    put('tls.key', readFileSync(c.keyFile));
  };
  putCert(cert);
  put('ca.crt', readFileSync(ca.certFile));
  put('password', `${password}\n`);
  return {
    env: {
      SDC_ETCD_CA_FILE: join(dir, 'ca.crt'),
      SDC_ETCD_CERT_FILE: join(dir, 'tls.crt'),
      SDC_ETCD_KEY_FILE: join(dir, 'tls.key'),
      SDC_ETCD_USERNAME: USER,
      SDC_ETCD_PASSWORD_FILE: join(dir, 'password'),
      SDC_ETCD_KEY_PREFIX: PREFIX,
    },
    putCert,
    putPassword: (p: string) => put('password', `${p}\n`),
  };
}

afterAll(async () => {
  // Restore what a test may have rotated, for the cluster's own stop.
  tls.clientCaFile = ca.certFile;
});

describe('secured etcd (TLS, client certificates, auth)', () => {
  it('the right certificate and password → leads and cleans; every key under a custom etcdKeyPrefix, status and explain read it', async () => {
    const ns = 'sec-ok';
    const secret = secretDir('ok', cleanerCert, PASSWORD);
    const env = { ...replicaEnv(cluster(), ns, 'sec1'), ...secret.env, SDC_ETCD_KEY_PREFIX: CUSTOM_PREFIX };
    const r = cluster().startReplica('sec-ok', env);
    try {
      await r.waitForLine((l) => l.msg === 'elected leader', 60_000);
      const pods = createDrivers(cluster().server, ns, 5, 'sec-ok');
      await waitGone(cluster().server, pods, 'pods deleted through a secured etcd', 60_000);
      expect(checkInvariants(cluster().server, ns, pods.map(uidOf), { retentionMs: 1000 })).toEqual(CLEAN);
      const root = rootClient();
      try {
        const keys = await root.getAll().keys();
        const cluster = `${CUSTOM_PREFIX}clusters/`;
        expect(keys.some((k) => k.startsWith(cluster) && k.includes('/election/'))).toBe(true);
        expect(keys.some((k) => k.startsWith(cluster) && k.endsWith('/members/sec-ok'))).toBe(true);
        expect(keys.filter((k) => !k.startsWith(CUSTOM_PREFIX))).toEqual([]);
      } finally {
        root.close();
      }
      // `status` reads the same elections with the same settings.
      const status = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile(
          process.execPath,
          [CLI_PATH, 'status', '--json'],
          {
            env: {
              ...process.env,
              ...serviceEnv(cluster().server.kubeconfigPath, cluster().redis, cluster().etcd),
              ...env,
              SDC_LOG_LEVEL: 'silent',
            },
            timeout: 60_000,
          },
          (err, stdout, stderr) =>
            resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
        );
      });
      expect(status.code, status.stderr).toBe(0);
      const json = JSON.parse(status.stdout) as { targets: { leader: string | null }[] };
      expect(json.targets.map((t) => t.leader)).toEqual(['sec-ok']);
      // The replica's /api/v1/explain reads the leader under the same prefix.
      const url = await httpUrl(r);
      const explained = (await (
        await fetch(`${url}/api/v1/explain/${ns}/${pods[0]?.metadata?.name}`, {
          signal: AbortSignal.timeout(10_000),
        })
      ).json()) as { parts: { leader: string } };
      expect(explained.parts.leader).toMatch(/^sec-ok \(etcd election\)/);
    } finally {
      await stopAll([r]);
    }
  }, 150_000);

  it('a wrong password, a certificate of another CA, a CA that did not sign etcd’s, a role without the prefix → exit 2 at start, naming the setting', async () => {
    const ns = 'sec-bad';
    const cases = [
      {
        id: 'bad-pw',
        env: secretDir('bad-pw', cleanerCert, 'not-the-password').env,
        line: /^ {2}- etcdUsername\/etcdPassword .*etcd refused user "spark-driver-cleaner": .*authentication failed.*Fix: the user's current etcd password/m,
      },
      {
        id: 'bad-cert',
        env: secretDir('bad-cert', otherCert, PASSWORD).env,
        line: /^ {2}- etcdCaFile\/etcdCertFile\/etcdKeyFile .*do not accept each other's certificates: https:\/\/127\.0\.0\.1:\d+: TLS refused \(etcd refused the client certificate etcdCertFile\).*Fix: etcdCaFile must hold/m,
      },
      {
        // etcd's server certificate is not signed by the configured CA bundle.
        id: 'bad-ca',
        env: { ...secretDir('bad-ca', cleanerCert, PASSWORD).env, SDC_ETCD_CA_FILE: otherCa.certFile },
        line: /^ {2}- etcdCaFile\/etcdCertFile\/etcdKeyFile .*do not accept each other's certificates: https:\/\/127\.0\.0\.1:\d+: TLS refused \(etcd’s server certificate does not pass etcdCaFile\)/m,
      },
      {
        id: 'bad-prefix',
        env: {
          ...secretDir('bad-prefix', cleanerCert, PASSWORD).env,
          SDC_ETCD_KEY_PREFIX: 'other-team/',
        },
        line: /^ {2}- etcdKeyPrefix .* other-team\/: etcd denies user "spark-driver-cleaner" reading under it/m,
      },
    ];
    const replicas = cases.map((c) =>
      cluster().startReplica(c.id, { ...replicaEnv(cluster(), ns, c.id), ...c.env }),
    );
    try {
      const codes = await Promise.all(replicas.map((r) => r.exited));
      for (const [i, c] of cases.entries()) {
        const stderr = replicas[i]?.stderr() ?? '';
        expect(codes[i], `${c.id}: ${stderr}`).toBe(2);
        expect(stderr, c.id).toMatch(c.line);
        expect(stderr, c.id).not.toMatch(/\n\s+at /);
      }
    } finally {
      await stopAll(replicas);
    }
  }, 120_000);

  it('etcd restarted (its auth tokens gone) → the election view follows again, leadership recovers, pods deleted once', async () => {
    const ns = 'sec-restart';
    const env = { ...replicaEnv(cluster(), ns, 'sec4'), ...secretDir('restart', cleanerCert, PASSWORD).env };
    const a = cluster().startReplica('sec-ra', env);
    const replicas = [a];
    try {
      await a.waitForLine((l) => l.msg === 'elected leader', 60_000);
      const member = cluster().etcd.members[0];
      if (!member) throw new Error('no etcd member');
      await forgetTokensAtRestart();
      await member.restart();
      replicas.push(cluster().startReplica('sec-rb', env));
      const url = await httpUrl(a);
      await waitFor(
        'the first replica sees the second as a member',
        async () => {
          const body = (await (
            await fetch(`${url}/api/v1/leaders`, { signal: AbortSignal.timeout(5000) })
          ).json()) as { balance?: { members: string[] } };
          return body.balance?.members.length === 2;
        },
        60_000,
        200,
      );
      // A leader cleans after the restart: each pod deleted once, none twice.
      const pods = createDrivers(cluster().server, ns, 5, 'after-restart');
      await waitGone(cluster().server, pods, 'pods deleted after the etcd restart', 60_000);
      expect(checkInvariants(cluster().server, ns, pods.map(uidOf), { retentionMs: 1000 })).toEqual(CLEAN);
      expect(a.child.exitCode).toBeNull();
    } finally {
      await stopAll(replicas);
    }
  }, 150_000);

  it('etcd restarted with auth: a watch and the election view log in again with nothing else calling etcd', async () => {
    // Deterministic: no unary call (which etcd3 retries with a new login) refreshes the token before the
    // watch stream re-opens, so the stream comes back with the token etcd forgot.
    const secret = secretDir('relogin', cleanerCert, PASSWORD);
    const security = {
      caFile: secret.env.SDC_ETCD_CA_FILE,
      certFile: secret.env.SDC_ETCD_CERT_FILE,
      keyFile: secret.env.SDC_ETCD_KEY_FILE,
      username: USER,
      passwordFile: secret.env.SDC_ETCD_PASSWORD_FILE,
    };
    const client = createEtcdClient(cluster().etcd.endpoints, { security });
    const { log } = memoryLogger('silent');
    const view = createElectionView({
      client,
      log,
      root: PREFIX,
      membersPrefix: membersPrefix('test', PREFIX),
    });
    const events: string[] = [];
    const watcher = await client.watch().prefix(`${PREFIX}relogin/`).create();
    watcher.on('put', (kv) => events.push(kv.key.toString()));
    // A lease kept alive every second (TTL 3 s) on the same client: its keepalive stream re-opens too.
    const lease = client.lease(3);
    await lease.grant();
    let restarted = false;
    let keptAfterRestart = 0;
    lease.on('keepaliveSucceeded', () => {
      if (restarted) keptAfterRestart += 1;
    });
    const writer = rootClient();
    try {
      view.start();
      await waitFor('the view read once', () => view.synced, 30_000, 50);
      const member = cluster().etcd.members[0];
      if (!member) throw new Error('no etcd member');
      await forgetTokensAtRestart();
      await member.restart();
      restarted = true;
      // Written by another client once etcd is back: both watches must see it.
      await writer.put(`${PREFIX}relogin/after-restart`).value('1');
      await writer.put(`${membersPrefix('test', PREFIX)}relogin-peer`).value('x');
      await waitFor(
        'the watch sees a key written after the restart',
        () => events.includes(`${PREFIX}relogin/after-restart`),
        30_000,
        50,
      );
      await waitFor(
        'the election view sees a member registered after the restart',
        () => view.members().includes('relogin-peer'),
        30_000,
        50,
      );
      await waitFor('the lease kept alive after the restart', () => keptAfterRestart >= 2, 30_000, 50);
      // A read (a fence read, a campaign's transaction) logs in again too (etcd3 retries unary calls).
      expect((await client.get(`${PREFIX}relogin/after-restart`).string()) ?? null).toBe('1');
      // The token was refused and a new login re-opened the stream (this case's point, not a lucky order).
      expect(client.authRefreshes().watchStreamsReopened).toBeGreaterThanOrEqual(1);
    } finally {
      await writer
        .delete()
        .key(`${membersPrefix('test', PREFIX)}relogin-peer`)
        .catch(() => undefined);
      writer.close();
      await view.close();
      await lease.revoke().catch(() => undefined);
      // Closing the client ends the watch (a refused one never answers a cancel).
      client.close();
    }
  }, 120_000);

  it('a watch etcd refuses (outside the role’s prefix) fails alone: the next watch on the client is still created', async () => {
    const secret = secretDir('refused-watch', cleanerCert, PASSWORD);
    const client = createEtcdClient(cluster().etcd.endpoints, {
      security: {
        caFile: secret.env.SDC_ETCD_CA_FILE,
        certFile: secret.env.SDC_ETCD_CERT_FILE,
        keyFile: secret.env.SDC_ETCD_KEY_FILE,
        username: USER,
        passwordFile: secret.env.SDC_ETCD_PASSWORD_FILE,
      },
    });
    try {
      await expect(client.watch().prefix('other-team/').create()).rejects.toThrow(/permission denied/);
      const w = await withTimeout(
        client.watch().prefix(`${PREFIX}after-refusal/`).create(),
        10_000,
        'the watch after a refused one',
      );
      const seen = new Promise<string>((resolve) => w.on('put', (kv) => resolve(kv.key.toString())));
      const writer = rootClient();
      try {
        await writer.put(`${PREFIX}after-refusal/x`).value('1');
      } finally {
        writer.close();
      }
      expect(await withTimeout(seen, 10_000, 'the put')).toBe(`${PREFIX}after-refusal/x`);
    } finally {
      client.close();
    }
  }, 60_000);

  it('refused later (a CA rotated, a password changed) → warnings and retries, no exit; the rotated files are used without a restart', async () => {
    const ns = 'sec-rot';
    const secret = secretDir('rot', cleanerCert, PASSWORD);
    const r = cluster().startReplica('sec-rot', { ...replicaEnv(cluster(), ns, 'sec3'), ...secret.env });
    const member = cluster().etcd.members[0];
    if (!member) throw new Error('no etcd member');
    try {
      await r.waitForLine((l) => l.msg === 'elected leader', 60_000);

      // etcd now trusts a new CA only: the replica's certificate (of the old CA) is refused.
      const newCa = makeCa(pki, 'new-ca');
      const newRoot = issueCert(newCa, pki, 'new-root', 'root');
      const newCleaner = issueCert(newCa, pki, 'new-cleaner', 'spark-driver-cleaner');
      tls.clientCaFile = newCa.certFile;
      tls.readyClient = { caFile: ca.certFile, ...newRoot };
      const rotatedAt = Date.now();
      await member.restart();
      const warnings = (since: number) => r.lines.filter((l) => l.level === 'warn' && timeOf(l) >= since);
      await waitFor(
        'leadership lost and retries: the replica goes on against the refusing etcd',
        () =>
          warnings(rotatedAt).some((l) => l.msg === 'leadership lost') &&
          warnings(rotatedAt).filter((l) => l.msg === 'campaign failed; retrying').length >= 2,
        60_000,
        100,
      );
      expect(r.child.exitCode).toBeNull();

      // The Secret is updated with a certificate of the new CA: picked up without a restart.
      const swappedAt = Date.now();
      secret.putCert(newCleaner);
      await r.waitForLine((l) => l.msg === 'elected leader' && timeOf(l) >= swappedAt, 60_000);
      const a = createDrivers(cluster().server, ns, 5, 'rot-a');
      await waitGone(cluster().server, a, 'pods deleted with the rotated certificate', 60_000);

      // The cleaner's password changed in etcd: its next login is refused — warnings and retries with
      // backoff, no exit — until the Secret's password file has the new one. (Its lease keepalive stream
      // needs no login: it goes on leading meanwhile.)
      const root = rootClient(newRoot);
      const changedAt = Date.now();
      try {
        await root.user(USER).setPassword('cleaner-pw-2');
      } finally {
        root.close();
      }
      // A restart of etcd drops its tokens: every connection logs in again.
      await member.restart();
      const refusedLogins = () =>
        warnings(changedAt).filter((l) => /authentication failed/.test(JSON.stringify(l.err)));
      await waitFor('three refused logins, retried', () => refusedLogins().length >= 3, 60_000, 100);
      expect(r.child.exitCode).toBeNull();
      const newPasswordAt = Date.now();
      secret.putPassword('cleaner-pw-2');
      await r.waitForLine(
        (l) =>
          l.msg === 'etcd secret files changed: connections to etcd re-opened with them' &&
          timeOf(l) >= newPasswordAt,
        60_000,
      );
      const b = createDrivers(cluster().server, ns, 5, 'rot-b');
      await waitGone(cluster().server, b, 'pods deleted with the new password', 60_000);
      const uids = [...a, ...b].map(uidOf);
      expect(checkInvariants(cluster().server, ns, uids, { retentionMs: 1000 })).toEqual(CLEAN);
      expect(r.child.exitCode).toBeNull();
    } finally {
      await stopAll([r]);
    }
  }, 300_000);
});
