/**
 * The image, built and run for real. `bash scripts/build-image.sh` (as docs/image.md shows it) builds the
 * Dockerfile with podman on a local stand-in for its base (Debian bookworm from Debian's packages, Node and
 * npm from the npm registry: no public base image is pulled), then the image runs as the Deployment in
 * infra/k8s/base runs it — read-only root filesystem, /tmp the only writable path, the image's non-root
 * user, every capability dropped, no privilege escalation — against real Redis, real etcd and the sandbox
 * API server on the host's loopback (host network). It cleans terminated drivers (one DELETE each), answers
 * its probes and metrics, and on SIGTERM (`podman stop` with the Deployment's grace period) resigns: a
 * replica process takes the target over at once and cleans what follows.
 *
 * Skipped, with the reason, only where no container engine can run (no podman, or podman cannot start
 * containers); scripts/install-test-tools.sh installs podman, runc and mmdebstrap. A cold build (base and
 * all layers) takes a few minutes; later runs reuse the base image and podman's layer cache.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../../harness/sandbox/local-services.ts';
import { startZooKeeper } from '../../harness/sandbox/local-zookeeper.ts';
import type { LogLine } from '../../harness/sandbox/replica-process.ts';
import {
  createTerminatedDrivers,
  deletesPer,
  startTestCluster,
  type TestCluster,
  tempFile,
} from '../helpers/cluster.ts';
import { waitFor } from '../helpers/wait.ts';
import { type Container, engineProblem, podman, run, runContainer } from './podman.ts';
import { REPO_ROOT } from './render.ts';

/** docs/image.md's build command and image, run exactly as written. */
const BUILD = 'bash scripts/build-image.sh';
const IMAGE = 'spark-driver-cleaner:dev';
/** docs/image.md's report command. */
const REPORT = 'bash scripts/image-report.sh spark-driver-cleaner:dev';
/**
 * The operator commands as the README runs them in a replica's container
 * (`kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js status`): the
 * image has no npx, its working directory is /app, and exec inherits the container's SDC_* settings.
 */
const IN_CONTAINER_STATUS = 'node dist/src/cli.js status';
const IN_CONTAINER_EXPLAIN = 'node dist/src/cli.js explain';

const packageJson = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean; optional?: boolean; devOptional?: boolean }>;
};

interface ContainerSpec {
  securityContext: {
    readOnlyRootFilesystem: boolean;
    allowPrivilegeEscalation: boolean;
    runAsNonRoot: boolean;
    capabilities: { drop: string[] };
  };
  volumeMounts: { name: string; mountPath: string }[];
}
/** The Deployment as infra/k8s/base declares it: the run below follows these fields. */
const deployment = parse(readFileSync(path.join(REPO_ROOT, 'infra/k8s/base/deployment.yaml'), 'utf8')) as {
  spec: {
    template: {
      spec: {
        terminationGracePeriodSeconds: number;
        securityContext: { runAsUser: number; runAsGroup: number };
        containers: ContainerSpec[];
        volumes: { name: string; emptyDir?: { sizeLimit?: string } }[];
      };
    };
  };
};
const pod = deployment.spec.template.spec;
const cleaner = pod.containers[0] as ContainerSpec;
const GRACE_S = pod.terminationGracePeriodSeconds;

/** The `podman run` flags for what the Deployment's pod and container security settings ask for. */
function deploymentFlags(user: string): string[] {
  const sc = cleaner.securityContext;
  const flags = ['--user', user];
  // --read-only-tmpfs=false: podman would otherwise add writable /run, /tmp and /var/tmp of its own.
  if (sc.readOnlyRootFilesystem) flags.push('--read-only', '--read-only-tmpfs=false');
  for (const mount of cleaner.volumeMounts) {
    const volume = pod.volumes.find((v) => v.name === mount.name);
    if (!volume?.emptyDir) throw new Error(`volume ${mount.name}: only emptyDir is run here`);
    const size = /^(\d+)Mi$/.exec(volume.emptyDir.sizeLimit ?? '')?.[1];
    flags.push('--tmpfs', `${mount.mountPath}:rw,mode=1777${size ? `,size=${size}m` : ''}`);
  }
  for (const cap of sc.capabilities.drop) flags.push(`--cap-drop=${cap}`);
  if (!sc.allowPrivilegeEscalation) flags.push('--security-opt', 'no-new-privileges');
  // Kubernetes ignores the Dockerfile's HEALTHCHECK (the pod has probes); podman would need systemd for it.
  flags.push('--health-cmd', 'none');
  return flags;
}

const problem = engineProblem();
if (problem) console.warn(`image test skipped: ${problem}`);

describe.skipIf(problem !== undefined)(`the image (${problem ?? 'podman'})`, () => {
  let cluster: TestCluster;
  let user = '';
  let buildMs = 0;
  const containers: Container[] = [];

  beforeAll(async () => {
    const started = performance.now();
    const build = await run('bash', ['-c', BUILD], 540_000);
    buildMs = performance.now() - started;
    if (build.code !== 0) throw new Error(`${BUILD} failed (${build.code}):\n${build.stderr.slice(-4000)}`);
    expect(build.stdout.trim().split('\n').at(-1)).toBe(IMAGE);
    console.log(`image test: ${BUILD} took ${(buildMs / 1000).toFixed(1)} s`);
    user = (await podman(['image', 'inspect', '--format', '{{.Config.User}}', IMAGE])).stdout.trim();
    cluster = await startTestCluster(['alpha']);
  }, 600_000);

  afterAll(async () => {
    for (const c of containers) await podman(['rm', '--force', '--time', '0', c.name]);
    await cluster?.stop();
  });

  it('runs as the non-root user the Deployment names (numeric, so runAsNonRoot can be checked)', () => {
    expect(user).toBe(`${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`);
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(cleaner.securityContext.runAsNonRoot).toBe(true);
  });

  it('ships the compiled code and the production dependencies only: no compiler, no package manager, no dev dependency', async () => {
    const listing = await podman([
      ...['run', '--rm', '--network', 'none', '--health-cmd', 'none', '--entrypoint', 'node', IMAGE],
      '-e',
      `const fs = require('node:fs'), path = require('node:path'), cp = require('node:child_process');
       const dirs = [];
       const walk = (dir) => {
         if (!fs.existsSync(dir)) return;
         for (const e of fs.readdirSync(dir)) {
           if (e.startsWith('.')) continue;
           const p = path.join(dir, e);
           if (e.startsWith('@')) { walk(p); continue; }
           dirs.push(path.relative('/app', p));
           walk(path.join(p, 'node_modules'));
         }
       };
       walk('/app/node_modules');
       const tools = ['gcc', 'cc', 'g++', 'make', 'npm', 'npx', 'corepack', 'yarn'].filter(
         (t) => cp.spawnSync('sh', ['-c', 'command -v ' + t]).status === 0);
       console.log(JSON.stringify({ app: fs.readdirSync('/app').sort(), modules: dirs, tools }));`,
    ]);
    expect(listing.code, listing.stderr).toBe(0);
    const { app, modules, tools } = JSON.parse(listing.stdout) as {
      app: string[];
      modules: string[];
      tools: string[];
    };
    expect(app).toEqual(['dist', 'node_modules', 'package.json']);
    expect(tools).toEqual([]);
    const present = new Set(modules);
    const entries = Object.entries(lock.packages).filter(([p]) => p !== '');
    // devOptional: needed by a dev dependency or as an optional peer (typescript): not shipped either.
    const dev = entries.filter(([, e]) => e.dev || e.devOptional).map(([p]) => p);
    const prod = entries.filter(([, e]) => !e.dev && !e.optional && !e.devOptional).map(([p]) => p);
    expect(dev.length).toBeGreaterThan(0);
    expect(dev.filter((p) => present.has(p))).toEqual([]);
    expect(prod.filter((p) => !present.has(p))).toEqual([]);
    for (const name of Object.keys(packageJson.dependencies))
      expect(present, name).toContain(`node_modules/${name}`);
  });

  it('the ZooKeeper client’s native addon (compiled in the build stage, with no compiler shipped) works in the runtime: it creates a node on a real ZooKeeper', async () => {
    const zk = await startZooKeeper();
    try {
      const session = await podman([
        ...['run', '--rm', '--network', 'host', '--health-cmd', 'none', '--entrypoint', 'node', IMAGE],
        '-e',
        `const ZooKeeper = require('zookeeper');
         const h = new ZooKeeper({ connect: '${zk.connect}', timeout: 4000 });
         h.on('connect', async () => {
           const path = await h.create('/from-the-image', 'x', ZooKeeper.constants.ZOO_EPHEMERAL);
           console.log(JSON.stringify({ path, modules: process.versions.modules }));
           h.close();
         });
         h.init({});
         setTimeout(() => process.exit(3), 20000).unref();`,
      ]);
      expect(session.code, session.stderr).toBe(0);
      expect(JSON.parse(session.stdout)).toEqual({
        path: '/from-the-image',
        modules: process.versions.modules,
      });
    } finally {
      await zk.stop();
    }
  });

  it('the entrypoint takes the CLI arguments: `--help` prints the run command’s usage', async () => {
    const help = await podman(['run', '--rm', '--network', 'none', '--health-cmd', 'none', IMAGE, '--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/Usage: .* run/);
    expect(help.stdout).toContain('--targets');
  });

  it('as deployed: cleans each driver with one DELETE, answers /healthz, /readyz and /metrics, and on SIGTERM hands its target over within the grace period', async () => {
    const server = cluster.servers.alpha as NonNullable<TestCluster['servers'][string]>;
    const ns = 'image';
    const target = `alpha:${ns}`;
    // A 60 s lease: another replica can take over sooner only if this one resigns on SIGTERM.
    const settings = {
      SDC_TARGETS: target,
      SDC_QUEUE_PREFIX: 'image',
      SDC_RETENTION: '1s',
      SDC_ELECTION_TTL_SECONDS: '60',
      SDC_LOG_LEVEL: 'info',
    };
    const first = createTerminatedDrivers(server, ns, 5, 'before');
    // The kubeconfig as a mounted Secret gives it: readable by the container's user.
    const kubeconfig = tempFile('kubeconfig', readFileSync(cluster.kubeconfig, 'utf8'));
    chmodSync(kubeconfig, 0o644);
    const port = await freePort();
    const name = `sdc-image-test-${process.pid}`;
    const container = runContainer(name, [
      '--rm',
      '--network',
      'host',
      ...deploymentFlags(user),
      ...['--volume', `${kubeconfig}:/kube/config:ro`],
      ...['--env', 'KUBECONFIG=/kube/config', '--env', `SDC_REPLICA_ID=${name}`],
      ...['--env', `SDC_REDIS_URL=${cluster.redis.url}`],
      ...['--env', `SDC_ETCD_ENDPOINTS=${cluster.etcd.endpoints.join(',')}`],
      ...['--env', `SDC_HTTP_PORT=${port}`],
      // The image listens on 0.0.0.0: without the credentials (the Deployment's Secret) it refuses to start.
      ...['--env', 'SDC_DASHBOARD_USER=admin', '--env', 'SDC_DASHBOARD_PASSWORD=image-test'],
      ...Object.entries(settings).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
      IMAGE,
    ]);
    containers.push(container);
    const isElected = (l: LogLine) => l.msg === 'elected leader' && l.namespace === ns;
    await container.waitForLine(isElected, 90_000);

    // Inside: the process runs as the image's user, without capabilities or a way to gain privileges, and
    // can write /tmp only.
    const inside = await podman([
      ...['exec', name, 'sh', '-c'],
      'grep -E "^(Uid|Gid|CapEff|CapPrm|NoNewPrivs):" /proc/1/status; touch /tmp/w && echo tmp-writable; touch /app/w 2>/dev/null || echo app-read-only; touch /w 2>/dev/null || echo root-read-only',
    ]);
    expect(inside.code, inside.stderr).toBe(0);
    const [uid, gid] = user.split(':');
    expect(inside.stdout).toMatch(new RegExp(`^Uid:\\s+${uid}\\s+${uid}\\s+${uid}\\s+${uid}$`, 'm'));
    expect(inside.stdout).toMatch(new RegExp(`^Gid:\\s+${gid}\\s+${gid}\\s+${gid}\\s+${gid}$`, 'm'));
    expect(inside.stdout).toMatch(/^CapEff:\s+0+$/m);
    expect(inside.stdout).toMatch(/^CapPrm:\s+0+$/m);
    expect(inside.stdout).toMatch(/^NoNewPrivs:\s+1$/m);
    for (const word of ['tmp-writable', 'app-read-only', 'root-read-only'])
      expect(inside.stdout).toContain(word);

    await waitFor(
      'the first drivers deleted',
      () => first.every((p) => !server.pods.get(ns, p.metadata?.name ?? '')),
      60_000,
    );
    expect(
      deletesPer(
        server,
        first.map((p) => p.metadata?.uid ?? ''),
      ),
    ).toEqual([1, 1, 1, 1, 1]);

    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    await waitFor('/readyz 200', async () => (await fetch(`${base}/readyz`)).status === 200, 30_000);
    const metrics = await waitFor('5 accepted outcomes in /metrics', async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      const line = text
        .split('\n')
        .find(
          (l) =>
            l.startsWith('sdc_cleanup_outcomes_total{') &&
            l.includes(`namespace="${ns}"`) &&
            l.includes('outcome="accepted"'),
        );
      return line?.endsWith(' 5') ? text : undefined;
    });
    expect(metrics).toContain('# TYPE sdc_cleanup_outcomes_total counter');

    // status and explain inside the running container, with its own settings, as an operator runs them.
    const status = await podman(['exec', name, ...IN_CONTAINER_STATUS.split(' ')]);
    expect(status.code, `${status.stdout}${status.stderr}`).toBe(0);
    expect(status.stdout).toContain(name);
    const firstName = first[0]?.metadata?.name ?? '';
    const explain = await podman([
      'exec',
      name,
      ...IN_CONTAINER_EXPLAIN.split(' '),
      `${target}/${firstName}`,
    ]);
    expect(explain.code, `${explain.stdout}${explain.stderr}`).toBe(0);
    expect(explain.stdout).toContain(`by ${name}`);

    // Handover: a replica process joins, then the container gets SIGTERM with the Deployment's grace period.
    const follower = cluster.startReplica('image-follower', {
      ...settings,
      SDC_HTTP_PORT: '0',
    });
    await follower.waitForLine((l) => l.msg === 'replica started', 60_000);
    const stopStarted = performance.now();
    const stop = await podman(['stop', '--time', String(GRACE_S), name], (GRACE_S + 30) * 1000);
    const stopMs = performance.now() - stopStarted;
    expect(stop.code, stop.stderr).toBe(0);
    // Exit 0, not 137: the process ended on its own before podman's SIGKILL at the end of the grace period.
    expect(await container.exited).toBe(0);
    expect(container.lines.some((l) => l.msg === 'replica stopped')).toBe(true);
    console.log(`image test: podman stop --time ${GRACE_S} returned after ${(stopMs / 1000).toFixed(1)} s`);
    // Well within the 60 s lease: the container resigned, its lease was not left to expire.
    await follower.waitForLine(isElected, 30_000);

    const second = createTerminatedDrivers(server, ns, 3, 'after');
    await waitFor(
      'the later drivers deleted',
      () => second.every((p) => !server.pods.get(ns, p.metadata?.name ?? '')),
      60_000,
    );
    expect(
      deletesPer(
        server,
        second.map((p) => p.metadata?.uid ?? ''),
      ),
    ).toEqual([1, 1, 1]);
    await waitFor(
      'the follower logged the 3 DELETEs',
      () => follower.lines.filter((l) => l.outcome === 'accepted' && l.namespace === ns).length === 3,
    );
    follower.kill('SIGTERM');
    expect(await follower.exited).toBe(0);
  }, 240_000);

  it('the report lists the image’s size, layers and every Debian and npm package with its version', async () => {
    const report = await run('bash', ['-c', REPORT]);
    expect(report.code, report.stderr).toBe(0);
    const text = report.stdout;
    mkdirSync(path.join(REPO_ROOT, 'test-artifacts'), { recursive: true });
    writeFileSync(path.join(REPO_ROOT, 'test-artifacts/image-packages.txt'), text);
    const section = (title: string) =>
      (text.split(/^## /m).find((s) => s.startsWith(title)) ?? '').split('\n').slice(1).filter(Boolean);
    expect(section('Size')[0]).toMatch(/^\d+ bytes \(\d+ MB\)$/);
    expect(section('Layers').some((l) => l.includes('COPY') && l.includes('./node_modules'))).toBe(true);
    expect(section('Node')).toEqual([`v${packageJson.devDependencies.node}`]);
    const debian = section('Debian packages');
    expect(debian).toEqual(
      expect.arrayContaining([expect.stringMatching(/^libc6 \S+$/), expect.stringMatching(/^dpkg \S+$/)]),
    );
    expect(debian.some((l) => /^(gcc|cpp|make|g\+\+)(-\d+)? /.test(l))).toBe(false);
    const npm = section('npm packages');
    for (const [name, version] of Object.entries(packageJson.dependencies))
      expect(npm).toContain(`${name} ${version}`);
    for (const name of ['typescript', 'vitest', 'vite', '@biomejs/biome', 'node'])
      expect(
        npm.some((l) => l.startsWith(`${name} `)),
        name,
      ).toBe(false);
  });
});
