/**
 * The checks of etcd, the leadership backend: each endpoint answers; etcd accepts the configured TLS files and
 * user (src/leadership/etcd/access-check.ts, the same check a replica makes at start); and the user's role
 * lets the replicas work under `etcdKeyPrefix`: grant a lease, write a key on it, read it back, revoke the
 * lease (which deletes the key) — what every campaign does. The probe key is
 * `<etcdKeyPrefix>check/<random>`, never an election or membership key.
 */
import { randomUUID } from 'node:crypto';
import { EtcdPermissionDeniedError, GRPCGenericError } from 'etcd3';
import { type CheckResult, firstLine, resultsOf } from '../../check-result.ts';
import type { CleanerConfig } from '../../config/schema.ts';
import { withTimeout } from '../../with-timeout.ts';
import { checkEtcdAccess, EtcdAccessError } from './access-check.ts';
import { createEtcdClient, LOGIN_TIMEOUT_MS } from './client.ts';

/** Runs the etcd checks; never rejects. `answered` is false when no endpoint answered. */
export async function checkEtcd(
  config: Pick<CleanerConfig, 'etcdEndpoints' | 'etcdSecurity' | 'etcdKeyPrefix'>,
  timeoutMs: number,
): Promise<{ results: CheckResult[]; answered: boolean }> {
  const r = resultsOf('etcd');
  const out: CheckResult[] = [];
  const security = config.etcdSecurity;
  const prefix = config.etcdKeyPrefix;
  const loginMs = security.username !== undefined ? LOGIN_TIMEOUT_MS : 0;

  // Each endpoint on its own: a read under the prefix (a refusal is an answer too).
  const perEndpoint = await Promise.all(
    config.etcdEndpoints.map(async (endpoint) => {
      const one = createEtcdClient([endpoint], { callTimeoutMs: timeoutMs, security });
      try {
        await withTimeout(one.get(`${prefix}check`).exec(), timeoutMs + loginMs, 'a read');
        return { endpoint, answered: true };
      } catch (err) {
        // etcd's own refusals (auth, permission) are answers; gRPC transport errors and our timeout are not.
        const refusal = !(err instanceof GRPCGenericError) && !/timed out after/.test(firstLine(err));
        return { endpoint, answered: refusal, why: firstLine(err) };
      } finally {
        one.close();
      }
    }),
  );
  const answering = perEndpoint.filter((e) => e.answered);
  const silent = perEndpoint.filter((e) => !e.answered);
  if (answering.length === 0) {
    out.push(
      r.unreachable(
        'etcd.reachable',
        `reachable: no endpoint answers (${silent.map((e) => `${e.endpoint}: ${e.why}`).join('; ')})`,
        {
          fix: 'check etcdEndpoints (--etcd-endpoints, SDC_ETCD_ENDPOINTS), that etcd runs, and that the NetworkPolicy lets the pods reach it (2379)',
          details: { endpoints: config.etcdEndpoints },
        },
      ),
    );
    out.push(r.skip('etcd.prefix', 'key prefix: skipped: etcd did not answer'));
    return { results: out, answered: false };
  }
  out.push(
    silent.length === 0
      ? r.pass('etcd.reachable', `reachable: ${answering.length} of ${perEndpoint.length} endpoints answer`)
      : r.warn(
          'etcd.reachable',
          `reachable: ${answering.length} of ${perEndpoint.length} endpoints answer; not ${silent.map((e) => `${e.endpoint} (${e.why})`).join(', ')}`,
          {
            fix: 'bring the member back or drop its endpoint: the replicas skip a failed member, but lose a fallback',
            details: { silent: silent.map((e) => e.endpoint) },
          },
        ),
  );

  const client = createEtcdClient(config.etcdEndpoints, { callTimeoutMs: timeoutMs, security });
  try {
    try {
      await checkEtcdAccess(client, config.etcdEndpoints, security, prefix);
    } catch (err) {
      if (!(err instanceof EtcdAccessError)) throw err;
      // The message starts with the setting to fix: the TLS files, the user, or the key prefix.
      const prefixRefused = err.message.startsWith('etcdKeyPrefix');
      out.push(
        r.fail(prefixRefused ? 'etcd.prefix' : 'etcd.auth', `access: ${err.message}`, {
          fix: 'the message names the setting to fix (docs/deployment.md, "Secured etcd")',
        }),
      );
      if (!prefixRefused)
        out.push(r.skip('etcd.prefix', 'key prefix: skipped: etcd refused the credentials'));
      return { results: out, answered: true };
    }
    if (security.caFile || security.certFile || security.username !== undefined)
      out.push(
        r.pass(
          'etcd.auth',
          `access: etcd accepts ${[security.certFile || security.caFile ? 'the TLS files' : '', security.username !== undefined ? `user ${JSON.stringify(security.username)}` : ''].filter(Boolean).join(' and ')}`,
        ),
      );
    const key = `${prefix}check/${randomUUID()}`;
    const who = security.username !== undefined ? `user ${JSON.stringify(security.username)}` : 'this client';
    try {
      await withTimeout(
        (async () => {
          const lease = client.lease(10, { autoKeepAlive: false });
          try {
            await lease.put(key).value('check');
            const back = await client.get(key).string();
            if (back !== 'check')
              throw new Error(`read back ${JSON.stringify(back)} instead of the value written`);
          } finally {
            await lease.revoke().catch(() => undefined);
          }
        })(),
        timeoutMs * 3 + loginMs,
        'the prefix probe',
      );
      out.push(
        r.pass(
          'etcd.prefix',
          `key prefix ${prefix}: ${who} may grant a lease, write and read a key under it`,
          {
            details: { prefix },
          },
        ),
      );
    } catch (err) {
      out.push(
        err instanceof EtcdPermissionDeniedError
          ? r.fail(
              'etcd.prefix',
              `key prefix ${prefix}: etcd denies ${who} writing under it (${firstLine(err)})`,
              {
                fix: `grant the user's role readwrite on the prefix: etcdctl role grant-permission <role> --prefix=true readwrite ${prefix} (or set etcdKeyPrefix to the prefix it has)`,
                details: { prefix },
              },
            )
          : r.unreachable('etcd.prefix', `key prefix ${prefix}: the probe got no answer: ${firstLine(err)}`, {
              fix: 'etcd stopped answering: check it, then run check again',
            }),
      );
    }
    return { results: out, answered: true };
  } catch (err) {
    out.push(
      r.unreachable('etcd.auth', `etcd stopped answering: ${firstLine(err)}`, {
        fix: 'check etcd, then run check again',
      }),
    );
    return { results: out, answered: false };
  } finally {
    client.close();
  }
}
