/**
 * `sdc_election_ttl_seconds` from the production entry point: a replica started by `src/cli.ts run` exports
 * the lease TTL it is configured with, which the keepalive alert (infra/monitoring/alerts.yaml) halves.
 */
import { describe, expect, it } from 'vitest';
import { httpUrl, replicaEnv, useFailureCluster } from '../failure/helpers.ts';

const cluster = useFailureCluster();

describe('sdc_election_ttl_seconds', () => {
  it('is the SDC_ELECTION_TTL_SECONDS the replica runs with', async () => {
    const c = cluster();
    const r = c.startReplica('ttl-1', replicaEnv(c, 'ttl-ns', 'ttl', { SDC_ELECTION_TTL_SECONDS: '7' }));
    const text = await (
      await fetch(`${await httpUrl(r)}/metrics`, { signal: AbortSignal.timeout(5000) })
    ).text();
    expect(text).toMatch(/^# TYPE sdc_election_ttl_seconds gauge$/m);
    expect(text).toMatch(/^sdc_election_ttl_seconds 7$/m);
  }, 30_000);
});
