/**
 * Every command the documentation shows in its fenced shell blocks (README.md, CONTRIBUTING.md, CHANGELOG.md,
 * docs/*.md, bench/README.md) works as written on a fresh clone. The cheap ones run here exactly as written
 * (from the repository root, without SDC_* or KUBECONFIG in the environment); the long ones (demo,
 * benchmarks, the test suite) are each mapped to the test or CI step that runs them at their smallest size,
 * and that file must still contain the invocation; the ones that need a real cluster, a Docker engine or a
 * registry name what the tests check instead, in a file that must still contain it. A command added to a
 * document without an entry here fails this test, and so does an entry the document no longer shows.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIELDS, flagName } from '../../src/config/fields.ts';
import { shellCommands } from '../helpers/readme-commands.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const { scripts, version: VERSION } = JSON.parse(read('package.json')) as {
  scripts: Record<string, string>;
  version: string;
};

/** The documents whose shell commands are checked: the top-level Markdown files, docs/, bench/README.md. */
function documents(): string[] {
  const top = readdirSync(ROOT).filter((f) => f.endsWith('.md'));
  const docs = readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return [...top, ...docs, 'bench/README.md'].sort();
}

/** How a documented command is covered. */
type Coverage =
  /** Run here exactly as written; `expect` checks its output. */
  | { run: 'as-written'; expect: (out: { stdout: string; stderr: string }) => void }
  /**
   * Run here as written plus `--check`: a `run` example that needs the cluster, Redis and etcd it names;
   * `--check` validates every flag it shows and starts nothing.
   */
  | { run: 'with-check' }
  /** Run here exactly as written, in a scratch copy of the `copy` folders (it writes into them); `expect` checks the copy. */
  | { run: 'in-scratch-copy'; copy: string[]; expect: (dir: string) => void }
  /** Too long to run here: `file` runs it at its smallest size, and contains `invocation`. */
  | { run: 'elsewhere'; file: string; invocation: string; why: string }
  /**
   * Needs what no test has (`needs`: a Kubernetes cluster, a Docker engine, a registry): `file`, which contains
   * `invocation`, checks `instead` what can be checked without it.
   */
  | { run: 'needs'; needs: string; instead: string; file: string; invocation: string };

const CLUSTER = 'a Kubernetes cluster';

/** The in-cluster status and explain: the compiled CLI run inside the image, as the image test does. */
const IN_CONTAINER: Coverage = {
  run: 'needs',
  needs: CLUSTER,
  instead:
    'the image test runs the same node dist/src/cli.js command inside the running container, with its settings',
  file: 'test/deploy/image.test.ts',
  invocation: "const IN_CONTAINER_STATUS = 'node dist/src/cli.js status';",
};
const IN_CONTAINER_EXPLAIN: Coverage = {
  ...IN_CONTAINER,
  invocation: "const IN_CONTAINER_EXPLAIN = 'node dist/src/cli.js explain';",
};
/** The kustomize overlay applied: the deploy tests render and validate it. */
const RENDERED: Coverage = {
  run: 'needs',
  needs: CLUSTER,
  instead:
    'test/deploy renders the example overlay (the one copied) with kubectl kustomize and validates every object',
  file: 'test/deploy/manifests.test.ts',
  invocation: "const overlay = rendered.get('infra/k8s/overlays/example')",
};
const RBAC: Coverage = {
  run: 'needs',
  needs: CLUSTER,
  instead: 'the RBAC test checks that the rendered Roles grant exactly get, list, watch, delete on pods',
  file: 'test/deploy/rbac.test.ts',
  invocation: "verbs: ['get', 'list', 'watch', 'delete']",
};
const IMAGE_BUILD: Coverage = {
  run: 'elsewhere',
  file: 'test/deploy/image.test.ts',
  invocation: "const BUILD = 'bash scripts/build-image.sh';",
  why: 'the image test builds the image with it (another tag: SDC_IMAGE_TEST_TAG) and runs it as deployed',
};
const OVERLAY_COPY: Coverage = {
  run: 'in-scratch-copy',
  copy: ['infra/k8s/overlays/example'],
  expect: (dir) => {
    const prod = path.join(dir, 'infra/k8s/overlays/prod');
    expect(readdirSync(prod).sort()).toEqual(
      readdirSync(path.join(ROOT, 'infra/k8s/overlays/example')).sort(),
    );
  },
};
/** `check` and its canary in a replica's container: the check tests run the same command against the sandbox. */
const CHECK_IN_CONTAINER: Coverage = {
  run: 'needs',
  needs: CLUSTER,
  instead:
    "the check tests run the same command (src/cli.ts check) with the replicas' configuration against the sandbox API server with RBAC, real Redis and etcd",
  file: 'test/ops/check-cluster.test.ts',
  invocation: "runCheck(['--output', 'json'], env(server.kubeconfigPath))",
};
/** The canary's temporary Role, granted and taken back by the operator. */
const CANARY_ROLE: Coverage = {
  run: 'needs',
  needs: CLUSTER,
  instead:
    "the canary test grants the cleaner's ServiceAccount create on pods in the canary's namespace only, as this Role does, and checks that without it the canary fails naming these commands",
  file: 'test/ops/check-canary.test.ts',
  invocation: "{ verbs: ['create'], resources: ['pods'], namespaces: [NS] }",
};
/** The deployment guide's proof after `kubectl apply` (README.md, docs/deployment.md, docs/operations.md). */
const PROVE: Record<string, Coverage> = {
  'kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js check':
    CHECK_IN_CONTAINER,
  'kubectl -n spark-team-a create role spark-driver-cleaner-canary --verb=create --resource=pods':
    CANARY_ROLE,
  'kubectl -n spark-team-a create rolebinding spark-driver-cleaner-canary --role=spark-driver-cleaner-canary --serviceaccount=spark-driver-cleaner:spark-driver-cleaner':
    CANARY_ROLE,
  'kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js check --canary spark-team-a':
    {
      ...CHECK_IN_CONTAINER,
      instead:
        'the canary test runs check --canary against three replica processes and the sandbox’s kubelet stand-in (and in dry run, with the fleet down, without the Role)',
      file: 'test/ops/check-canary.test.ts',
      invocation: "runCheck(['--canary', NS, '--output', 'json'",
    },
  'kubectl -n spark-team-a delete rolebinding,role spark-driver-cleaner-canary': CANARY_ROLE,
};
const CLUSTER_APPLY: Record<string, Coverage> = {
  [`bash scripts/build-image.sh --tag registry.example.com/spark-driver-cleaner:${VERSION}`]: IMAGE_BUILD,
  [`podman push registry.example.com/spark-driver-cleaner:${VERSION}`]: {
    run: 'needs',
    needs: 'a registry',
    instead: 'nothing is pushed; the image test builds and runs the image a push would upload',
    file: 'test/deploy/image.test.ts',
    invocation: "const BUILD = 'bash scripts/build-image.sh';",
  },
  'cp -r infra/k8s/overlays/example infra/k8s/overlays/prod': OVERLAY_COPY,
  'kubectl create namespace spark-driver-cleaner --dry-run=client -o yaml | kubectl apply -f -': {
    run: 'needs',
    needs: CLUSTER,
    instead: 'the manifests test finds the spark-driver-cleaner Namespace in the rendered overlay',
    file: 'test/deploy/manifests.test.ts',
    invocation: "findOne(overlay, 'Namespace', 'spark-driver-cleaner')",
  },
  'kubectl -n spark-driver-cleaner create secret generic spark-driver-cleaner-secrets --from-literal=SDC_DASHBOARD_USER=admin --from-literal=SDC_DASHBOARD_PASSWORD="$(openssl rand -base64 24)"':
    {
      run: 'needs',
      needs: CLUSTER,
      instead: 'the Deployment test checks that the pods read both keys from the Secret of that name',
      file: 'test/deploy/deployment.test.ts',
      invocation: "name: 'spark-driver-cleaner-secrets'",
    },
  'kubectl apply -k infra/k8s/overlays/prod': RENDERED,
  'kubectl -n spark-driver-cleaner rollout status deployment/spark-driver-cleaner': {
    run: 'needs',
    needs: CLUSTER,
    instead: 'the image test runs the image as the Deployment does and waits for /readyz 200',
    file: 'test/deploy/image.test.ts',
    invocation: "'/readyz 200'",
  },
};
const NPM_TEST: Coverage = {
  run: 'elsewhere',
  file: '.ci/run',
  invocation: '\nnpm test\n',
  why: 'CI runs the whole suite as written',
};
/** The unit tests alone: this file is one of them, so running the command here would run this file again. */
const UNIT_TESTS: Coverage = {
  run: 'elsewhere',
  file: 'package.json',
  invocation: '"test:unit": "vitest run test/unit"',
  why: 'its script: vitest on test/unit, which npm test runs in CI; not here, as this file is one of them',
};
const RUN_EXAMPLE =
  'npx node src/cli.ts run --targets prod-eu:spark-jobs,prod-eu:spark-adhoc --redis-url redis://redis:6379 --etcd-endpoints http://etcd-0:2379,http://etcd-1:2379,http://etcd-2:2379 --retention PT5M --policy ALL';
const BENCHMARKS: Record<string, Coverage> = {
  'npm run bench -- --quick': {
    run: 'elsewhere',
    file: 'test/bench/quick.test.ts',
    invocation: "'npm run bench -- --quick'",
    why: 'the quick benchmarks, run exactly as written, into bench/results/quick*',
  },
  'npm run bench': {
    run: 'elsewhere',
    file: 'test/bench/quick.test.ts',
    invocation: "'npm run bench -- --quick'",
    why: 'the same benchmarks at their smallest size (--quick); the full run only changes the sizes',
  },
  'npm run bench -- --quick --only scale --name scale-quick': {
    run: 'elsewhere',
    file: 'test/bench/scale.test.ts',
    invocation: "'npm run bench -- --quick --only scale --name scale-quick'",
    why: 'the scale benchmark at 4 targets × 2 replicas, run exactly as written',
  },
  'npm run bench -- --only scale --scale-sizes 1000x5 --name scale-soak': {
    run: 'elsewhere',
    file: 'test/bench/scale.test.ts',
    invocation: "'npm run bench -- --quick --only scale --name scale-quick'",
    why: 'the 1,000 × 5 soak: the same benchmark, only the size differs (--scale-sizes)',
  },
  'npm run bench -- --only scale --scale-sizes 1000x5 --scale-scope cluster --name scale-soak-cluster': {
    run: 'elsewhere',
    file: 'test/bench/scale.test.ts',
    invocation: "'npm run bench -- --quick --only scale --scale-scope cluster --name scale-quick-cluster'",
    why: 'the 1,000 × 5 soak in cluster scope: the quick run with the same --scale-scope',
  },
  'npm run bench -- --only scale --scale-sizes 1000x5 --scale-scope cluster --scale-as-deployed --name scale-soak-cluster-deployed':
    {
      run: 'elsewhere',
      file: 'test/bench/scale.test.ts',
      invocation: "'npm run bench -- --quick --only scale --scale-as-deployed --name scale-quick-deployed'",
      why: 'the 1,000 × 5 soak as deployed: the quick run with the same --scale-as-deployed (cluster scope is tested beside it)',
    },
};
/** The discovered-namespaces example (docs/deployment.md). */
const DISCOVERY: Record<string, Coverage> = {
  "npx node src/cli.ts run --check --targets 'kind-a:spark,kind-a:*' --namespace-selector spark-cleanup=enabled":
    {
      run: 'as-written',
      expect: ({ stdout }) =>
        expect(JSON.parse(stdout)).toMatchObject({
          targets: ['kind-a:spark', 'kind-a:*'],
          namespaceSelector: 'spark-cleanup=enabled',
        }),
    },
};
/** The secured-etcd role commands (docs/deployment.md). */
const SECURED_ETCD: Record<string, Coverage> = {
  'etcdctl role add spark-driver-cleaner': {
    run: 'elsewhere',
    file: 'test/failure/etcd-secured.test.ts',
    invocation: "'etcdctl role add spark-driver-cleaner'",
    why: 'needs an etcd with TLS and auth: the secured-etcd test gives the cleaner its role with these commands, as root',
  },
  'etcdctl role grant-permission spark-driver-cleaner --prefix=true readwrite spark-driver-cleaner/': {
    run: 'elsewhere',
    file: 'test/failure/etcd-secured.test.ts',
    invocation:
      "'etcdctl role grant-permission spark-driver-cleaner --prefix=true readwrite spark-driver-cleaner/'",
    why: 'needs an etcd with TLS and auth: the secured-etcd test gives the cleaner its role with these commands, as root',
  },
  'etcdctl user add spark-driver-cleaner --new-user-password "$ETCD_CLEANER_PASSWORD"': {
    run: 'elsewhere',
    file: 'test/failure/etcd-secured.test.ts',
    invocation: '\'etcdctl user add spark-driver-cleaner --new-user-password "$ETCD_CLEANER_PASSWORD"\'',
    why: 'needs an etcd with TLS and auth: the secured-etcd test gives the cleaner its role with these commands, as root',
  },
  'etcdctl user grant-role spark-driver-cleaner spark-driver-cleaner': {
    run: 'elsewhere',
    file: 'test/failure/etcd-secured.test.ts',
    invocation: "'etcdctl user grant-role spark-driver-cleaner spark-driver-cleaner'",
    why: 'needs an etcd with TLS and auth: the secured-etcd test gives the cleaner its role with these commands, as root',
  },
};
/** The uninstall commands of the cleaner's data (docs/deployment.md, "Uninstalling"). */
const UNINSTALL: Record<string, Coverage> = Object.fromEntries(
  [
    [
      `redis-cli -u "$REDIS_URL" --scan --pattern 'sdc:*' | xargs -r -d '\\n' redis-cli -u "$REDIS_URL" unlink`,
      'const REDIS_CLEANUP =\n  \'redis-cli -u "$REDIS_URL" --scan --pattern',
    ],
    ['etcdctl del --prefix spark-driver-cleaner/', "'etcdctl del --prefix spark-driver-cleaner/'"],
    [
      'zkCli.sh -server "$ZOOKEEPER" deleteall /spark-driver-cleaner',
      '\'zkCli.sh -server "$ZOOKEEPER" deleteall /spark-driver-cleaner\'',
    ],
  ].map(([command, invocation]) => [
    command,
    {
      run: 'elsewhere',
      file: 'test/ops/uninstall.test.ts',
      invocation: invocation ?? '',
      why: 'needs the servers: run as written against real Redis, etcd and ZooKeeper after replicas used them',
    } satisfies Coverage,
  ]),
);
/** A nemesis variant: npm test runs the suite at its CI size, and `file` reads the variable that changes it. */
const NEMESIS = (
  variable: string,
  what: string,
  file = 'test/nemesis/suite.ts',
  invocation = `process.env.${variable}`,
): Coverage => ({
  run: 'elsewhere',
  file,
  invocation,
  why: `npm test runs test/nemesis at its CI size; ${variable} only changes ${what}, read here`,
});

/** Every document's commands, by document. */
const COVERAGE: Record<string, Record<string, Coverage>> = {
  'README.md': {
    'npm run demo': {
      run: 'elsewhere',
      file: 'test/e2e/demo.test.ts',
      invocation: "startDemo(['--pods', '60', '--replicas', '3', '--retention', '2s', '--json'])",
      why: 'the demo command with 60 pods (npm run demo = scripts/setup.sh, which CI runs, then the same command)',
    },
    'npm test': NPM_TEST,
    'npm run test:unit': UNIT_TESTS,
    'npm run demo -- --leadership zookeeper': {
      run: 'elsewhere',
      file: 'test/e2e/demo.test.ts',
      invocation:
        "ZOOKEEPER_DEMO = ['--leadership', 'zookeeper', '--pods', '20', '--replicas', '2', '--json']",
      why: 'the demo on ZooKeeper with 20 pods and 2 replicas',
    },
    ...CLUSTER_APPLY,
    ...PROVE,
    "kubectl -n spark-driver-cleaner logs -l app.kubernetes.io/name=spark-driver-cleaner --tail=-1 | grep 'would delete'":
      {
        run: 'needs',
        needs: CLUSTER,
        instead:
          'the outcome log test checks the dry-run line it greps for: "dry run: would delete", with pod and deadline',
        file: 'test/unit/outcome-log.test.ts',
        invocation: "msg: 'dry run: would delete'",
      },
    'kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js status':
      IN_CONTAINER,
    'kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js explain spark-team-a/kyuubi-etl-0f3a9c2e-driver':
      IN_CONTAINER_EXPLAIN,
  },
  'CONTRIBUTING.md': {
    'npm run setup': {
      run: 'elsewhere',
      file: '.ci/run',
      invocation: '\nbash scripts/setup.sh\n',
      why: 'CI runs the script npm run setup runs; not here: it may run npm ci, which rewrites node_modules',
    },
    'npm test': NPM_TEST,
    'npm run test:unit': UNIT_TESTS,
    [RUN_EXAMPLE]: { run: 'with-check' },
    ...BENCHMARKS,
    'bash scripts/release.sh 0.3.0': {
      run: 'elsewhere',
      file: 'test/unit/version.test.ts',
      invocation: "run('bash', ['scripts/release.sh', ...args], scratch, env)",
      why: 'the version test runs the release script on a scratch repository: its refusals, then a release',
    },
  },
  'bench/README.md': BENCHMARKS,
  'docs/configuration.md': {
    'npx node src/cli.ts run --help': {
      run: 'as-written',
      expect: ({ stdout }) => {
        for (const f of FIELDS) expect(stdout, f.key).toContain(flagName(f.key));
        expect(stdout).toContain('(range: 1s to 24h)');
      },
    },
    'npx node src/cli.ts run --check --targets kind-a:spark --retention PT5M': {
      run: 'as-written',
      expect: ({ stdout }) =>
        expect(JSON.parse(stdout)).toMatchObject({ targets: ['kind-a:spark'], retentionMs: 300_000 }),
    },
  },
  'docs/operations.md': {
    ...PROVE,
    'npx node src/cli.ts check --output json': {
      run: 'elsewhere',
      file: 'test/ops/check-cluster.test.ts',
      invocation: "runCheck(['--output', 'json'], env(server.kubeconfigPath))",
      why: 'check needs a cluster, Redis and etcd: run against the sandbox with RBAC, its document validated against docs/check-output.schema.json',
    },
    'npx node src/cli.ts check --help': {
      run: 'as-written',
      expect: ({ stdout }) => {
        for (const flag of ['--output', '--canary', '--canary-image', '--max-clock-skew', '--timeout'])
          expect(stdout).toContain(flag);
        for (const f of FIELDS) expect(stdout, f.key).toContain(flagName(f.key));
      },
    },
    'kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js status':
      IN_CONTAINER,
    'kubectl -n spark-driver-cleaner exec deploy/spark-driver-cleaner -- node dist/src/cli.js explain spark-team-a/kyuubi-etl-0f3a9c2e-driver':
      IN_CONTAINER_EXPLAIN,
    'npx node src/cli.ts explain prod-eu:spark-jobs/kyuubi-etl-0f3a9c2e-driver': {
      run: 'elsewhere',
      file: 'test/ops/status-explain.test.ts',
      invocation: "cli(['explain', ref, '--json']",
      why: 'explain needs Redis, etcd and a cluster: run against replica processes for each verdict',
    },
    'npx node src/cli.ts status': {
      run: 'elsewhere',
      file: 'test/ops/status-explain.test.ts',
      invocation: "cli(['status'], env([NS]))",
      why: 'status needs Redis and etcd: run against replica processes, a healthy and a leaderless target',
    },
    'npx node src/cli.ts status --json': {
      run: 'elsewhere',
      file: 'test/ops/status-explain.test.ts',
      invocation: "cli(['status', '--json'], env([NS, ORPHAN]))",
      why: 'the same, parsed as JSON, exit 0 and exit 1',
    },
    'npx node src/cli.ts status --help': {
      run: 'as-written',
      expect: ({ stdout }) => {
        expect(stdout).toContain('--json');
        for (const f of FIELDS) expect(stdout, f.key).toContain(flagName(f.key));
      },
    },
  },
  'docs/deployment.md': {
    ...CLUSTER_APPLY,
    ...PROVE,
    ...SECURED_ETCD,
    ...DISCOVERY,
    'SA=system:serviceaccount:spark-driver-cleaner:spark-driver-cleaner': RBAC,
    'kubectl auth can-i delete pods -n spark-team-a --as=$SA': RBAC,
    'kubectl auth can-i watch pods -n spark-team-b --as=$SA': RBAC,
    'kubectl auth can-i patch pods -n spark-team-a --as=$SA': RBAC,
    'kubectl auth can-i delete pods -n default --as=$SA': RBAC,
    'kubectl auth can-i get secrets -n spark-team-a --as=$SA': RBAC,
    'podman save spark-driver-cleaner:dev | docker load': {
      run: 'needs',
      needs: 'a Docker engine',
      instead: 'the image test builds spark-driver-cleaner:dev with podman, the image this loads into Docker',
      file: 'test/deploy/image.test.ts',
      invocation: "const DOCUMENTED_IMAGE = 'spark-driver-cleaner:dev';",
    },
    'kubectl -n spark-driver-cleaner delete deployment spark-driver-cleaner --cascade=foreground': {
      run: 'needs',
      needs: CLUSTER,
      instead:
        'the image test stops the container as a pod is deleted (SIGTERM, the grace period) and checks that it resigned its leadership and exited 0',
      file: 'test/deploy/image.test.ts',
      invocation: "podman(['stop', '--time', String(GRACE_S), name]",
    },
    'kubectl delete -k infra/k8s/overlays/prod --ignore-not-found': RENDERED,
    ...UNINSTALL,
    'SDC_TARGETS=kind-kind:spark SDC_DASHBOARD_PASSWORD=change-me docker compose -f infra/compose.yaml up': {
      run: 'needs',
      needs: 'a Docker engine and a cluster',
      instead:
        'the compose test checks the services, the build from the Dockerfile and the replicas run as in the pod',
      file: 'test/deploy/compose.test.ts',
      invocation: "it('runs Redis, etcd, a collector, Jaeger and three replicas'",
    },
    'bash scripts/check-deploy.sh': {
      run: 'elsewhere',
      file: '.ci/run',
      invocation: '\nSKIP_DEPLOY_TESTS=1 bash scripts/check-deploy.sh\n',
      why: 'CI runs it, leaving its vitest run of test/deploy to npm test, which runs that directory anyway',
    },
  },
  'docs/failure-modes.md': {
    'npx vitest run test/nemesis': {
      run: 'elsewhere',
      file: '.ci/run',
      invocation: '\nnpm test\n',
      why: 'npm test runs test/nemesis at this CI size',
    },
    'SEED=123 npx vitest run test/nemesis': NEMESIS('SEED', 'the seed', 'test/nemesis/prng.ts', 'env.SEED'),
    'NEMESIS_MINUTES=30 npx vitest run test/nemesis': NEMESIS('NEMESIS_MINUTES', 'the duration'),
    'SEED=123 NEMESIS_EXCLUDE=clock-step npx vitest run test/nemesis': NEMESIS(
      'NEMESIS_EXCLUDE',
      'the kinds of fault',
    ),
    'NEMESIS_REDIS=sentinel SEED=7 npx vitest run test/nemesis': NEMESIS(
      'NEMESIS_REDIS',
      'which Redis modes run (npm test runs every mode)',
      'test/nemesis/nemesis.test.ts',
    ),
    'NEMESIS_REDIS=cluster SEED=7 npx vitest run test/nemesis': NEMESIS(
      'NEMESIS_REDIS',
      'which Redis modes run (npm test runs every mode)',
      'test/nemesis/nemesis.test.ts',
    ),
    'NEMESIS_LEADERSHIP=zookeeper SEED=7 npx vitest run test/nemesis': NEMESIS(
      'NEMESIS_LEADERSHIP',
      'which leadership backend one run uses (npm test runs a ZooKeeper run too)',
      'test/nemesis/nemesis.test.ts',
    ),
    'NEMESIS_CLUSTERS=2 SEED=7 npx vitest run test/nemesis': NEMESIS(
      'NEMESIS_CLUSTERS',
      'how many clusters share the stores in one run (npm test runs a two-cluster run on each backend too)',
      'test/nemesis/nemesis.test.ts',
    ),
    'npx vitest run test/failure': {
      run: 'elsewhere',
      file: '.ci/run',
      invocation: '\nnpm test\n',
      why: 'npm test runs test/failure as written (the CI variant)',
    },
    'SOAK=1 npx vitest run test/failure': {
      run: 'elsewhere',
      file: 'test/failure/helpers.ts',
      invocation: "process.env.SOAK === '1'",
      why: 'npm test runs test/failure at its CI size; SOAK=1 only raises the sizes, read here',
    },
  },
  'docs/sizing.md': {
    'redis-cli ACL SETUSER spark-driver-cleaner on ">$REDIS_CLEANER_PASSWORD" resetkeys "~sdc:*" resetchannels -@all +@read +@write +@keyspace +@scripting +@blocking +@connection +@transaction -@dangerous +info +config\\|get +client\\|list +time':
      {
        run: 'elsewhere',
        file: 'test/integration/redis-acl.test.ts',
        invocation:
          'resetkeys "~sdc:*" resetchannels -@all +@read +@write +@keyspace +@scripting +@blocking +@connection +@transaction -@dangerous +info +config\\\\|get +client\\\\|list +time',
        why: 'needs a Redis to grant it on: the ACL test creates the user with it on a real Redis, runs a replica, status and explain as that user, and finds nothing denied',
      },
  },
  'docs/image.md': {
    'bash scripts/build-base-image.sh --pin': {
      run: 'needs',
      needs: 'bases to review (it rewrites the Dockerfile)',
      instead:
        'the image test builds with the pinned digests (build-image.sh stops when the bases made are not the pins), and the Dockerfile test checks that the script rewrites the two ARG lines',
      file: 'test/deploy/dockerfile.test.ts',
      invocation: "expect(script).toContain('s|^ARG RUNTIME_BASE=.*|');",
    },
    'bash scripts/install-test-tools.sh': {
      run: 'elsewhere',
      file: '.ci/run',
      invocation: '\nbash scripts/install-test-tools.sh',
      why: 'CI runs it as written (as root)',
    },
    'bash scripts/build-image.sh': {
      run: 'elsewhere',
      file: 'test/deploy/image.test.ts',
      invocation: "const BUILD = 'bash scripts/build-image.sh';",
      why: 'the image test builds the image with it as written (minutes on a cold cache), then runs the image',
    },
    'bash scripts/image-report.sh spark-driver-cleaner:dev': {
      run: 'elsewhere',
      file: 'test/deploy/image.test.ts',
      invocation: "const REPORT = 'bash scripts/image-report.sh spark-driver-cleaner:dev';",
      why: 'the image test runs it as written on the image it built and checks each section',
    },
    'podman run --rm --network host --user 1000:1000 --read-only --read-only-tmpfs=false --tmpfs /tmp:rw,mode=1777,size=64m --cap-drop=ALL --security-opt no-new-privileges --volume "$HOME/.kube/config:/kube/config:ro" --env KUBECONFIG=/kube/config --env SDC_TARGETS=kind-kind:spark --env SDC_REDIS_URL=redis://127.0.0.1:6379 --env SDC_ETCD_ENDPOINTS=http://127.0.0.1:2379 --env SDC_DRY_RUN=true --env SDC_DASHBOARD_USER=admin --env SDC_DASHBOARD_PASSWORD=change-me spark-driver-cleaner:dev':
      {
        run: 'needs',
        needs: 'a kind cluster in ~/.kube/config',
        instead: 'the image test runs the image with the same flags against the sandbox API server',
        file: 'test/deploy/image.test.ts',
        invocation: 'function deploymentFlags(user: string): string[] {',
      },
  },
};

/** The environment of a fresh shell: none of the cleaner's settings. */
function freshEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env))
    if (k.startsWith('SDC_') || ['KUBECONFIG', 'REDIS_URL', 'ETCD_ENDPOINTS'].includes(k)) delete env[k];
  return env;
}

interface ShellResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** The commands run here, started together (each CLI start costs seconds of CPU), awaited by their test. */
const runs = new Map<string, Promise<ShellResult>>();
function started(command: string): Promise<ShellResult> {
  let run = runs.get(command);
  if (!run) {
    run = shIn(ROOT, command);
    runs.set(command, run);
  }
  return run;
}

describe('shellCommands (the README parser)', () => {
  const fence = '```';
  const cases: [string, string, string[]][] = [
    [
      'one sh block, two commands',
      `${fence}sh\nnpm run demo\nnpm test\n${fence}`,
      ['npm run demo', 'npm test'],
    ],
    ['a comment after a blank is dropped', `${fence}sh\nnpm test   # all of it\n${fence}`, ['npm test']],
    ['a # inside a word or quotes is kept', `${fence}bash\necho a#b '# c'\n${fence}`, ["echo a#b '# c'"]],
    ['continuations joined', `${fence}sh\nrun \\\n  --a 1 \\\n  --b 2\n${fence}`, ['run --a 1 --b 2']],
    ['a $ prompt removed', `${fence}console\n$ npm test\n${fence}`, ['npm test']],
    ['comment-only and blank lines skipped', `${fence}sh\n# setup\n\nnpm test\n${fence}`, ['npm test']],
    ['blocks of other languages ignored', `${fence}\nnpm x\n${fence}\n${fence}yaml\na: b\n${fence}`, []],
    ['text outside fences ignored', 'run `npm test` now', []],
  ];
  for (const [name, md, want] of cases) it(name, () => expect(shellCommands(md)).toEqual(want));
});

/** A scratch copy of `folders` (relative to the root) for a command that writes into them. */
const scratch: string[] = [];
function scratchCopy(folders: string[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'sdc-doc-command-'));
  scratch.push(dir);
  for (const f of folders) cpSync(path.join(ROOT, f), path.join(dir, f), { recursive: true });
  return dir;
}

/** Runs `command` with bash in `cwd` in a fresh environment. */
function shIn(cwd: string, command: string): Promise<ShellResult> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', command], { cwd, env: freshEnv() }, (err, stdout, stderr) => {
      const status = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      if (err && status === null) reject(err);
      else resolve({ status, stdout, stderr });
    });
  });
}

afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('documented commands', () => {
  const commandLine = (command: string, how: Coverage) =>
    how.run === 'with-check' ? `${command} --check` : command;

  beforeAll(() => {
    for (const entries of Object.values(COVERAGE))
      for (const [command, how] of Object.entries(entries))
        if (how.run === 'as-written' || how.run === 'with-check')
          void started(commandLine(command, how)).catch(() => undefined);
  });

  it('every document with shell commands has entries here, and every document named here exists', () => {
    const withCommands = documents().filter((d) => shellCommands(read(d)).length > 0);
    expect(withCommands).toContain('README.md');
    expect(Object.keys(COVERAGE).sort()).toEqual(withCommands);
    for (const d of Object.keys(COVERAGE)) expect(existsSync(path.join(ROOT, d)), d).toBe(true);
  });

  for (const [doc, entries] of Object.entries(COVERAGE)) {
    describe(doc, () => {
      const commands = shellCommands(existsSync(path.join(ROOT, doc)) ? read(doc) : '');

      it('every command in a fenced shell block has an entry here, and every entry is still shown', () => {
        expect(
          commands.filter((c) => !(c in entries)),
          `${doc}: commands without an entry`,
        ).toEqual([]);
        expect(
          Object.keys(entries).filter((c) => !commands.includes(c)),
          `${doc}: entries it no longer shows`,
        ).toEqual([]);
      });

      it('every `npm run` script it names exists in package.json', () => {
        for (const c of commands) {
          const script = /^npm run (?:-s )?([\w:-]+)/.exec(c)?.[1];
          if (script) expect(scripts[script], c).toBeDefined();
        }
      });

      for (const [command, how] of Object.entries(entries)) {
        const short = command.length > 70 ? `${command.slice(0, 67)}…` : command;
        if (how.run === 'elsewhere') {
          it(`${short}: run by ${how.file} (${how.why})`, () => {
            expect(read(how.file)).toContain(how.invocation);
          });
        } else if (how.run === 'needs') {
          it(`${short}: needs ${how.needs}; instead, ${how.instead} (${how.file})`, () => {
            expect(read(how.file)).toContain(how.invocation);
          });
        } else if (how.run === 'in-scratch-copy') {
          it(`${short}: runs as written in a scratch copy of ${how.copy.join(', ')}`, async () => {
            const dir = scratchCopy(how.copy);
            const r = await shIn(dir, command);
            expect(r.status, r.stderr).toBe(0);
            how.expect(dir);
          });
        } else if (how.run === 'as-written') {
          it(`${short}: runs as written`, async () => {
            const r = await started(command);
            expect(r.status, r.stderr).toBe(0);
            how.expect(r);
          });
        } else {
          it(`${short}: every flag it shows is valid (run with --check)`, async () => {
            const r = await started(commandLine(command, how));
            expect(r.status, r.stderr).toBe(0);
            expect(JSON.parse(r.stdout)).toHaveProperty('targets');
          });
        }
      }
    });
  }
});
