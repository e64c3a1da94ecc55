/**
 * `spark-driver-cleaner run`: one replica. Flags mirror the configuration fields ({@link FIELDS});
 * environment variables `SDC_*` and a YAML file (`--config`) fill in the rest.
 * Exit codes: 2 for bad configuration (one line per bad field on stderr), 0 after a clean shutdown.
 * `run --check` only validates (the same checks as a start before it connects): it prints the effective
 * configuration and exits 0, or 2.
 */
import type { Command } from 'commander';
import { monotonicClock, systemClock } from '../clock.ts';
import { redactConfig } from '../config/redact.ts';
import { configWarnings } from '../config/warnings.ts';
import { startHttpServer } from '../http/server.ts';
import { KubeconfigError } from '../kube/kubeconfig.ts';
import { LeadershipAccessError } from '../leadership/access-error.ts';
import { createLogger } from '../log.ts';
import { RedisAccessError } from '../queue/redis-access-check.ts';
import { type Replica, startReplica } from '../replica.ts';
import { startReplicaSupervisor } from '../replica-supervisor.ts';
import { assertDistinctTargetNames } from '../status/state-store.ts';
import { createTelemetry } from '../telemetry/telemetry.ts';
import { addConfigOptions, loadConfigOrExit } from './config-options.ts';

/** Registers `run` on the program. */
export function registerRunCommand(program: Command): void {
  const cmd = program
    .command('run')
    .description('Run one replica: watch, enqueue, and clean up while leading.');
  cmd.option(
    '--check',
    'validate the configuration and exit: the effective configuration as JSON on stdout (secrets masked), ' +
      'warnings on stderr; exit 0, or 2 naming each bad field. Contacts nothing (reads the kubeconfig’s ' +
      'current context for targets that name none; contexts, Redis, etcd and the API server are checked at ' +
      'start, and all of them by the check command)',
  );
  addConfigOptions(cmd);
  cmd.action(async (flags: Record<string, unknown>) => {
    await runReplica(flags);
  });
}

/**
 * Loads the config, starts the replica and its HTTP server, and stops both on SIGTERM/SIGINT. With
 * `flags.check`, prints the configuration and its warnings and returns without starting anything.
 */
export async function runReplica(flags: Record<string, unknown>): Promise<void> {
  const config = loadConfigOrExit(flags);
  if (flags.check === true) {
    // No two targets that are one, as a start refuses them (the contexts themselves are loaded at start).
    try {
      assertDistinctTargetNames(config);
    } catch (err) {
      if (!(err instanceof KubeconfigError)) throw err;
      process.stderr.write(`spark-driver-cleaner: invalid configuration:\n  - ${err.message}\n`);
      process.exit(2);
    }
    process.stdout.write(`${JSON.stringify(redactConfig(config), null, 2)}\n`);
    for (const w of configWarnings(config))
      process.stderr.write(`spark-driver-cleaner: warning: ${w.field} ${w.value}: ${w.message}\n`);
    return;
  }
  const log = createLogger({ level: config.logLevel, base: { replica: config.replicaId } });
  log.info({ config: redactConfig(config) }, 'effective configuration');
  for (const w of configWarnings(config))
    log.warn({ field: w.field, value: w.value }, `configuration: ${w.field} ${w.value}: ${w.message}`);
  // OTEL_* configure the traces (none when unset); the metrics are served on /metrics.
  const telemetry = await createTelemetry({
    replicaId: config.replicaId,
    electionTtlSeconds: config.electionTtlSeconds,
    dryRun: config.dryRun,
  });
  for (const w of telemetry.tracing.warnings) log.warn(w);
  if (telemetry.tracing.enabled) log.info('exporting traces over OTLP/HTTP');
  let replica: Replica;
  try {
    const deps = { log, now: systemClock, monotonicNow: monotonicClock, telemetry };
    // `context:*` targets: a supervisor follows the discovered namespaces, restarting the replica on a change.
    replica =
      config.discover.length > 0
        ? await startReplicaSupervisor(config, deps)
        : await startReplica(config, deps);
  } catch (err) {
    if (
      err instanceof KubeconfigError ||
      err instanceof LeadershipAccessError ||
      err instanceof RedisAccessError
    ) {
      process.stderr.write(`spark-driver-cleaner: invalid configuration:\n  - ${err.message}\n`);
      log.flush();
      process.exit(2);
    }
    throw err;
  }
  let http: Awaited<ReturnType<typeof startHttpServer>>;
  try {
    http = await startHttpServer({
      config,
      replica,
      log,
      monotonicNow: monotonicClock,
      metrics: telemetry.metrics,
    });
  } catch (err) {
    const why = listenFailure(err);
    if (!why) throw err;
    // Not a crash to restart from: the port or address is wrong for this host. Resign before leaving.
    process.stderr.write(
      `spark-driver-cleaner: invalid configuration:\n  - httpHost/httpPort (--http-host/--http-port, ` +
        `SDC_HTTP_HOST/SDC_HTTP_PORT): cannot listen on ${config.httpHost}:${config.httpPort}: ${why}\n`,
    );
    await replica.stop().catch(() => undefined);
    log.flush();
    process.exit(2);
  }
  // `address`: where the socket is bound (0.0.0.0:9090 in a pod); `url`: how to reach it from this host.
  log.info({ address: http.address, url: http.url }, 'http server listening');

  let exiting = false;
  const shutdown = (signal: string) => {
    if (exiting) return;
    exiting = true;
    log.info({ signal }, 'shutting down: resigning leadership');
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    void (async () => {
      await replica.stop();
      await http.close();
      await telemetry.shutdown();
      log.flush();
      process.exit(0);
    })();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

/** Why the HTTP server could not listen, for errors that a configuration change fixes; else undefined. */
function listenFailure(err: unknown): string | undefined {
  const code = (err as { code?: unknown })?.code;
  switch (code) {
    case 'EADDRINUSE':
      return 'the port is already in use (EADDRINUSE): choose a free port';
    case 'EADDRNOTAVAIL':
      return 'the address is not one of this host (EADDRNOTAVAIL): use 0.0.0.0, 127.0.0.1 or an address of this host';
    case 'EACCES':
      return 'permission denied (EACCES): ports below 1024 need privileges; choose a port ≥ 1024';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `the host name does not resolve (${code}): use an IP address or a resolvable name`;
    default:
      return undefined;
  }
}
