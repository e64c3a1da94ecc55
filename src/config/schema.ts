/**
 * The validated configuration of one replica (zod). Input values may be strings (environment, flags) or
 * typed (YAML); every field is coerced and checked here, and each failure names the field and what is
 * expected. Defaults live in {@link FIELDS}.
 *
 * One file, long, because the schema of every setting and the rules between settings are read together (the field
 * table itself is src/config/fields.ts).
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { z } from 'zod';
import { formatDurationMs, parseDurationMs } from './duration.ts';
import { fieldSpec, rangeMs } from './fields.ts';
import { exposureProblem } from './http-exposure.ts';
import { parseLabelSelector } from './label-selector.ts';
import { maskUrl } from './redact.ts';
import { redisUrlProblem, unparseableUrlProblem } from './redis-url.ts';
import { labelSelectorProblem } from './selector-scope.ts';

/**
 * A (context, namespace) pair as written in the configuration: Kyuubi's `KubernetesInfo`. `context` undefined =
 * current/in-cluster. Resolved into a `TargetRef` (src/queue/job-identity.ts, context named) when the
 * kubeconfig is read (src/kube/context-clients.ts).
 */
export interface TargetSpec {
  readonly context: string | undefined;
  readonly namespace: string;
}

const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * A cluster name (src/kube/cluster-identity.ts): a DNS label (RFC 1123), at most 63 characters, as namespace
 * names. It goes into Redis keys, etcd keys, ZooKeeper paths and metric labels.
 */
export const CLUSTER_NAME = NAMESPACE;

/** What {@link CLUSTER_NAME} means, for error messages. */
export const CLUSTER_NAME_RULE =
  'a DNS label: lowercase letters, digits and -, at most 63, starting and ending with a letter or digit (e.g. prod-eu-1)';
const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$/;

/**
 * Parses `context:namespace` (the namespace is after the LAST colon, since context names such as EKS ARNs
 * contain colons) or a bare `namespace`.
 */
export function parseTarget(text: string): TargetSpec | string {
  const t = text.trim();
  const i = t.lastIndexOf(':');
  const context = i >= 0 ? t.slice(0, i) : undefined;
  const namespace = i >= 0 ? t.slice(i + 1) : t;
  if (context === '') return `"${t}": the context before ":" is empty`;
  if (!NAMESPACE.test(namespace)) return `"${t}": "${namespace}" is not a namespace name (RFC 1123 label)`;
  return { context, namespace };
}

/**
 * A context whose namespaces are discovered, written `context:*` (or `*` for the current context) in
 * `targets`: every namespace of it matching `namespaceSelector` is a target while it matches
 * (src/kube/namespace-discovery.ts).
 */
export interface DiscoverySpec {
  readonly context: string | undefined;
}

/** `context:*` or `*`: the context whose namespaces are discovered; undefined when `text` names a namespace. */
function parseDiscovery(text: string): DiscoverySpec | undefined {
  const t = text.trim();
  if (t === '*') return { context: undefined };
  if (!t.endsWith(':*') || t.length < 3) return undefined;
  return { context: t.slice(0, -2) };
}

const list = z
  .union([z.string(), z.array(z.string())])
  .transform((v) => (Array.isArray(v) ? v : v.split(',')).map((s) => s.trim()).filter(Boolean));

/**
 * A duration field, in ms, within its range ({@link FIELDS}): outside it the message names the field,
 * the range, the value and why the bounds are what they are.
 */
const duration = (key: string) => {
  const spec = fieldSpec(key);
  const range = rangeMs(spec);
  return z.union([z.string(), z.number()]).transform((v, ctx) => {
    const ms = parseDurationMs(v);
    if (ms === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `"${v}" is not a duration; expected ISO-8601 (PT5M), ms (300000) or 30s/5m/24h (${key})`,
      });
      return z.NEVER;
    }
    if (range && (ms < range.minMs || ms > range.maxMs)) {
      ctx.addIssue({
        code: 'custom',
        message:
          `"${v}" (${formatDurationMs(ms)}) is out of range: ${key} must be from ${spec.range?.min} to ` +
          `${spec.range?.max} (${spec.range?.why})`,
      });
      return z.NEVER;
    }
    return ms;
  });
};

/** An integer from `min` to `max`; `why` (the reason for the bounds) is added to the message. */
const int = (min: number, max: number, why?: string) =>
  z.union([z.string(), z.number()]).transform((v, ctx) => {
    const n = typeof v === 'number' ? v : Number(v.trim());
    if (!Number.isInteger(n) || n < min || n > max || (typeof v === 'string' && v.trim() === '')) {
      ctx.addIssue({
        code: 'custom',
        message: `"${v}" is not an integer from ${min} to ${max}${why ? ` (${why})` : ''}`,
      });
      return z.NEVER;
    }
    return n;
  });

/** The range of a field written in whole seconds, as `[min, max, why]` for {@link int}. */
function secondsRange(key: string): [number, number, string | undefined] {
  const spec = fieldSpec(key);
  const r = rangeMs(spec);
  return r ? [r.minMs / 1000, r.maxMs / 1000, spec.range?.why] : [0, Number.MAX_SAFE_INTEGER, undefined];
}

const positive = z.union([z.string(), z.number()]).transform((v, ctx) => {
  const n = typeof v === 'number' ? v : Number(v.trim());
  if (!Number.isFinite(n) || n <= 0) {
    ctx.addIssue({ code: 'custom', message: `"${v}" is not a positive number` });
    return z.NEVER;
  }
  return n;
});

const bool = z.union([z.boolean(), z.string()]).transform((v, ctx) => {
  if (typeof v === 'boolean') return v;
  const s = v.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(s)) return true;
  if (['false', '0', 'no', 'off', ''].includes(s)) return false;
  ctx.addIssue({ code: 'custom', message: `"${v}" is not a boolean; expected true or false` });
  return z.NEVER;
});

/**
 * A URL of one of `protocols`, then `check(url)` (a problem, or undefined); every message quotes the value
 * with its secrets masked.
 */
const url = (protocols: string[], check?: (url: URL) => string | undefined) =>
  z.string().superRefine((v, ctx) => {
    let parsed: URL | undefined;
    try {
      parsed = new URL(v);
    } catch {
      // reported below
    }
    const expected = `expected a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`;
    const problem = !parsed
      ? (protocols.some((p) => v.startsWith(`${p}//`)) && unparseableUrlProblem(v)) || expected
      : !protocols.includes(parsed.protocol)
        ? expected
        : check?.(parsed);
    if (problem) ctx.addIssue({ code: 'custom', message: `"${maskUrl(v)}": ${problem}` });
  });

/**
 * An etcd endpoint: `http(s)://host:port` and nothing else. etcd3 strips the scheme and hands the rest to
 * gRPC as the address, so credentials (`user:secret@`), a path or a query would end up in a host name —
 * and in its connection errors — instead of authenticating; credentials are their own fields (`etcdUsername`, …).
 */
const etcdEndpoint = url(['http:', 'https:'], (u) =>
  u.username || u.password || u.search || u.hash || u.pathname !== '/'
    ? 'credentials, a path or a query in an etcd endpoint are not supported (the etcd client would pass ' +
      'them to gRPC as part of the address; an etcd user goes in etcdUsername and etcdPassword or ' +
      'etcdPasswordFile); expected http(s)://host:port'
    : undefined,
);

/**
 * A file read at start (a mounted Secret): a missing or unreadable one is refused here (exit 2) rather than at
 * the first etcd call. `pem`: it must hold a PEM block (`-----BEGIN `).
 */
const readableFile = (pem: boolean) =>
  z
    .string()
    .min(1, 'empty; expected a file path, or leave it unset')
    .superRefine((path, ctx) => {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (err) {
        ctx.addIssue({
          code: 'custom',
          message: `"${path}": cannot read the file (${(err as NodeJS.ErrnoException).code ?? String(err)}); expected a readable file`,
        });
        return;
      }
      if (pem && !text.includes('-----BEGIN '))
        ctx.addIssue({ code: 'custom', message: `"${path}": not a PEM file (no "-----BEGIN " line)` });
      if (!pem && text.trim() === '')
        ctx.addIssue({ code: 'custom', message: `"${path}": the file is empty; expected the password` });
    });

/** The fields that secure the etcd connection: each needs `etcdEndpoints`. */
const ETCD_SECURITY_FIELDS = [
  'etcdCaFile',
  'etcdCertFile',
  'etcdKeyFile',
  'etcdUsername',
  'etcdPassword',
  'etcdPasswordFile',
] as const;

const upperEnum = <T extends string>(values: readonly [T, ...T[]]) =>
  z
    .string()
    .transform((v) => v.trim().toUpperCase())
    .pipe(z.enum(values, { error: (iss) => `"${String(iss.input)}": expected one of ${values.join(', ')}` }));

const lowerEnum = <T extends string>(values: readonly [T, ...T[]]) =>
  z
    .string()
    .transform((v) => v.trim().toLowerCase())
    .pipe(z.enum(values, { error: (iss) => `"${String(iss.input)}": expected one of ${values.join(', ')}` }));

/** A `host:port` address (IPv6 in brackets); `defaultPort` when the port is left out. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** Parses `host:port`, `host` or `[v6]:port`; a problem as a string. */
export function parseHostPort(text: string, defaultPort: number): HostPort | string {
  const t = text.trim();
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:\s/]+))(?::(\d{1,5}))?$/.exec(t);
  const host = m?.[1] ?? m?.[2];
  const port = m?.[3] === undefined ? defaultPort : Number(m[3]);
  if (!host || !(isIP(host) !== 0 || HOSTNAME.test(host)) || port < 1 || port > 65535)
    return `"${t}" is not host:port (a host name or IP address, a port from 1 to 65535)`;
  return { host, port };
}

/** A comma-separated list of `host:port` addresses. */
const hostPorts = (defaultPort: number) =>
  list.transform((items, ctx) => {
    const out: HostPort[] = [];
    for (const item of items) {
      const hp = parseHostPort(item, defaultPort);
      if (typeof hp === 'string') ctx.addIssue({ code: 'custom', message: hp });
      else out.push(hp);
    }
    if (items.length === 0)
      ctx.addIssue({ code: 'custom', message: 'empty; expected at least one host:port' });
    return out;
  });

/**
 * Where the queues' Redis is and how to reach it: one shape per deployment (src/queue/redis-client.ts turns
 * it into a client; nothing else looks at the shape).
 * - `single`: one server, by URL (password and TLS in the URL: `rediss://user:secret@host:6380/0`);
 * - `sentinel`: the master the Sentinels name for `masterName`, followed across failovers;
 * - `cluster`: a Redis Cluster found from its startup nodes.
 */
export type RedisConnection =
  | { readonly mode: 'single'; readonly url: string }
  | {
      readonly mode: 'sentinel';
      readonly sentinels: readonly HostPort[];
      readonly masterName: string;
      readonly username?: string;
      readonly password?: string;
      readonly sentinelPassword?: string;
      readonly tls: boolean;
    }
  | {
      readonly mode: 'cluster';
      readonly nodes: readonly HostPort[];
      readonly username?: string;
      readonly password?: string;
      readonly tls: boolean;
    };

/** The fields of each Redis mode besides `redisMode`: set for another mode, they are refused. */
const REDIS_MODE_FIELDS = {
  single: [] as string[],
  sentinel: [
    'redisSentinels',
    'redisMasterName',
    'redisUsername',
    'redisPassword',
    'redisSentinelPassword',
    'redisTls',
  ],
  cluster: ['redisClusterNodes', 'redisUsername', 'redisPassword', 'redisTls'],
} as const;
const REDIS_REQUIRED = {
  single: [] as string[],
  sentinel: ['redisSentinels', 'redisMasterName'],
  cluster: ['redisClusterNodes'],
} as const;
const REDIS_OPTIONAL_FIELDS = [
  'redisSentinels',
  'redisMasterName',
  'redisClusterNodes',
  'redisUsername',
  'redisPassword',
  'redisSentinelPassword',
] as const;

/**
 * How the etcd connection is secured: TLS files (PEM paths; `certFile` with `keyFile`) and etcd user auth
 * (the password given, or read from `passwordFile`). All unset: plain connections, no auth.
 */
export interface EtcdSecurity {
  readonly caFile?: string | undefined;
  readonly certFile?: string | undefined;
  readonly keyFile?: string | undefined;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  readonly passwordFile?: string | undefined;
}

/** A cluster name ({@link CLUSTER_NAME}): it goes into Redis keys, etcd keys, ZooKeeper paths, metric labels. */
const clusterName = z
  .string()
  .transform((v) => v.trim())
  .refine((v) => CLUSTER_NAME.test(v), {
    error: (iss) => `"${String(iss.input)}": expected ${CLUSTER_NAME_RULE}`,
  });

/** `context=name` pairs (the context is everything before the last `=`). */
const clusterNames = list.transform((items, ctx) => {
  const out: { context: string; name: string }[] = [];
  for (const item of items) {
    const i = item.lastIndexOf('=');
    const context = i > 0 ? item.slice(0, i).trim() : '';
    const name = i > 0 ? item.slice(i + 1).trim() : '';
    if (!context || !name) {
      ctx.addIssue({ code: 'custom', message: `"${item}": expected context=name (e.g. prod-eu=prod-eu-1)` });
      continue;
    }
    if (!CLUSTER_NAME.test(name)) {
      ctx.addIssue({ code: 'custom', message: `"${item}": the name "${name}" is not ${CLUSTER_NAME_RULE}` });
      continue;
    }
    const first = out.find((x) => x.context === context);
    if (first && first.name !== name)
      ctx.addIssue({
        code: 'custom',
        message: `context ${context} is named twice (${first.name} and ${name}); expected one name per context`,
      });
    else if (!first) out.push({ context, name });
  }
  return out;
});

/** The zod schema over raw values keyed by {@link FIELDS} keys. */
export const configSchema = z
  .object({
    targets: list.transform((items, ctx) => {
      const fixed: TargetSpec[] = [];
      const discover: DiscoverySpec[] = [];
      for (const item of items) {
        const d = parseDiscovery(item);
        if (d) {
          if (discover.some((x) => x.context === d.context))
            ctx.addIssue({
              code: 'custom',
              message: `"${item}" is given twice; expected each context:* once`,
            });
          else discover.push(d);
          continue;
        }
        const t = parseTarget(item);
        if (typeof t === 'string')
          ctx.addIssue({ code: 'custom', message: `${t}; expected context:namespace or context:*` });
        else fixed.push(t);
      }
      if (items.length === 0)
        ctx.addIssue({
          code: 'custom',
          message:
            'no target given; expected at least one context:namespace, or context:* with namespaceSelector',
        });
      return { fixed, discover };
    }),
    // Which namespaces of a `context:*` target are cleaned (src/kube/namespace-discovery.ts).
    namespaceSelector: z
      .string()
      .superRefine((v, ctx) => {
        if (v.trim() === '') {
          ctx.addIssue({
            code: 'custom',
            message: 'empty; expected a label selector such as spark-cleanup=enabled, or leave it unset',
          });
          return;
        }
        try {
          parseLabelSelector(v);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: `${(err as Error).message}; expected a label selector` });
        }
      })
      .optional(),
    kubeconfig: z.string().min(1).optional(),
    clusterName: clusterName.optional(),
    clusterNames: clusterNames.optional(),
    // Refused unless it narrows: every selected pod is deleted once terminal (src/config/selector-scope.ts).
    labelSelector: z.string().superRefine((v, ctx) => {
      const problem = labelSelectorProblem(v);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
    policy: upperEnum(['ALL', 'COMPLETED']),
    applicationStateSource: upperEnum(['POD', 'CONTAINER']),
    // Kyuubi matches it ignoring case (`equalsIgnoreCase`), so either case is accepted as Kyuubi's is.
    applicationStateContainer: z
      .string()
      .trim()
      .regex(
        /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/i,
        'expected a container name (an RFC 1123 label, e.g. spark-kubernetes-driver), as in kyuubi.kubernetes.application.state.container',
      ),
    retention: duration('retention'),
    redisUrl: url(['redis:', 'rediss:'], redisUrlProblem),
    redisMode: lowerEnum(['single', 'sentinel', 'cluster']),
    redisSentinels: hostPorts(26379).optional(),
    redisMasterName: z.string().min(1, 'empty; expected the master group name').optional(),
    redisClusterNodes: hostPorts(6379).optional(),
    redisUsername: z.string().min(1, 'empty; expected a user name, or leave it unset').optional(),
    redisPassword: z.string().min(1, 'empty; expected a password, or leave it unset').optional(),
    redisSentinelPassword: z.string().min(1, 'empty; expected a password, or leave it unset').optional(),
    redisTls: bool,
    etcdEndpoints: list.pipe(z.array(etcdEndpoint)).optional(),
    etcdCaFile: readableFile(true).optional(),
    etcdCertFile: readableFile(true).optional(),
    etcdKeyFile: readableFile(true).optional(),
    etcdUsername: z.string().min(1, 'empty; expected a user name, or leave it unset').optional(),
    etcdPassword: z.string().min(1, 'empty; expected a password, or leave it unset').optional(),
    etcdPasswordFile: readableFile(false).optional(),
    etcdKeyPrefix: z
      .string()
      .regex(
        /^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*\/$/,
        'expected path segments of letters, digits, - _ . separated by / and ending in / (e.g. spark-driver-cleaner/)',
      ),
    zookeeper: z
      .string()
      .regex(
        /^[A-Za-z0-9.\-[\]:]+:\d{1,5}(,[A-Za-z0-9.\-[\]:]+:\d{1,5})*(\/[^/\s]+)*$/,
        'expected host:port[,host:port…] with an optional chroot /path',
      )
      .optional(),
    zookeeperRoot: z
      .string()
      .regex(
        /^(\/[A-Za-z0-9_.-]+)+$/,
        'expected an absolute path such as /spark-driver-cleaner (no trailing /)',
      )
      .refine(
        (v) => !/^\/kyuubi(\/|$)/.test(v),
        "inside Kyuubi's default kyuubi.ha.namespace (/kyuubi): Kyuubi reads every child there as a server address; expected a path outside it, such as /spark-driver-cleaner",
      ),
    zookeeperAuth: z
      .string()
      .regex(/^[^:\s]+:\S+$/, 'expected user:password')
      .optional(),
    // Read here, so that `run --check` and the start refuse an unreadable or malformed file (exit 2).
    zookeeperAuthFile: z
      .string()
      .min(1)
      .transform((path, ctx) => {
        let text: string;
        try {
          text = readFileSync(path, 'utf8').trim();
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: `cannot read ${path}: ${(err as Error).message}` });
          return z.NEVER;
        }
        if (!/^[^:\s]+:\S+$/.test(text)) {
          ctx.addIssue({ code: 'custom', message: `${path}: expected one line user:password` });
          return z.NEVER;
        }
        return { path, auth: text };
      })
      .optional(),
    electionTtlSeconds: int(...secondsRange('electionTtlSeconds')),
    recheck: lowerEnum(['resource-version', 'live', 'cache']),
    apiQps: positive,
    apiBurst: int(1, 100_000),
    informerScope: lowerEnum(['namespace', 'cluster']),
    apiHttp2: lowerEnum(['off', 'on']),
    apiTimeout: duration('apiTimeout'),
    concurrency: int(1, 1000),
    retryBaseDelay: duration('retryBaseDelay'),
    retryMaxDelay: duration('retryMaxDelay'),
    dryRun: bool,
    replicaId: z
      .string()
      .regex(/^[A-Za-z0-9][-A-Za-z0-9_.]{0,127}$/, 'expected letters, digits, - _ . (at most 128)')
      .optional(),
    // Checked here, not at listen time: a typo must be a configuration error (exit 2), not a crash.
    httpHost: z
      .string()
      .refine((v) => isIP(v) !== 0 || HOSTNAME.test(v), 'expected an IP address or a host name (RFC 1123)'),
    httpPort: int(0, 65535),
    httpAllowUnauthenticated: bool,
    tombstoneTtl: duration('tombstoneTtl'),
    reconcileInterval: duration('reconcileInterval'),
    overdueGrace: duration('overdueGrace').optional(),
    queuePrefix: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,32}$/, 'expected 1-32 letters, digits, - or _ (no colon)'),
    logLevel: lowerEnum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']),
    dashboardReadOnly: bool,
    dashboardUser: z.string().min(1, 'empty; expected a user name, or leave it unset').optional(),
    dashboardPassword: z.string().min(1, 'empty; expected a password, or leave it unset').optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    // Discovery takes both halves: `context:*` targets and the selector of their namespaces.
    if (c.targets.discover.length > 0 && c.namespaceSelector === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['namespaceSelector'],
        message: `not set; required with a context:* target (${c.targets.discover.map(discoveryLabel).join(', ')}): the labels of the namespaces to clean, e.g. spark-cleanup=enabled`,
      });
    if (c.targets.discover.length === 0 && c.namespaceSelector !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['namespaceSelector'],
        message:
          'set, but no target is context:*; add one (e.g. my-context:*) or leave namespaceSelector unset',
      });
    if ((c.dashboardUser === undefined) !== (c.dashboardPassword === undefined)) {
      // Named by the half that is missing, so the message points at what to add.
      const missing = c.dashboardUser === undefined ? 'dashboardUser' : 'dashboardPassword';
      ctx.addIssue({
        code: 'custom',
        path: [missing],
        message: 'not set; set both dashboardUser and dashboardPassword, or neither',
      });
    }
    // The dashboard and /api/v1/ open to the network without credentials (src/config/http-exposure.ts).
    const exposed = exposureProblem(c);
    if (exposed) ctx.addIssue({ code: 'custom', path: ['httpHost'], message: exposed });
    // Each Redis mode takes its own fields: a field of another mode is a mistake, not something to ignore.
    for (const key of REDIS_REQUIRED[c.redisMode]) {
      if (c[key as keyof typeof c] === undefined)
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `not set; required with redisMode ${c.redisMode}`,
        });
    }
    const allowed: readonly string[] = REDIS_MODE_FIELDS[c.redisMode];
    for (const key of [...REDIS_OPTIONAL_FIELDS, 'redisTls'] as const) {
      const set = key === 'redisTls' ? c.redisTls : c[key] !== undefined;
      if (set && !allowed.includes(key)) {
        const modes = (['sentinel', 'cluster'] as const).filter((m) =>
          (REDIS_MODE_FIELDS[m] as readonly string[]).includes(key),
        );
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message:
            `only used with redisMode ${modes.join(' or ')}, and redisMode is ${c.redisMode}` +
            (c.redisMode === 'single' ? ' (single mode: user, password and TLS go in redisUrl)' : ''),
        });
      }
    }
    // etcd security: each field needs etcd, pairs come together, TLS files need https:// endpoints.
    const etcdIssue = (key: string, message: string) =>
      ctx.addIssue({ code: 'custom', path: [key], message });
    if (!c.etcdEndpoints?.length) {
      for (const key of ETCD_SECURITY_FIELDS)
        if (c[key] !== undefined)
          etcdIssue(key, 'set, but etcdEndpoints is not (single-server mode uses no etcd)');
    } else {
      if ((c.etcdCertFile === undefined) !== (c.etcdKeyFile === undefined))
        etcdIssue(
          c.etcdCertFile === undefined ? 'etcdCertFile' : 'etcdKeyFile',
          'not set; set both etcdCertFile and etcdKeyFile, or neither',
        );
      const tlsFile = (['etcdCaFile', 'etcdCertFile', 'etcdKeyFile'] as const).find(
        (k) => c[k] !== undefined,
      );
      const plain = c.etcdEndpoints.find((e) => !e.startsWith('https:'));
      if (tlsFile && plain)
        etcdIssue(
          tlsFile,
          `set, but etcd endpoint ${maskUrl(plain)} is not https://; expected https:// endpoints with TLS files`,
        );
      if (c.etcdPassword !== undefined && c.etcdPasswordFile !== undefined)
        etcdIssue('etcdPasswordFile', 'set together with etcdPassword; expected one of them');
      const hasPassword = c.etcdPassword !== undefined || c.etcdPasswordFile !== undefined;
      if (c.etcdUsername === undefined && hasPassword)
        etcdIssue(
          'etcdUsername',
          'not set; a password is set (etcdPassword or etcdPasswordFile): set the user too',
        );
      if (c.etcdUsername !== undefined && !hasPassword)
        etcdIssue('etcdPassword', 'not set; etcdUsername is set: set etcdPassword or etcdPasswordFile');
    }
    if (c.zookeeper !== undefined && (c.etcdEndpoints?.length ?? 0) > 0)
      ctx.addIssue({
        code: 'custom',
        path: ['zookeeper'],
        message:
          'set together with etcdEndpoints; leadership uses one backend: set etcdEndpoints or zookeeper, not both ' +
          '(to unset etcdEndpoints where a base config sets it, such as the shipped ConfigMap, set it empty: SDC_ETCD_ENDPOINTS=)',
      });
    // A chroot in the connect string is prepended to every path: the root that matters is chroot + root.
    const chroot = /(\/[^,]*)$/.exec(c.zookeeper ?? '')?.[1];
    if (chroot !== undefined && /^\/kyuubi(\/|$)/.test(`${chroot}${c.zookeeperRoot}`))
      ctx.addIssue({
        code: 'custom',
        path: ['zookeeper'],
        message: `its chroot ${chroot} puts zookeeperRoot at ${chroot}${c.zookeeperRoot}, inside Kyuubi's default kyuubi.ha.namespace (/kyuubi): Kyuubi reads every child there as a server address; expected a chroot outside it, or none`,
      });
    for (const key of ['zookeeperAuth', 'zookeeperAuthFile'] as const)
      if (c[key] !== undefined && c.zookeeper === undefined)
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: 'only used with zookeeper, and zookeeper is not set',
        });
    if (c.zookeeperAuth !== undefined && c.zookeeperAuthFile !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['zookeeperAuthFile'],
        message: 'set together with zookeeperAuth; set one of them',
      });
    if (c.retryBaseDelay > c.retryMaxDelay)
      ctx.addIssue({
        code: 'custom',
        path: ['retryBaseDelay'],
        message: `longer than retryMaxDelay (${c.retryMaxDelay} ms); expected at most it`,
      });
  })
  .transform((c) => ({
    /** The fixed targets (`context:namespace`). */
    targets: c.targets.fixed,
    /**
     * The contexts written `context:*`: their namespaces matching `namespaceSelector` are targets while they
     * match (src/replica-supervisor.ts).
     */
    discover: c.targets.discover,
    namespaceSelector: c.namespaceSelector,
    kubeconfig: c.kubeconfig,
    /**
     * The explicit cluster names (src/kube/cluster-identity.ts): `clusterName` for the default context's
     * cluster, `clusterNames` per named context; every other cluster's name is derived from its CA.
     */
    naming: { clusterName: c.clusterName, clusterNames: c.clusterNames ?? [] },
    labelSelector: c.labelSelector,
    policy: c.policy,
    /**
     * Kyuubi's application state settings (`kyuubi.kubernetes.application.state.source` and `.container`):
     * what counts as a finished driver (src/kube/application-state.ts `AppStateSettings`).
     */
    applicationState: { source: c.applicationStateSource, container: c.applicationStateContainer },
    retentionMs: c.retention,
    redis: redisConnection(c),
    etcdEndpoints: c.etcdEndpoints ?? [],
    /** How the etcd connection is secured (src/leadership/etcd/client.ts); every field optional. */
    etcdSecurity: {
      caFile: c.etcdCaFile,
      certFile: c.etcdCertFile,
      keyFile: c.etcdKeyFile,
      username: c.etcdUsername,
      password: c.etcdPassword,
      passwordFile: c.etcdPasswordFile,
    } satisfies EtcdSecurity,
    /** Prefix of every etcd key (ends in `/`). */
    etcdKeyPrefix: c.etcdKeyPrefix,
    /** Leadership on ZooKeeper (src/leadership/zookeeper/backend.ts); undefined: etcd or none. */
    zookeeper:
      c.zookeeper === undefined
        ? undefined
        : {
            connect: c.zookeeper,
            root: c.zookeeperRoot,
            /** Digest `user:password`, from zookeeperAuth or zookeeperAuthFile. */
            auth: c.zookeeperAuth ?? c.zookeeperAuthFile?.auth,
            authFile: c.zookeeperAuthFile?.path,
          },
    electionTtlSeconds: c.electionTtlSeconds,
    recheck: c.recheck,
    apiQps: c.apiQps,
    apiBurst: c.apiBurst,
    informerScope: c.informerScope,
    /** `on`: offer HTTP/2 to `https://` API servers (src/kube/kube-http.ts). */
    apiHttp2: c.apiHttp2,
    apiTimeoutMs: c.apiTimeout,
    concurrency: c.concurrency,
    retryBaseDelayMs: c.retryBaseDelay,
    retryMaxDelayMs: c.retryMaxDelay,
    dryRun: c.dryRun,
    replicaId: c.replicaId ?? `${hostname()}-${process.pid}`,
    httpHost: c.httpHost,
    httpPort: c.httpPort,
    /** `/ui` and `/api/v1/` may answer without credentials beyond loopback (src/config/http-exposure.ts). */
    httpAllowUnauthenticated: c.httpAllowUnauthenticated,
    tombstoneTtlMs: c.tombstoneTtl,
    reconcileIntervalMs: c.reconcileInterval,
    /** Undefined: 2 × electionTtlSeconds + 30 s (src/cleaner/self-check.ts). */
    overdueGraceMs: c.overdueGrace,
    queuePrefix: c.queuePrefix,
    logLevel: c.logLevel,
    dashboard: { readOnly: c.dashboardReadOnly, user: c.dashboardUser, password: c.dashboardPassword },
  }));

/** `context:*`, as written (`*` for the current context). */
export function discoveryLabel(d: DiscoverySpec): string {
  return d.context === undefined ? '*' : `${d.context}:*`;
}

/** The validated Redis fields as one {@link RedisConnection} (the cross-field checks ran before). */
function redisConnection(c: {
  redisMode: RedisConnection['mode'];
  redisUrl: string;
  redisSentinels?: HostPort[];
  redisMasterName?: string;
  redisClusterNodes?: HostPort[];
  redisUsername?: string;
  redisPassword?: string;
  redisSentinelPassword?: string;
  redisTls: boolean;
}): RedisConnection {
  const auth = {
    ...(c.redisUsername ? { username: c.redisUsername } : {}),
    ...(c.redisPassword ? { password: c.redisPassword } : {}),
  };
  switch (c.redisMode) {
    case 'sentinel':
      return {
        mode: 'sentinel',
        sentinels: c.redisSentinels ?? [],
        masterName: c.redisMasterName ?? '',
        ...auth,
        ...(c.redisSentinelPassword ? { sentinelPassword: c.redisSentinelPassword } : {}),
        tls: c.redisTls,
      };
    case 'cluster':
      return { mode: 'cluster', nodes: c.redisClusterNodes ?? [], ...auth, tls: c.redisTls };
    default:
      return { mode: 'single', url: c.redisUrl };
  }
}

/**
 * The effective configuration of one replica. Units are in the names: `retentionMs`, `tombstoneTtlMs`,
 * `reconcileIntervalMs` (milliseconds), `electionTtlSeconds` (seconds, as etcd leases take them).
 */
export type CleanerConfig = z.output<typeof configSchema>;
/** Cleanup policy, as Kyuubi's `kyuubi.kubernetes.spark.cleanupTerminatedDriverPod.kind` (without NONE). */
export type Policy = CleanerConfig['policy'];
/** Re-check mode of the handler (workers/cleanup-driver-pod.ts): `resource-version`, `live` or `cache`. */
export type RecheckMode = CleanerConfig['recheck'];

/** The default re-check mode (src/config/fields.ts): one API request per cleaned pod. */
export const DEFAULT_RECHECK: RecheckMode = 'resource-version';
