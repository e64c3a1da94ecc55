import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseDurationMs } from '../../src/config/duration.ts';
import { envName, FIELDS, NODE_TIMER_MAX_MS, rangeMs } from '../../src/config/fields.ts';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { describeRedis, maskUrl, redactConfig } from '../../src/config/redact.ts';
import { configWarnings } from '../../src/config/warnings.ts';

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

describe('parseDurationMs', () => {
  const cases: [string | number, number | undefined][] = [
    ['PT5M', 300_000],
    ['PT0.5S', 500],
    ['P1DT1H', 90_000_000],
    ['300000', 300_000],
    [1500, 1500],
    ['2s', 2000],
    ['500ms', 500],
    ['24h', 86_400_000],
    ['5 m', 300_000],
    ['P', undefined],
    ['PT', undefined],
    ['-5s', undefined],
    ['five minutes', undefined],
    [-1, undefined],
  ];
  for (const [input, want] of cases)
    it(`${JSON.stringify(input)} → ${want}`, () => expect(parseDurationMs(input)).toBe(want));
});

describe('labelSelector must narrow what can be deleted', () => {
  // [selector, source, accepted]: a pod must carry at least one label for the selector to match it.
  const cases: [string, 'flag' | 'file' | 'env', boolean][] = [
    ['spark-role=driver', 'flag', true],
    ['spark-role==driver', 'flag', true],
    ['kyuubi-unique-tag', 'flag', true],
    ['spark-role in (driver)', 'flag', true],
    ['spark-role=driver,!spark-exec-id', 'flag', true],
    ['tier notin (gold),kyuubi-unique-tag', 'flag', true],
    ['spark-role=', 'flag', true], // the label must exist, with an empty value
    ['', 'flag', false],
    ['', 'file', false],
    ['   ', 'env', false], // an empty variable counts as unset (the default applies); blanks do not
    ['!spark-role', 'flag', false],
    ['spark-role!=executor', 'flag', false],
    ['spark-role notin (executor)', 'env', false],
    ['!a,b!=c,d notin (e)', 'file', false],
  ];
  const load = (selector: string, source: 'flag' | 'file' | 'env') => {
    if (source === 'flag') return loadConfig({ env: base, flags: { labelSelector: selector } });
    if (source === 'env') return loadConfig({ env: { ...base, SDC_LABEL_SELECTOR: selector } });
    const file = join(mkdtempSync(join(tmpdir(), 'sdc-cfg-')), 'c.yaml');
    writeFileSync(file, `labelSelector: ${JSON.stringify(selector)}\n`);
    return loadConfig({ file, env: base });
  };
  for (const [selector, source, ok] of cases) {
    it(`${JSON.stringify(selector)} from the ${source} → ${ok ? 'accepted' : 'exit 2'}`, () => {
      if (ok) {
        expect(load(selector, source).labelSelector).toBe(selector);
        return;
      }
      const lines = problems(() => load(selector, source));
      expect(lines).toHaveLength(1);
      // Names the field, its flag and variable, and an example, whatever the source.
      expect(lines[0]).toMatch(
        /expected at least one label the pod must carry .*set labelSelector \(--label-selector, SDC_LABEL_SELECTOR\) to e\.g\. spark-role=driver,kyuubi-unique-tag$/,
      );
      expect(lines[0]).toMatch(selector.trim() ? /only excludes/ : /empty: it selects every pod/);
    });
  }

  it('an empty SDC_LABEL_SELECTOR is unset: the default selector applies', () => {
    expect(loadConfig({ env: { ...base, SDC_LABEL_SELECTOR: '' } }).labelSelector).toBe(
      'spark-role=driver,kyuubi-unique-tag',
    );
  });
});

/** Every field whose value is a span of time: each has a documented range. */
const DURATION_FIELDS = [
  'retention',
  'electionTtlSeconds',
  'apiTimeout',
  'retryBaseDelay',
  'retryMaxDelay',
  'tombstoneTtl',
  'reconcileInterval',
];

describe('duration ranges', () => {
  it('every duration field has a range whose bounds parse, and its default lies inside it', () => {
    for (const key of DURATION_FIELDS) {
      const spec = FIELDS.find((f) => f.key === key);
      const r = spec && rangeMs(spec);
      expect(r, key).toBeDefined();
      expect(r?.minMs, key).toBeLessThan(r?.maxMs ?? 0);
      expect(spec?.range?.why.length, key).toBeGreaterThan(20);
      const { [key === 'electionTtlSeconds' ? key : `${key}Ms`]: value } = loadConfig({
        env: base,
      }) as Record<string, unknown>;
      const ms = key === 'electionTtlSeconds' ? Number(value) * 1000 : Number(value);
      expect(ms, key).toBeGreaterThanOrEqual(r?.minMs ?? Infinity);
      expect(ms, key).toBeLessThanOrEqual(r?.maxMs ?? -Infinity);
    }
  });

  it('a field that goes into a Node timer stays at or below 2^31−1 ms (a longer timer fires after 1 ms)', () => {
    const timed = FIELDS.filter((f) => f.range?.nodeTimer);
    expect(timed.map((f) => f.key).sort()).toEqual(['apiTimeout', 'electionTtlSeconds', 'reconcileInterval']);
    for (const f of timed) expect(rangeMs(f)?.maxMs, f.key).toBeLessThanOrEqual(NODE_TIMER_MAX_MS);
  });

  // Both bounds are accepted, one step outside is refused: generated from the one table (src/config/fields.ts).
  // retryBaseDelay at its max needs a retryMaxDelay as long (base ≤ max is checked across fields).
  const beside: Record<string, Record<string, string>> = { retryBaseDelay: { SDC_RETRY_MAX_DELAY: '1h' } };
  for (const f of FIELDS.filter((x) => x.range)) {
    const r = rangeMs(f);
    const seconds = f.key.endsWith('Seconds');
    const step = seconds ? 1000 : 1;
    const write = (ms: number) => String(seconds ? ms / 1000 : ms);
    const cases: [string, number, boolean][] = [
      [`min ${f.range?.min}`, r?.minMs ?? 0, true],
      [`max ${f.range?.max}`, r?.maxMs ?? 0, true],
      [`max + ${seconds ? '1 s' : '1 ms'}`, (r?.maxMs ?? 0) + step, false],
    ];
    if ((r?.minMs ?? 0) > 0) cases.push([`min − ${seconds ? '1 s' : '1 ms'}`, (r?.minMs ?? 0) - step, false]);
    for (const [name, ms, ok] of cases) {
      it(`${f.key}: ${name} → ${ok ? 'accepted' : 'exit 2 naming the field, the range and the value'}`, () => {
        const env = { ...base, ...beside[f.key], [envName(f.key)]: write(ms) };
        if (ok) {
          expect(() => loadConfig({ env })).not.toThrow();
          return;
        }
        const lines = problems(() => loadConfig({ env }));
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain(`${envName(f.key)}: "${write(ms)}"`);
        expect(lines[0]).toContain(`${f.range?.min} to ${f.range?.max}`);
        if (!seconds) expect(lines[0]).toContain(`out of range: ${f.key} must be from`);
      });
    }
  }

  // The values reported, as operators write them.
  const reported: [string, Record<string, string>, RegExp | undefined][] = [
    [
      'reconcileInterval P30D (overflowed Node’s timer: 182 reconciles in 200 ms)',
      { SDC_RECONCILE_INTERVAL: 'P30D' },
      /^SDC_RECONCILE_INTERVAL: "P30D" \(30d\) is out of range: reconcileInterval must be from 1s to 24h \(.*Node timer/,
    ],
    [
      'reconcileInterval 0',
      { SDC_RECONCILE_INTERVAL: '0' },
      /"0" \(0ms\) is out of range: reconcileInterval/,
    ],
    [
      'tombstoneTtl 0',
      { SDC_TOMBSTONE_TTL: '0' },
      /"0" \(0ms\) is out of range: tombstoneTtl must be from 1h/,
    ],
    ['tombstoneTtl 30m', { SDC_TOMBSTONE_TTL: '30m' }, /tombstoneTtl must be from 1h to 365d/],
    ['apiTimeout P30D', { SDC_API_TIMEOUT: 'P30D' }, /apiTimeout must be from 1s to 5m/],
    ['apiTimeout 0', { SDC_API_TIMEOUT: '0' }, /apiTimeout must be from 1s to 5m/],
    ['retryMaxDelay 2 days', { SDC_RETRY_MAX_DELAY: 'P2D' }, /retryMaxDelay must be from 1s to 1h/],
    ['retryBaseDelay 0', { SDC_RETRY_BASE_DELAY: '0' }, /retryBaseDelay must be from 100ms to 1h/],
    ['retention P400D', { SDC_RETENTION: 'P400D' }, /retention must be from 0 to 365d/],
    [
      'electionTtlSeconds 86400',
      { SDC_ELECTION_TTL_SECONDS: '86400' },
      /"86400" is not an integer from 2 to 3600 \(a leader fences itself/,
    ],
    ['retention 0 (allowed, with a warning)', { SDC_RETENTION: '0' }, undefined],
    ['reconcileInterval PT24H', { SDC_RECONCILE_INTERVAL: 'PT24H' }, undefined],
  ];
  for (const [name, env, pattern] of reported) {
    it(`${name} → ${pattern ? 'exit 2' : 'accepted'}`, () => {
      if (!pattern) expect(() => loadConfig({ env: { ...base, ...env } })).not.toThrow();
      else expect(problems(() => loadConfig({ env: { ...base, ...env } })).join('\n')).toMatch(pattern);
    });
  }
});

describe('configWarnings', () => {
  const h = 3_600_000;
  const cases: [string, { retentionMs: number; tombstoneTtlMs: number }, string[]][] = [
    ['defaults (retention 5m, tombstone 24h) → none', { retentionMs: 300_000, tombstoneTtlMs: 24 * h }, []],
    ['retention 0 → retention', { retentionMs: 0, tombstoneTtlMs: 24 * h }, ['retention']],
    ['retention 999 ms → retention', { retentionMs: 999, tombstoneTtlMs: 24 * h }, ['retention']],
    ['retention 1 s → none', { retentionMs: 1000, tombstoneTtlMs: 24 * h }, []],
    [
      'retention 23h, tombstone 24h (exactly + 1h) → none',
      { retentionMs: 23 * h, tombstoneTtlMs: 24 * h },
      [],
    ],
    [
      'retention 23h + 1 ms, tombstone 24h → tombstoneTtl',
      { retentionMs: 23 * h + 1, tombstoneTtlMs: 24 * h },
      ['tombstoneTtl'],
    ],
    [
      'retention 7d, tombstone 24h → tombstoneTtl',
      { retentionMs: 7 * 24 * h, tombstoneTtlMs: 24 * h },
      ['tombstoneTtl'],
    ],
    ['retention 0, tombstone 1h → retention only', { retentionMs: 0, tombstoneTtlMs: h }, ['retention']],
  ];
  for (const [name, config, fields] of cases)
    it(name, () => expect(configWarnings(config).map((w) => w.field)).toEqual(fields));

  it('a warning says what to set: the field, its flag and variable, and the value that would do', () => {
    const [w] = configWarnings({ retentionMs: 7 * 24 * h, tombstoneTtlMs: 24 * h });
    expect(w).toMatchObject({ field: 'tombstoneTtl', value: '1d' });
    expect(w?.message).toMatch(/set tombstoneTtl \(--tombstone-ttl, SDC_TOMBSTONE_TTL\) to at least 169h$/);
  });

  it('on ZooKeeper, a session timeout above what a server grants by default (40 s) → electionTtlSeconds', () => {
    const base = { retentionMs: 300_000, tombstoneTtlMs: 24 * h };
    const zookeeper = loadConfig({ env: { SDC_TARGETS: 'a:b', SDC_ZOOKEEPER: 'zk:2181' } }).zookeeper;
    expect(configWarnings({ ...base, zookeeper, electionTtlSeconds: 40 })).toEqual([]);
    const [w] = configWarnings({ ...base, zookeeper, electionTtlSeconds: 3600 });
    expect(w).toMatchObject({ field: 'electionTtlSeconds', value: '3600' });
    expect(w?.message).toMatch(/\(--election-ttl-seconds, SDC_ELECTION_TTL_SECONDS\) to at most 40$/);
    // etcd leases take any TTL: no warning without ZooKeeper.
    expect(configWarnings({ ...base, electionTtlSeconds: 3600 })).toEqual([]);
  });
});

describe('loadConfig', () => {
  it('defaults: Kyuubi-like selector, ALL, 5 min retention, 10 s TTL, live re-check, 20 QPS burst 30', () => {
    const c = loadConfig({ env: base });
    expect(c).toMatchObject({
      targets: [{ context: 'kind-a', namespace: 'spark' }],
      labelSelector: 'spark-role=driver,kyuubi-unique-tag',
      policy: 'ALL',
      retentionMs: 300_000,
      electionTtlSeconds: 10,
      recheck: 'resource-version',
      apiQps: 20,
      apiBurst: 30,
      informerScope: 'namespace',
      apiHttp2: 'off',
      dryRun: false,
      etcdEndpoints: [],
      tombstoneTtlMs: 86_400_000,
      reconcileIntervalMs: 600_000,
      httpHost: '127.0.0.1',
    });
    expect(c.replicaId).toMatch(/-\d+$/);
  });

  it("Kyuubi's state settings: default POD and spark-kubernetes-driver; env (any case), flag and file", () => {
    expect(loadConfig({ env: base }).applicationState).toEqual({
      source: 'POD',
      container: 'spark-kubernetes-driver',
    });
    expect(
      loadConfig({
        env: {
          ...base,
          SDC_APPLICATION_STATE_SOURCE: 'container',
          SDC_APPLICATION_STATE_CONTAINER: 'driver',
        },
      }).applicationState,
    ).toEqual({ source: 'CONTAINER', container: 'driver' });
    expect(
      loadConfig({ env: base, flags: { applicationStateSource: 'CONTAINER' } }).applicationState.source,
    ).toBe('CONTAINER');
    const dir = mkdtempSync(join(tmpdir(), 'sdc-cfg-'));
    const file = join(dir, 'c.yaml');
    // As in kyuubi-defaults.conf: Kyuubi matches the container ignoring case, so the value is kept as written.
    writeFileSync(file, 'applicationStateSource: CONTAINER\napplicationStateContainer: Spark-Driver\n');
    expect(loadConfig({ file, env: base }).applicationState).toEqual({
      source: 'CONTAINER',
      container: 'Spark-Driver',
    });
  });

  it('informerScope from the environment (any case), default namespace', () => {
    expect(loadConfig({ env: { ...base, SDC_INFORMER_SCOPE: 'Cluster' } }).informerScope).toBe('cluster');
    expect(loadConfig({ env: base }).informerScope).toBe('namespace');
  });

  it('apiHttp2 from the environment (any case), a flag and a file, default off', () => {
    expect(loadConfig({ env: base }).apiHttp2).toBe('off');
    expect(loadConfig({ env: { ...base, SDC_API_HTTP2: 'On' } }).apiHttp2).toBe('on');
    expect(loadConfig({ env: base, flags: { apiHttp2: 'on' } }).apiHttp2).toBe('on');
    const dir = mkdtempSync(join(tmpdir(), 'sdc-cfg-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(file, 'apiHttp2: on\n'); // YAML 1.2: a string, not a boolean
    expect(loadConfig({ file, env: base }).apiHttp2).toBe('on');
  });

  it('flags > env > file > defaults', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sdc-cfg-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(file, 'retention: PT1M\npolicy: COMPLETED\napiQps: 5\ntargets: [ "f:ns1" ]\n');
    const c = loadConfig({ file, env: { SDC_POLICY: 'all', SDC_API_QPS: '7' }, flags: { apiQps: '9' } });
    expect(c.retentionMs).toBe(60_000); // file over default
    expect(c.policy).toBe('ALL'); // env over file
    expect(c.apiQps).toBe(9); // flag over env
    expect(c.targets).toEqual([{ context: 'f', namespace: 'ns1' }]);
  });

  it('a context with colons (EKS ARN) keeps them; the namespace is after the last colon', () => {
    const c = loadConfig({ env: { SDC_TARGETS: 'arn:aws:eks:eu-west-1:123:cluster/prod:spark, other:ns2' } });
    expect(c.targets).toEqual([
      { context: 'arn:aws:eks:eu-west-1:123:cluster/prod', namespace: 'spark' },
      { context: 'other', namespace: 'ns2' },
    ]);
  });

  it('in a pod with no target, the error names targets and says the pod’s own namespace is no default', () => {
    const problemsOf = (serviceAccountNamespace: () => string | undefined) => {
      try {
        loadConfig({ env: {}, serviceAccountNamespace });
      } catch (err) {
        if (err instanceof ConfigError) return err.problems;
        throw err;
      }
      throw new Error('no ConfigError');
    };
    const inPod = problemsOf(() => 'spark-driver-cleaner');
    expect(inPod).toHaveLength(1);
    expect(inPod[0]).toMatch(/^targets: required but not set \(--targets or SDC_TARGETS\)/);
    expect(inPod[0]).toContain("not the pod's own namespace, spark-driver-cleaner");
    // Outside a pod: the same field named, with its help.
    expect(problemsOf(() => undefined)).toEqual([
      expect.stringMatching(/^targets: required but not set \(--targets or SDC_TARGETS\); expected: /),
    ]);
  });

  it('a bare namespace means the current context', () => {
    expect(loadConfig({ env: { SDC_TARGETS: 'spark' } }).targets).toEqual([
      { context: undefined, namespace: 'spark' },
    ]);
  });

  describe('discovered namespaces (context:* and namespaceSelector)', () => {
    it('kube:* with a selector from the environment: discovered, beside the fixed targets', () => {
      const c = loadConfig({
        env: { SDC_TARGETS: 'kube:fixed,kube:*', SDC_NAMESPACE_SELECTOR: 'spark-cleanup=on' },
      });
      expect(c.targets).toEqual([{ context: 'kube', namespace: 'fixed' }]);
      expect(c.discover).toEqual([{ context: 'kube' }]);
      expect(c.namespaceSelector).toBe('spark-cleanup=on');
      expect(redactConfig(c).targets).toEqual(['kube:fixed', 'kube:*']);
    });

    it('a bare * is the current context; flags and the file set them too', () => {
      const flags = loadConfig({ env: {}, flags: { targets: '*', namespaceSelector: 'team in (a,b)' } });
      expect(flags.discover).toEqual([{ context: undefined }]);
      expect(flags.targets).toEqual([]);
      const dir = mkdtempSync(join(tmpdir(), 'sdc-cfg-'));
      const file = join(dir, 'c.yaml');
      writeFileSync(
        file,
        'targets: [ "a:*", "arn:aws:eks:eu-west-1:1:cluster/x:*" ]\nnamespaceSelector: spark\n',
      );
      const c = loadConfig({ file, env: {} });
      expect(c.discover).toEqual([{ context: 'a' }, { context: 'arn:aws:eks:eu-west-1:1:cluster/x' }]);
      expect(c.namespaceSelector).toBe('spark');
    });

    const wrong: [string, Record<string, string>, RegExp][] = [
      [
        'kube:* without namespaceSelector',
        { SDC_TARGETS: 'kube:*' },
        /namespaceSelector \(--namespace-selector or SDC_NAMESPACE_SELECTOR\): not set; required with a context:\* target \(kube:\*\)/,
      ],
      [
        'namespaceSelector without a context:* target',
        { SDC_TARGETS: 'kube:spark', SDC_NAMESPACE_SELECTOR: 'a=b' },
        /SDC_NAMESPACE_SELECTOR.*: set, but no target is context:\*; add one/,
      ],
      [
        'a namespaceSelector that does not parse',
        { SDC_TARGETS: 'kube:*', SDC_NAMESPACE_SELECTOR: 'team in (a' },
        /SDC_NAMESPACE_SELECTOR.*expected a label selector/,
      ],
      [
        'the same context:* twice',
        { SDC_TARGETS: 'kube:*, kube:*', SDC_NAMESPACE_SELECTOR: 'a=b' },
        /SDC_TARGETS.*"kube:\*" is given twice/,
      ],
      [
        'a namespace pattern other than *',
        { SDC_TARGETS: 'kube:spark-*', SDC_NAMESPACE_SELECTOR: 'a=b' },
        /SDC_TARGETS.*"spark-\*" is not a namespace name.*expected context:namespace or context:\*/,
      ],
    ];
    for (const [name, env, message] of wrong)
      it(`${name} → ConfigError naming the field`, () => {
        expect(() => loadConfig({ env })).toThrow(message);
      });

    it('an empty namespaceSelector in the file is refused (it would select every namespace)', () => {
      const dir = mkdtempSync(join(tmpdir(), 'sdc-cfg-'));
      const file = join(dir, 'c.yaml');
      writeFileSync(file, 'targets: [ "kube:*" ]\nnamespaceSelector: ""\n');
      expect(() => loadConfig({ file, env: {} })).toThrow(
        /namespaceSelector.*empty; expected a label selector/,
      );
    });
  });

  const bad: [string, Record<string, string>, RegExp][] = [
    [
      'no target',
      { SDC_TARGETS: '', SDC_KUBECONFIG: '/k' },
      /targets: required but not set \(--targets or SDC_TARGETS\)/,
    ],
    ['bad namespace', { SDC_TARGETS: 'ctx:Spark_Jobs' }, /SDC_TARGETS: .*not a namespace name/],
    ['bad policy', { SDC_POLICY: 'SOME' }, /SDC_POLICY: "SOME": expected one of ALL, COMPLETED/],
    [
      'a state source Kyuubi does not have',
      { SDC_APPLICATION_STATE_SOURCE: 'SIDECAR' },
      /SDC_APPLICATION_STATE_SOURCE: "SIDECAR": expected one of POD, CONTAINER/,
    ],
    [
      'a state container that is not a container name',
      { SDC_APPLICATION_STATE_CONTAINER: 'spark driver' },
      /SDC_APPLICATION_STATE_CONTAINER: .*expected a container name \(an RFC 1123 label/,
    ],
    [
      'bad retention',
      { SDC_RETENTION: '5 minutes' },
      /SDC_RETENTION: "5 minutes" is not a duration; expected ISO-8601/,
    ],
    [
      'bad redis url',
      { SDC_REDIS_URL: 'localhost:6379' },
      /SDC_REDIS_URL: "localhost:6379": expected a URL starting with redis:\/\//,
    ],
    [
      'sentinel mode without sentinels nor master name',
      { SDC_REDIS_MODE: 'sentinel' },
      /redisSentinels \(--redis-sentinels or SDC_REDIS_SENTINELS\): not set; required with redisMode sentinel/,
    ],
    [
      'sentinel mode without master name',
      { SDC_REDIS_MODE: 'sentinel', SDC_REDIS_SENTINELS: 's1:26379' },
      /redisMasterName \(--redis-master-name or SDC_REDIS_MASTER_NAME\): not set; required with redisMode sentinel/,
    ],
    [
      'cluster mode without nodes',
      { SDC_REDIS_MODE: 'cluster' },
      /redisClusterNodes \(--redis-cluster-nodes or SDC_REDIS_CLUSTER_NODES\): not set; required with redisMode cluster/,
    ],
    [
      'a sentinel field in cluster mode',
      { SDC_REDIS_MODE: 'cluster', SDC_REDIS_CLUSTER_NODES: 'a:7000', SDC_REDIS_MASTER_NAME: 'mymaster' },
      /SDC_REDIS_MASTER_NAME: only used with redisMode sentinel, and redisMode is cluster/,
    ],
    [
      'a password field in single mode',
      { SDC_REDIS_PASSWORD: 'x' },
      /SDC_REDIS_PASSWORD: only used with redisMode sentinel or cluster, and redisMode is single \(single mode: user, password and TLS go in redisUrl\)/,
    ],
    [
      'bad sentinel address',
      { SDC_REDIS_MODE: 'sentinel', SDC_REDIS_SENTINELS: 's1:26379,s2:port', SDC_REDIS_MASTER_NAME: 'm' },
      /SDC_REDIS_SENTINELS: "s2:port" is not host:port/,
    ],
    [
      'bad redis mode',
      { SDC_REDIS_MODE: 'replicated' },
      /SDC_REDIS_MODE: "replicated": expected one of single, sentinel, cluster/,
    ],
    [
      'bad etcd endpoint',
      { SDC_ETCD_ENDPOINTS: 'http://a:2379,b:2379' },
      /SDC_ETCD_ENDPOINTS: "b:2379": expected a URL/,
    ],
    [
      'TTL too small',
      { SDC_ELECTION_TTL_SECONDS: '1' },
      /SDC_ELECTION_TTL_SECONDS: "1" is not an integer from 2/,
    ],
    [
      'bad recheck',
      { SDC_RECHECK: 'sometimes' },
      /SDC_RECHECK: "sometimes": expected one of resource-version, live, cache/,
    ],
    ['bad qps', { SDC_API_QPS: '0' }, /SDC_API_QPS: "0" is not a positive number/],
    ['bad burst', { SDC_API_BURST: '2.5' }, /SDC_API_BURST: "2.5" is not an integer/],
    [
      'bad informer scope',
      { SDC_INFORMER_SCOPE: 'everywhere' },
      /SDC_INFORMER_SCOPE: "everywhere": expected one of namespace, cluster/,
    ],
    ['bad apiHttp2', { SDC_API_HTTP2: 'yes' }, /SDC_API_HTTP2: "yes": expected one of off, on/],
    ['bad dry run', { SDC_DRY_RUN: 'maybe' }, /SDC_DRY_RUN: "maybe" is not a boolean/],
    ['bad port', { SDC_HTTP_PORT: '70000' }, /SDC_HTTP_PORT: "70000" is not an integer from 0 to 65535/],
    ['bad selector', { SDC_LABEL_SELECTOR: 'spark-role=driver,=x' }, /SDC_LABEL_SELECTOR: invalid label key/],
    ['bad replica id', { SDC_REPLICA_ID: 'a b' }, /SDC_REPLICA_ID: expected letters/],
    ['bad prefix', { SDC_QUEUE_PREFIX: 'a:b' }, /SDC_QUEUE_PREFIX: expected 1-32 letters/],
    [
      'half of basic auth',
      { SDC_DASHBOARD_USER: 'admin' },
      /^dashboardPassword \(--dashboard-password or SDC_DASHBOARD_PASSWORD\): not set; set both dashboardUser and dashboardPassword/,
    ],
    [
      'retry base delay above the max',
      { SDC_RETRY_BASE_DELAY: '10m', SDC_RETRY_MAX_DELAY: '1s' },
      /SDC_RETRY_BASE_DELAY: longer than retryMaxDelay \(1000 ms\)/,
    ],
    ['bad tombstone ttl', { SDC_TOMBSTONE_TTL: 'forever' }, /SDC_TOMBSTONE_TTL: "forever" is not a duration/],
    [
      'bad reconcile interval',
      { SDC_RECONCILE_INTERVAL: 'x' },
      /SDC_RECONCILE_INTERVAL: "x" is not a duration/,
    ],
    ['bad concurrency', { SDC_CONCURRENCY: '0' }, /SDC_CONCURRENCY: "0" is not an integer from 1/],
    ['bad log level', { SDC_LOG_LEVEL: 'loud' }, /SDC_LOG_LEVEL: "loud": expected one of trace/],
  ];
  for (const [name, env, pattern] of bad) {
    it(`${name}: one line naming the field and what is expected`, () => {
      const lines = problems(() => loadConfig({ env: { ...base, ...env } }));
      expect(lines.join('\n')).toMatch(pattern);
    });
  }

  it('an empty --dashboard-password: named, with what is expected', () => {
    const lines = problems(() =>
      loadConfig({ env: { ...base, SDC_DASHBOARD_USER: 'admin' }, flags: { dashboardPassword: '' } }),
    );
    expect(lines).toEqual(['--dashboard-password: empty; expected a password, or leave it unset']);
  });

  it('every bad field is reported, not just the first', () => {
    const lines = problems(() =>
      loadConfig({ env: { ...base, SDC_POLICY: 'x', SDC_RETENTION: 'y', SDC_API_QPS: '-1' } }),
    );
    expect(lines).toHaveLength(3);
  });

  it('an unknown key in the YAML file is reported with the known ones', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sdc-cfg-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(file, 'retension: PT1M\n');
    expect(problems(() => loadConfig({ file, env: base })).join()).toMatch(
      /retension in .*: unknown field; expected one of targets/,
    );
  });

  it('an unreadable or non-YAML file is a configuration error', () => {
    expect(problems(() => loadConfig({ file: '/nonexistent/c.yaml', env: base })).join()).toMatch(
      /cannot read the file \(ENOENT\)/,
    );
    const dir = mkdtempSync(join(tmpdir(), 'sdc-cfg-'));
    writeFileSync(join(dir, 'c.yaml'), 'a: [1,\n');
    expect(problems(() => loadConfig({ file: join(dir, 'c.yaml'), env: base })).join()).toMatch(
      /not valid YAML/,
    );
  });

  it('the effective-config log masks secrets', () => {
    const c = loadConfig({
      env: {
        ...base,
        SDC_REDIS_URL: 'redis://:s3cret@redis:6379',
        SDC_DASHBOARD_USER: 'u',
        SDC_DASHBOARD_PASSWORD: 'pw',
      },
    });
    const text = JSON.stringify(redactConfig(c));
    expect(text).not.toContain('s3cret');
    expect(text).not.toContain('"pw"');
    expect(text).toContain('redis://:***@redis:6379');
  });
});

describe('Redis shapes', () => {
  it('single (default): the URL', () => {
    expect(loadConfig({ env: { ...base, SDC_REDIS_URL: 'rediss://r:6380/1' } }).redis).toEqual({
      mode: 'single',
      url: 'rediss://r:6380/1',
    });
  });

  it('sentinel: addresses (default port 26379, IPv6 in brackets), master name, passwords, TLS; secrets masked', () => {
    const c = loadConfig({
      env: {
        ...base,
        SDC_REDIS_MODE: 'Sentinel',
        SDC_REDIS_SENTINELS: 's1, s2:26380,[::1]:26381',
        SDC_REDIS_MASTER_NAME: 'mymaster',
        SDC_REDIS_USERNAME: 'cleaner',
        SDC_REDIS_PASSWORD: 's3cret',
        SDC_REDIS_SENTINEL_PASSWORD: 's3ntinel',
        SDC_REDIS_TLS: 'true',
      },
    });
    expect(c.redis).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      masterName: 'mymaster',
      username: 'cleaner',
      password: 's3cret',
      sentinelPassword: 's3ntinel',
      tls: true,
    });
    const text = JSON.stringify(redactConfig(c));
    expect(text).not.toContain('s3cret');
    expect(text).not.toContain('s3ntinel');
    expect(describeRedis(c.redis)).toBe(
      'redisSentinels (--redis-sentinels, SDC_REDIS_SENTINELS) s1:26379,s2:26380,[::1]:26381, master mymaster',
    );
  });

  it('cluster: startup nodes from a YAML list (default port 6379), password masked', () => {
    const c = loadConfig({
      env: base,
      flags: { redisMode: 'cluster', redisClusterNodes: ['n1:7000', 'n2'], redisPassword: 's3cret' },
    });
    expect(c.redis).toEqual({
      mode: 'cluster',
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 6379 },
      ],
      password: 's3cret',
      tls: false,
    });
    expect(JSON.stringify(redactConfig(c))).not.toContain('s3cret');
  });
});

describe('secrets in URLs', () => {
  // ioredis turns every query parameter into a connection option, so the query is as secret as userinfo.
  const cases: [string, string, string][] = [
    ['userinfo password', 'redis://:s3cret@redis:6379', 'redis://:***@redis:6379'],
    ['ACL user and password', 'rediss://cleaner:s3cret@redis:6380/0', 'rediss://cleaner:***@redis:6380/0'],
    ['password in the query', 'redis://redis:6379?password=s3cret', 'redis://redis:6379?password=***'],
    [
      'user and password in the query, db kept',
      'redis://redis:6379/?db=2&username=cleaner&password=s3cret',
      'redis://redis:6379/?db=2&username=***&password=***',
    ],
    [
      'sentinel password, family kept',
      'redis://redis:6379?family=6&sentinelPassword=s3cret',
      'redis://redis:6379?family=6&sentinelPassword=***',
    ],
    ['both forms', 'redis://:s3cret@redis?password=s3cret', 'redis://:***@redis?password=***'],
    ['etcd with credentials', 'http://root:s3cret@etcd-0:2379', 'http://root:***@etcd-0:2379/'],
    ['nothing secret: unchanged', 'redis://127.0.0.1:6379', 'redis://127.0.0.1:6379'],
    ['not a URL, userinfo', 'redis://:s3cret@redis:port', 'redis://:***@redis:port'],
    ['not a URL, query', 'redis://redis:port?db=1&password=s3cret', 'redis://redis:port?db=1&password=***'],
    ['not a Redis URL: a fragment', 'redis://redis:6379/0#s3cret', 'redis://redis:6379/0#***'],
    ['not a URL, an unencoded # in the password', 'redis://:s3c#ret@redis:6379', 'redis://:***@redis:6379'],
    [
      'not a URL, user and a password with @ and /',
      'redis://u:s3/c@r@redis:70000',
      'redis://u:***@redis:70000',
    ],
    ['not a URL, a fragment', 'redis://redis:70000#s3cret', 'redis://redis:70000#***'],
  ];
  for (const [name, url, want] of cases) it(`maskUrl: ${name}`, () => expect(maskUrl(url)).toBe(want));

  for (const [name, url] of cases.filter(([n, u]) => u.startsWith('redis') && !n.startsWith('not a'))) {
    it(`SDC_REDIS_URL with a ${name}: the effective configuration holds no secret`, () => {
      const text = JSON.stringify(redactConfig(loadConfig({ env: { ...base, SDC_REDIS_URL: url } })));
      expect(text).not.toContain('s3cret');
    });
  }

  it('a refused URL is quoted with its secrets masked', () => {
    const lines = problems(() =>
      loadConfig({
        env: {
          ...base,
          SDC_REDIS_URL: 'http://:s3cret@redis:6379?password=s3cret',
          SDC_ETCD_ENDPOINTS: 'etcd://root:s3cret@etcd:2379',
        },
      }),
    );
    expect(lines).toEqual([
      'SDC_REDIS_URL: "http://:***@redis:6379/?password=***": expected a URL starting with redis:// or rediss://',
      'SDC_ETCD_ENDPOINTS: "etcd://root:***@etcd:2379": expected a URL starting with http:// or https://',
    ]);
  });

  // etcd3 hands everything after http:// to gRPC as the address: credentials would be neither used nor hidden.
  for (const endpoint of [
    'http://root:s3cret@etcd-0:2379',
    'http://etcd-0:2379?password=s3cret',
    'http://etcd-0:2379/v3',
  ]) {
    it(`etcd endpoint ${endpoint.replace('s3cret', '…')} → refused, masked`, () => {
      const lines = problems(() =>
        loadConfig({ env: { ...base, SDC_ETCD_ENDPOINTS: `http://etcd-1:2379,${endpoint}` } }),
      );
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^SDC_ETCD_ENDPOINTS: ".*": credentials, a path or a query in an etcd endpoint are not supported .*expected http\(s\):\/\/host:port$/,
      );
      expect(lines[0]).not.toContain('s3cret');
    });
  }

  it('etcd endpoints as host:port URLs are accepted', () => {
    expect(
      loadConfig({ env: { ...base, SDC_ETCD_ENDPOINTS: 'http://etcd-0:2379, https://etcd-1:2379/' } })
        .etcdEndpoints,
    ).toEqual(['http://etcd-0:2379', 'https://etcd-1:2379/']);
  });
});

describe('secured etcd settings', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sdc-etcd-cfg-'));
  const pem = join(dir, 'ca.pem');
  writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
  const notPem = join(dir, 'plain.txt');
  writeFileSync(notPem, 'hello\n');
  const password = join(dir, 'password');
  writeFileSync(password, 'pw\n');
  const tls = { ...base, SDC_ETCD_ENDPOINTS: 'https://etcd-0:2379' };

  it('the defaults: no TLS files, no user, the keys of earlier releases', () => {
    const c = loadConfig({ env: base });
    expect(c.etcdKeyPrefix).toBe('spark-driver-cleaner/');
    expect(Object.values(c.etcdSecurity).every((v) => v === undefined)).toBe(true);
  });

  it('TLS files, a user with a password file, and a prefix are taken', () => {
    const c = loadConfig({
      env: {
        ...tls,
        SDC_ETCD_CA_FILE: pem,
        SDC_ETCD_CERT_FILE: pem,
        SDC_ETCD_KEY_FILE: pem,
        SDC_ETCD_USERNAME: 'cleaner',
        SDC_ETCD_PASSWORD_FILE: password,
        SDC_ETCD_KEY_PREFIX: 'teams/spark/cleaner/',
      },
    });
    expect(c.etcdSecurity).toEqual({
      caFile: pem,
      certFile: pem,
      keyFile: pem,
      username: 'cleaner',
      password: undefined,
      passwordFile: password,
    });
    expect(c.etcdKeyPrefix).toBe('teams/spark/cleaner/');
  });

  it('run --check shows them from flags and from a config file, the password masked', async () => {
    const cli = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
    const check = (args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          [cli, 'run', '--check', ...args],
          { env: { PATH: process.env.PATH ?? '', SDC_TARGETS: 'ctx:ns' }, timeout: 30_000 },
          (err, stdout, stderr) => resolve({ code: err ? Number(err.code) : 0, stdout, stderr }),
        ),
      );
    const expected = {
      etcdEndpoints: ['https://etcd-0:2379/'],
      etcdSecurity: { caFile: pem, certFile: pem, keyFile: pem, username: 'cleaner', password: '***' },
      etcdKeyPrefix: 'teams/spark/cleaner/',
    };
    const fromFlags = await check([
      '--etcd-endpoints',
      'https://etcd-0:2379',
      '--etcd-ca-file',
      pem,
      '--etcd-cert-file',
      pem,
      '--etcd-key-file',
      pem,
      '--etcd-username',
      'cleaner',
      '--etcd-password',
      'etcd-s3cret',
      '--etcd-key-prefix',
      'teams/spark/cleaner/',
    ]);
    expect(fromFlags.code, fromFlags.stderr).toBe(0);
    expect(fromFlags.stdout).not.toContain('etcd-s3cret');
    expect(JSON.parse(fromFlags.stdout)).toMatchObject(expected);
    const file = join(dir, 'etcd.yaml');
    writeFileSync(
      file,
      [
        'etcdEndpoints: https://etcd-0:2379',
        `etcdCaFile: ${pem}`,
        `etcdCertFile: ${pem}`,
        `etcdKeyFile: ${pem}`,
        'etcdUsername: cleaner',
        'etcdPassword: etcd-s3cret',
        'etcdKeyPrefix: teams/spark/cleaner/',
      ].join('\n'),
    );
    const fromFile = await check(['--config', file]);
    expect(fromFile.code, fromFile.stderr).toBe(0);
    expect(fromFile.stdout).not.toContain('etcd-s3cret');
    expect(JSON.parse(fromFile.stdout)).toMatchObject(expected);
  });

  it('each mistake is named by its field', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [
        { ...tls, SDC_ETCD_CA_FILE: join(dir, 'missing.pem') },
        /^SDC_ETCD_CA_FILE: ".*missing\.pem": cannot read the file \(ENOENT\)/,
      ],
      [{ ...tls, SDC_ETCD_CA_FILE: notPem }, /^SDC_ETCD_CA_FILE: ".*plain\.txt": not a PEM file/],
      [
        { ...tls, SDC_ETCD_CERT_FILE: pem },
        /^etcdKeyFile .*: not set; set both etcdCertFile and etcdKeyFile/,
      ],
      [
        { ...base, SDC_ETCD_ENDPOINTS: 'http://etcd-0:2379', SDC_ETCD_CA_FILE: pem },
        /^SDC_ETCD_CA_FILE: set, but etcd endpoint http:\/\/etcd-0:2379\/? is not https:\/\//,
      ],
      [{ ...base, SDC_ETCD_USERNAME: 'u' }, /^SDC_ETCD_USERNAME: set, but etcdEndpoints is not/],
      [{ ...tls, SDC_ETCD_USERNAME: 'u' }, /^etcdPassword .*: not set; etcdUsername is set/],
      [{ ...tls, SDC_ETCD_PASSWORD: 'p' }, /^etcdUsername .*: not set; a password is set/],
      [
        { ...tls, SDC_ETCD_USERNAME: 'u', SDC_ETCD_PASSWORD: 'p', SDC_ETCD_PASSWORD_FILE: password },
        /^SDC_ETCD_PASSWORD_FILE: set together with etcdPassword/,
      ],
      [
        { ...tls, SDC_ETCD_KEY_PREFIX: 'cleaner' },
        /^SDC_ETCD_KEY_PREFIX: expected path segments .* ending in \//,
      ],
    ];
    for (const [env, line] of cases) {
      const lines = problems(() => loadConfig({ env }));
      expect(lines, JSON.stringify(env)).toHaveLength(1);
      expect(lines[0]).toMatch(line);
    }
  });

  it('the etcd password is masked in the logged configuration', () => {
    const c = loadConfig({
      env: { ...tls, SDC_ETCD_USERNAME: 'cleaner', SDC_ETCD_PASSWORD: 'Zq7-etcd-pw' },
    });
    expect(JSON.stringify(redactConfig(c))).not.toContain('Zq7-etcd-pw');
    expect(JSON.stringify(redactConfig(c))).toContain('cleaner');
  });
});

describe('the HTTP port beyond loopback needs credentials, or the explicit opt-out', () => {
  const creds = { SDC_DASHBOARD_USER: 'ops', SDC_DASHBOARD_PASSWORD: 'pw' };
  const optOut = { SDC_HTTP_ALLOW_UNAUTHENTICATED: 'true' };
  const cases: [string, string, Record<string, string>, boolean][] = [
    ['IPv4 loopback', '127.0.0.1', {}, true],
    ['anywhere in 127/8', '127.1.2.3', {}, true],
    ['IPv6 loopback', '::1', {}, true],
    ['localhost', 'localhost', {}, true],
    ['every IPv4 address', '0.0.0.0', {}, false],
    ['every IPv6 address', '::', {}, false],
    ['a pod IP', '10.0.0.5', {}, false],
    ['a host name (it may resolve anywhere)', 'cleaner.example', {}, false],
    ['every address, with credentials', '0.0.0.0', creds, true],
    ['every address, with the opt-out', '0.0.0.0', optOut, true],
  ];
  for (const [name, host, extra, accepted] of cases)
    it(`${name} (${host}${Object.keys(extra).length ? ` + ${Object.keys(extra).join(', ')}` : ''}) → ${accepted ? 'accepted' : 'refused naming httpHost and the fix'}`, () => {
      const load = () => loadConfig({ env: { ...base, SDC_HTTP_HOST: host, ...extra } });
      if (accepted) expect(load().httpHost).toBe(host);
      else
        expect(problems(load)).toEqual([
          expect.stringMatching(
            /^SDC_HTTP_HOST: .* is not a loopback address and no dashboard credentials are set: .*set dashboardUser and dashboardPassword.*httpAllowUnauthenticated true/,
          ),
        ]);
    });

  it('the opt-out is warned about beyond loopback without credentials, and only then', () => {
    const warned = (env: Record<string, string>) =>
      configWarnings(loadConfig({ env: { ...base, ...env } })).map((w) => w.field);
    expect(warned({ SDC_HTTP_HOST: '0.0.0.0', ...optOut })).toEqual(['httpAllowUnauthenticated']);
    expect(warned({ SDC_HTTP_HOST: '127.0.0.1', ...optOut })).toEqual([]);
    expect(warned({ SDC_HTTP_HOST: '0.0.0.0', ...optOut, ...creds })).toEqual([]);
  });
});

describe('a redisUrl the Redis client cannot use as written is refused, its secrets masked', () => {
  const cases: [string, string, string | undefined][] = [
    ['a plain URL', 'redis://redis:6379', undefined],
    ['a database number', 'redis://redis:6379/3', undefined],
    ['a percent-encoded password', 'redis://:p%40ss%23@redis:6379', undefined],
    ['db in the query', 'redis://redis:6379?db=2', undefined],
    [
      'malformed percent-encoding',
      'redis://:s3cret%zz@redis:6379',
      'the password has malformed percent-encoding',
    ],
    [
      'malformed percent-encoding in the user',
      'redis://us%er:pw@redis:6379',
      'the user has malformed percent-encoding',
    ],
    ['a database that is no number', 'redis://redis:6379/abc', 'the database (/abc) is not a number'],
    ['a path of two segments', 'redis://redis:6379/0/1', 'the database (/0/1) is not a number'],
    ['db in the query that is no number', 'redis://redis:6379?db=x', 'the database (db=x) is not a number'],
    ['a fragment', 'redis://redis:6379/0#s3cret', 'a fragment (#…) is ignored by the Redis client'],
    ['an unencoded # in the password', 'redis://:s3c#ret@redis:6379', 'a "#" ends the address there'],
    ['a port out of range', 'redis://redis:70000', 'port 70000 is out of range; expected 1 to 65535'],
  ];
  for (const [name, url, problem] of cases)
    it(`${name}: ${problem ?? 'accepted'}`, () => {
      const load = () => loadConfig({ env: { ...base, SDC_REDIS_URL: url } });
      if (problem === undefined) {
        expect(load().redis).toEqual({ mode: 'single', url });
        return;
      }
      const lines = problems(load);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(problem);
      expect(lines[0]).toMatch(/^SDC_REDIS_URL: "/);
      expect(lines.join('\n')).not.toMatch(/s3c/);
    });
});
