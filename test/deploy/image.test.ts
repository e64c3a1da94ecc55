/**
 * The image, built and run for real. `bash scripts/build-image.sh` (as docs/image.md shows it) builds the
 * Dockerfile with podman on its two bases, made locally and pinned by digest (Debian bookworm from Debian's
 * packages, Node and npm from the npm registry: no public base image is pulled), then the image runs as the
 * Deployment in infra/k8s/base runs it — read-only root filesystem, /tmp the only writable path, the image's
 * non-root user, every capability dropped, no privilege escalation — against real Redis, real etcd and the sandbox
 * API server on the host's loopback (host network). It cleans terminated drivers (one DELETE each), answers its
 * probes, metrics and dashboard, and on SIGTERM (`podman stop` with the Deployment's grace period) resigns: a
 * replica process takes the target over at once and cleans what follows. The image's size, contents (the bundle,
 * the packages that cannot be bundled, no shell, no package manager), version and SBOM are checked from the image.
 *
 * Skipped, with the reason, only where no container engine can run (no podman, or podman cannot start
 * containers); scripts/install-test-tools.sh installs podman, runc and mmdebstrap. A cold build (the bases and all
 * layers) takes minutes; later runs reuse the bases and podman's layer cache. SDC_IMAGE_TEST_TAG builds and runs
 * another tag than docs/image.md's (two runs on one machine then do not share an image).
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../../harness/sandbox/local-services.ts';
import { startZooKeeper } from '../../harness/sandbox/local-zookeeper.ts';
import type { LogLine } from '../../harness/sandbox/replica-process.ts';
import { RUNTIME_PACKAGES } from '../../scripts/image/runtime-packages.ts';
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

/** docs/image.md's build command and image, run exactly as written (unless SDC_IMAGE_TEST_TAG names another tag). */
const BUILD = 'bash scripts/build-image.sh';
const DOCUMENTED_IMAGE = 'spark-driver-cleaner:dev';
const IMAGE = process.env.SDC_IMAGE_TEST_TAG || DOCUMENTED_IMAGE;
const BUILD_COMMAND = IMAGE === DOCUMENTED_IMAGE ? BUILD : `${BUILD} --tag ${IMAGE}`;
/** The SBOM build-image.sh writes beside the image. */
const SBOM_BESIDE = path.join(REPO_ROOT, 'dist/image', `${IMAGE.replace(/[/:]/g, '_')}.cdx.json`);
/** docs/image.md's report command. */
const REPORT = 'bash scripts/image-report.sh spark-driver-cleaner:dev';
const REPORT_COMMAND = REPORT.replace(DOCUMENTED_IMAGE, IMAGE);
/** The size the image must stay within, uncompressed (bytes, as `podman image inspect` reports it). */
const MAX_IMAGE_BYTES = 200e6;
/**
 * The operator commands as the README runs them in a replica's container
 * (`kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js status`): the
 * image has no npx, its working directory is /app, and exec inherits the container's SDC_* settings.
 */
const IN_CONTAINER_STATUS = 'node dist/src/cli.js status';
const IN_CONTAINER_EXPLAIN = 'node dist/src/cli.js explain';

const packageJson = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** What the SBOM says of a component (CycloneDX 1.6, as scripts/image/sbom.ts writes it). */
interface SbomComponent {
  type: string;
  name: string;
  group?: string;
  version: string;
  purl?: string;
  properties?: { name: string; value: string }[];
}
const componentName = (c: SbomComponent) => (c.group ? `${c.group}/${c.name}` : c.name);

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
    const build = await run('bash', ['-c', BUILD_COMMAND], 1_140_000);
    buildMs = performance.now() - started;
    if (build.code !== 0)
      throw new Error(`${BUILD_COMMAND} failed (${build.code}):\n${build.stderr.slice(-4000)}`);
    expect(build.stdout.trim().split('\n').at(-1)).toBe(IMAGE);
    console.log(`image test: ${BUILD_COMMAND} took ${(buildMs / 1000).toFixed(1)} s`);
    user = (await podman(['image', 'inspect', '--format', '{{.Config.User}}', IMAGE])).stdout.trim();
    cluster = await startTestCluster(['alpha']);
  }, 1_200_000);

  afterAll(async () => {
    for (const c of containers) await podman(['rm', '--force', '--time', '0', c.name]);
    await cluster?.stop();
  });

  it('runs as the non-root user the Deployment names (numeric, so runAsNonRoot can be checked)', () => {
    expect(user).toBe(`${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`);
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(cleaner.securityContext.runAsNonRoot).toBe(true);
  });

  it(`weighs at most ${MAX_IMAGE_BYTES / 1e6} MB uncompressed`, async () => {
    const size = Number((await podman(['image', 'inspect', '--format', '{{.Size}}', IMAGE])).stdout.trim());
    console.log(`image test: ${IMAGE} is ${(size / 1e6).toFixed(1)} MB`);
    expect(size).toBeGreaterThan(50e6);
    expect(size).toBeLessThanOrEqual(MAX_IMAGE_BYTES);
  });

  it('ships the bundle and, in node_modules, only the packages that cannot be bundled: no shell, no package manager, no compiler', async () => {
    const listing = await podman([
      ...['run', '--rm', '--network', 'none', '--health-cmd', 'none', '--entrypoint', 'node', IMAGE],
      '-e',
      `const fs = require('node:fs'), path = require('node:path');
       const top = (dir) => fs.readdirSync(dir).flatMap((e) => e.startsWith('@') ? fs.readdirSync(path.join(dir, e)).map((n) => e + '/' + n) : [e]);
       const dirs = ['/bin', '/sbin', '/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin'];
       const real = (d) => fs.existsSync(d) ? fs.realpathSync(d) : undefined;
       const executables = [...new Set(dirs.map(real).filter(Boolean))].flatMap((d) => fs.readdirSync(d).map((f) => path.join(d, f)));
       console.log(JSON.stringify({ app: fs.readdirSync('/app').sort(), modules: top('/app/node_modules').sort(),
         nested: fs.readdirSync('/app/node_modules', { recursive: true }).filter((p) => p.includes('node_modules')),
         executables, dist: fs.readdirSync('/app/dist/src').filter((f) => f.endsWith('.js')).length }));`,
    ]);
    expect(listing.code, listing.stderr).toBe(0);
    const { app, modules, nested, executables, dist } = JSON.parse(listing.stdout) as {
      app: string[];
      modules: string[];
      nested: string[];
      executables: string[];
      dist: number;
    };
    expect(app).toEqual(['dist', 'node_modules', 'package.json', 'sbom.cdx.json']);
    expect(modules).toEqual(Object.keys(RUNTIME_PACKAGES).sort());
    expect(nested).toEqual([]);
    expect(dist).toBeGreaterThan(1);
    // Node is the only program: no shell, no dpkg or apt, no npm, npx, corepack or yarn, no compiler.
    expect(executables).toEqual(['/usr/local/bin/node']);
  });

  it('says its version: `--version` and package.json are package.json’s', async () => {
    const version = await podman([
      ...['run', '--rm', '--network', 'none', '--health-cmd', 'none', '--entrypoint', 'node', IMAGE],
      ...['dist/src/cli.js', '--version'],
    ]);
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout.trim()).toBe(packageJson.version);
  });

  it('ships an SBOM (CycloneDX) listing every production dependency, the Debian packages and Node, and the same beside the image', async () => {
    const inImage = await podman([
      ...['run', '--rm', '--network', 'none', '--health-cmd', 'none', '--entrypoint', 'node', IMAGE],
      ...['-e', "process.stdout.write(require('node:fs').readFileSync('/app/sbom.cdx.json'))"],
    ]);
    expect(inImage.code, inImage.stderr).toBe(0);
    expect(readFileSync(SBOM_BESIDE, 'utf8')).toBe(inImage.stdout);
    const bom = JSON.parse(inImage.stdout) as {
      bomFormat: string;
      specVersion: string;
      metadata: { component: SbomComponent };
      components: SbomComponent[];
    };
    expect(bom.bomFormat).toBe('CycloneDX');
    expect(bom.specVersion).toBe('1.6');
    expect(bom.metadata.component).toMatchObject({
      name: 'spark-driver-cleaner',
      version: packageJson.version,
    });
    const versions = new Map(bom.components.map((c) => [componentName(c), c.version]));
    for (const [name, version] of Object.entries(packageJson.dependencies))
      expect(versions.get(name), name).toBe(version);
    for (const dev of [
      'typescript',
      'vitest',
      'vite',
      '@biomejs/biome',
      'esbuild',
      '@cyclonedx/cyclonedx-npm',
    ])
      expect(versions.has(dev), dev).toBe(false);
    const where = (name: string) =>
      bom.components
        .find((c) => componentName(c) === name)
        ?.properties?.find((p) => p.name === 'sdc:location')?.value;
    expect(where('zookeeper')).toBe('node_modules');
    expect(where('bullmq')).toBe('dist/src (bundled)');
    expect(versions.get('node')).toBe(packageJson.devDependencies.node);
    expect(bom.components.find((c) => c.name === 'libc6')?.purl).toMatch(
      /^pkg:deb\/debian\/libc6@.+distro=debian-12/,
    );
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
      // The bundled CLI loads it from node_modules too: `status` reads the election from ZooKeeper (exit 1: no
      // leader, not 3: ZooKeeper answered). It names the cluster from the replicas' kubeconfig, as they do.
      const kubeconfig = tempFile('kubeconfig', readFileSync(cluster.kubeconfig, 'utf8'));
      chmodSync(kubeconfig, 0o644);
      const status = await podman([
        ...['run', '--rm', '--network', 'host', '--health-cmd', 'none', '--entrypoint', 'node'],
        ...['--volume', `${kubeconfig}:/kube/config:ro`, '--env', 'KUBECONFIG=/kube/config'],
        ...['--env', 'SDC_TARGETS=alpha:zk', '--env', `SDC_REDIS_URL=${cluster.redis.url}`],
        ...['--env', `SDC_ZOOKEEPER=${zk.connect}`, '--env', 'SDC_HTTP_HOST=127.0.0.1'],
        ...[IMAGE, ...IN_CONTAINER_STATUS.split(' ').slice(1)],
      ]);
      expect(status.code, `${status.stdout}${status.stderr}`).toBe(1);
      expect(status.stdout).toContain('no leader');
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
    // No shell in the image: node reads /proc and tries the writes.
    const inside = await podman([
      ...['exec', name, 'node', '-e'],
      `const fs = require('node:fs');
       const status = fs.readFileSync('/proc/1/status', 'utf8').split('\\n');
       console.log(status.filter((l) => /^(Uid|Gid|CapEff|CapPrm|NoNewPrivs):/.test(l)).join('\\n'));
       const writable = (f) => { try { fs.writeFileSync(f, 'x'); return true; } catch { return false; } };
       if (writable('/tmp/w')) console.log('tmp-writable');
       if (!writable('/app/w')) console.log('app-read-only');
       if (!writable('/w')) console.log('root-read-only');`,
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
    expect(metrics).toContain(`sdc_build_info{version="${packageJson.version}"} 1`);

    // The dashboard: its page and a static file, served from @bull-board/ui in node_modules.
    const auth = { authorization: `Basic ${Buffer.from('admin:image-test').toString('base64')}` };
    const page = await fetch(`${base}/ui`, { headers: auth });
    expect(page.status).toBe(200);
    const html = await page.text();
    const script = /src="([^"]+\.js)"/.exec(html)?.[1];
    expect(script, html.slice(0, 400)).toBeDefined();
    const asset = await fetch(new URL(script ?? '', `${base}/ui/`), { headers: auth });
    expect(asset.status).toBe(200);
    expect((await asset.text()).length).toBeGreaterThan(1000);

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
    const report = await run('bash', ['-c', REPORT_COMMAND]);
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
    for (const p of ['libc6', 'libstdc++6', 'ca-certificates', 'tzdata'])
      expect(
        debian.some((l) => l.startsWith(`${p} `)),
        p,
      ).toBe(true);
    expect(debian.some((l) => /^(dpkg|apt|bash|dash|coreutils|gcc|cpp|make|g\+\+)(-\d+)? /.test(l))).toBe(
      false,
    );
    const npm = [...section('npm packages bundled'), ...section('npm packages in /app/node_modules')];
    for (const [name, version] of Object.entries(packageJson.dependencies))
      expect(npm).toContain(`${name} ${version}`);
    expect(
      section('npm packages in /app/node_modules')
        .map((l) => l.split(' ')[0])
        .sort(),
    ).toEqual(Object.keys(RUNTIME_PACKAGES).sort());
    for (const name of ['typescript', 'vitest', 'vite', '@biomejs/biome', 'node', 'esbuild'])
      expect(
        npm.some((l) => l.startsWith(`${name} `)),
        name,
      ).toBe(false);
    expect(section('SBOM')[0]).toMatch(/^\/app\/sbom\.cdx\.json: CycloneDX 1\.6, \d+ components$/);

    // docs/image.md's copies are this image's: the package lists of docs/image-packages.txt and the components of
    // docs/image-sbom.cdx.json (regenerate both with the commands in docs/image.md after a dependency changes).
    const documented = readFileSync(path.join(REPO_ROOT, 'docs/image-packages.txt'), 'utf8');
    const documentedSection = (title: string) =>
      (documented.split(/^## /m).find((s) => s.startsWith(title)) ?? '').split('\n').slice(1).filter(Boolean);
    for (const title of [
      'Node',
      'Debian packages',
      'npm packages bundled',
      'npm packages in /app/node_modules',
    ])
      expect(documentedSection(title), `docs/image-packages.txt, ${title}`).toEqual(section(title));
    const components = (file: string) =>
      (JSON.parse(readFileSync(file, 'utf8')) as { components: SbomComponent[] }).components
        .map((c) => `${c.type} ${componentName(c)} ${c.version}`)
        .sort();
    expect(components(path.join(REPO_ROOT, 'docs/image-sbom.cdx.json'))).toEqual(components(SBOM_BESIDE));
  });
});
