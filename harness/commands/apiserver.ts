/**
 * `harness apiserver` (`npm run harness -- apiserver`): runs the sandbox Kubernetes API server until
 * SIGINT/SIGTERM, printing its URL and kubeconfig path, optionally with fixture pods and a synthetic
 * Spark workload. Bad options exit with code 2 and a message naming the option (commander's
 * exitOverride in harness/cli.ts).
 */
import { type Command, InvalidArgumentError } from 'commander';
import { startSandboxApiServer } from '../sandbox/apiserver/server.ts';
import { startKubelet } from '../sandbox/kubelet.ts';
import { loadFixturePods, startSparkWorkload } from '../sandbox/workload.ts';

function intInRange(min: number, max: number): (raw: string) => number {
  return (raw) => {
    const n = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || !Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}`);
    }
    return n;
  };
}

function positiveNumber(raw: string): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number > 0');
  return n;
}

function namespaceList(raw: string): string[] {
  const list = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (list.length === 0 || list.some((s) => !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s))) {
    throw new InvalidArgumentError('expected comma-separated namespace names (RFC 1123 labels)');
  }
  return list;
}

interface ApiserverFlags {
  port: number;
  host: string;
  tls?: boolean;
  token?: string;
  kubeconfigOut?: string;
  context: string;
  namespace?: string;
  fixtures?: boolean;
  workload?: string[];
  workloadRate: number;
  workloadPods?: number;
  workloadRunMs: number;
  workloadPendingMs: number;
  workloadExecutors: number;
  kubelet?: boolean;
}

/** Registers the `apiserver` subcommand on `program`. */
export function registerApiserverCommand(program: Command): void {
  program
    .command('apiserver')
    .description('Run the sandbox Kubernetes API server (core/v1 Pods) until SIGINT/SIGTERM')
    .option('--port <n>', 'TCP port (0 = a free port)', intInRange(0, 65535), 0)
    .option('--host <address>', 'listen address', '127.0.0.1')
    .option('--tls', 'serve HTTPS with a generated self-signed certificate')
    .option('--token <token>', 'require this bearer token')
    .option('--kubeconfig-out <file>', 'write the kubeconfig here (default: a temp file)')
    .option('--context <name>', 'context name in the kubeconfig', 'sandbox')
    .option('--namespace <ns>', 'default namespace of the kubeconfig context')
    .option('--fixtures', 'load ../shared/fixtures/driver-pods.json')
    .option(
      '--workload <namespaces>',
      'run a synthetic Spark workload in these comma-separated namespaces',
      namespaceList,
    )
    .option('--workload-rate <perSecond>', 'drivers created per second', positiveNumber, 2)
    .option('--workload-pods <n>', 'total drivers, then stop creating', intInRange(0, 10_000_000))
    .option('--workload-run-ms <ms>', 'time a driver runs, in ms', intInRange(0, 86_400_000), 5000)
    .option('--workload-pending-ms <ms>', 'time a driver is pending, in ms', intInRange(0, 86_400_000), 500)
    .option('--workload-executors <n>', 'executor pods per driver', intInRange(0, 100), 1)
    .option('--kubelet', 'run pods created through the API (check --canary): each exits 0 at once')
    .action(async (flags: ApiserverFlags) => {
      if (flags.token !== undefined && flags.token.trim() === '') {
        process.stderr.write("error: option '--token <token>' must not be empty\n");
        process.exit(2);
      }
      const server = await startSandboxApiServer({
        port: flags.port,
        host: flags.host,
        tls: flags.tls ?? false,
        token: flags.token,
        kubeconfigOut: flags.kubeconfigOut,
        contextName: flags.context,
        namespace: flags.namespace,
      });
      if (flags.fixtures) loadFixturePods(server);
      const workload = flags.workload
        ? startSparkWorkload(server, {
            namespaces: flags.workload,
            ratePerSecond: flags.workloadRate,
            pods: flags.workloadPods,
            runMs: flags.workloadRunMs,
            pendingMs: flags.workloadPendingMs,
            executorsPerDriver: flags.workloadExecutors,
          })
        : undefined;
      const kubelet = flags.kubelet ? startKubelet(server) : undefined;
      process.stdout.write(`sandbox apiserver listening on ${server.url}\n`);
      process.stdout.write(`kubeconfig: ${server.kubeconfigPath} (context ${server.contextName})\n`);
      const shutdown = async () => {
        workload?.stop();
        kubelet?.stop();
        await server.close();
        process.exit(0);
      };
      process.once('SIGINT', shutdown);
      process.once('SIGTERM', shutdown);
      // Keep the process alive: the server's own timers are unref'd.
      setInterval(() => {}, 1 << 30);
    });
}
