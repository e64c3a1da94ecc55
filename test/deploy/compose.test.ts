/**
 * infra/compose.yaml and the collector configuration beside it, checked for consistency without a
 * Docker engine: the services a replica needs exist and are wired by name and port, the replicas run
 * as in the pod (read-only, non-root, /tmp only), and the collector's pipeline uses only components
 * it defines.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT, readYamlFile } from './render.ts';

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: string[] | Record<string, unknown>;
  ports?: string[];
  volumes?: string[];
  read_only?: boolean;
  tmpfs?: string[];
  user?: string;
}

interface CollectorConfig {
  receivers: Record<string, { protocols?: Record<string, { endpoint: string }> }>;
  processors: Record<string, unknown>;
  exporters: Record<string, { endpoint?: string } | null>;
  service: { pipelines: Record<string, { receivers: string[]; processors?: string[]; exporters: string[] }> };
}

const compose = readYamlFile<{ services: Record<string, ComposeService> }>('infra/compose.yaml');
const services = compose.services;
const replicas = Object.entries(services).filter(([, s]) => s.environment?.SDC_REPLICA_ID !== undefined);
const collector = readYamlFile<CollectorConfig>('infra/otel-collector.yaml');

/** `http://host:4318/x` → `['host', '4318']`. */
function hostPort(url: string | undefined): [string, string] {
  const u = new URL(url ?? 'invalid:');
  return [u.hostname, u.port];
}

describe('infra/compose.yaml', () => {
  it('runs Redis, etcd, a collector, Jaeger and three replicas', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining(['redis', 'etcd', 'otel-collector', 'jaeger']),
    );
    expect(replicas).toHaveLength(3);
    expect(new Set(replicas.map(([, s]) => s.environment?.SDC_REPLICA_ID)).size).toBe(3);
    expect(new Set(replicas.flatMap(([, s]) => s.ports ?? [])).size).toBe(3);
  });

  it('builds the replicas from the repository Dockerfile', () => {
    for (const [name, s] of replicas) {
      const context = path.resolve(REPO_ROOT, 'infra', s.build?.context ?? '.');
      expect(context, name).toBe(REPO_ROOT);
      expect(existsSync(path.join(context, s.build?.dockerfile ?? '')), name).toBe(true);
    }
  });

  it('runs each replica as in the pod: read-only root, /tmp on tmpfs, non-root user', () => {
    for (const [name, s] of replicas) {
      expect(s.read_only, name).toBe(true);
      expect(s.tmpfs, name).toEqual(['/tmp']);
      expect(s.user, name).toMatch(/^\$\{SDC_UID:-[1-9]\d*\}:\$\{SDC_GID:-[1-9]\d*\}$/);
    }
  });

  it('wires the replicas to Redis, etcd and the collector by service name and port', () => {
    for (const [name, s] of replicas) {
      const env = s.environment ?? {};
      expect(hostPort(env.SDC_REDIS_URL), name).toEqual(['redis', '6379']);
      expect(env.SDC_ETCD_ENDPOINTS?.split(',').map(hostPort), name).toEqual([['etcd', '2379']]);
      const [host, port] = hostPort(env.OTEL_EXPORTER_OTLP_ENDPOINT);
      expect(host, name).toBe('otel-collector');
      expect(collector.receivers.otlp?.protocols?.http?.endpoint.endsWith(`:${port}`), name).toBe(true);
      expect(env.SDC_HTTP_HOST, name).toBe('0.0.0.0');
      // Beyond loopback a replica without dashboard credentials refuses to start: both come from the environment,
      // the password required.
      expect(env.SDC_DASHBOARD_USER, name).toMatch(/^\$\{SDC_DASHBOARD_USER:-\w+\}$/);
      expect(env.SDC_DASHBOARD_PASSWORD, name).toMatch(/^\$\{SDC_DASHBOARD_PASSWORD:\?.+\}$/);
      expect(env.SDC_HTTP_ALLOW_UNAUTHENTICATED, name).toBeUndefined();
    }
  });

  it('depends only on services it defines', () => {
    for (const [name, s] of Object.entries(services)) {
      const deps = Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {});
      for (const dep of deps) expect(Object.keys(services), `${name} → ${dep}`).toContain(dep);
    }
  });

  it('runs Redis with maxmemory-policy noeviction', () => {
    const command = services.redis?.command ?? [];
    expect(command[command.indexOf('--maxmemory-policy') + 1]).toBe('noeviction');
  });

  it('mounts the collector configuration that sits beside it', () => {
    const mount = services['otel-collector']?.volumes?.find((v) => v.includes('otel-collector.yaml'));
    const source = mount?.split(':')[0] ?? '';
    expect(existsSync(path.resolve(REPO_ROOT, 'infra', source))).toBe(true);
  });
});

describe('infra/otel-collector.yaml', () => {
  it('uses in its pipelines only receivers, processors and exporters it defines', () => {
    const pipelines = Object.entries(collector.service.pipelines);
    expect(pipelines.map(([name]) => name)).toContain('traces');
    for (const [name, p] of pipelines) {
      for (const r of p.receivers) expect(Object.keys(collector.receivers), `${name} receiver`).toContain(r);
      for (const q of p.processors ?? [])
        expect(Object.keys(collector.processors), `${name} processor`).toContain(q);
      for (const e of p.exporters) expect(Object.keys(collector.exporters), `${name} exporter`).toContain(e);
    }
  });

  it('forwards traces to the Jaeger service of the compose file', () => {
    const exporters = collector.service.pipelines.traces?.exporters ?? [];
    const hosts = exporters.map((e) => collector.exporters[e]?.endpoint?.split(':')[0]);
    expect(hosts).toContain('jaeger');
    expect(Object.keys(services)).toContain('jaeger');
  });
});
