/**
 * Who can reach the HTTP port without credentials. `/ui` (the Bull dashboard, writable when
 * `dashboardReadOnly` is false) and `/api/v1/` (pod data, and explains that make live GETs with the cleaner's
 * token) need `dashboardUser`/`dashboardPassword` once the port listens beyond loopback: otherwise anything that
 * reaches the pod IP reads them. The image listens on 0.0.0.0 (probes and scrapes must reach it), so that
 * combination is refused at load (exit 2), unless `httpAllowUnauthenticated` says that something else guards
 * the port: a NetworkPolicy admitting only the scrapers, or a sidecar that authenticates.
 */
import { BlockList, isIP } from 'node:net';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

/** Whether `host` (an IP address or a host name) only accepts connections from this host: 127/8, ::1, `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase();
  if (h === 'localhost' || h === 'localhost.') return true;
  const family = isIP(h);
  if (family === 0) return false; // another name: it may resolve to any address
  return LOOPBACK.check(h, family === 4 ? 'ipv4' : 'ipv6');
}

/** The settings {@link exposureProblem} reads. */
export interface HttpExposure {
  readonly httpHost: string;
  readonly dashboardUser?: string | undefined;
  readonly dashboardPassword?: string | undefined;
  readonly httpAllowUnauthenticated: boolean;
}

/**
 * Why these settings would serve `/ui` and `/api/v1/` to the network without credentials, with the fixes;
 * undefined when they do not (loopback, credentials set, or the opt-out).
 */
export function exposureProblem(c: HttpExposure): string | undefined {
  if (isLoopbackHost(c.httpHost) || c.httpAllowUnauthenticated) return undefined;
  if (c.dashboardUser !== undefined || c.dashboardPassword !== undefined) return undefined;
  return (
    `${c.httpHost} is not a loopback address and no dashboard credentials are set: /ui (the Bull dashboard) and ` +
    "/api/v1/ (pod data, explains with live GETs under the cleaner's token) would answer anyone who reaches the " +
    'port; set dashboardUser and dashboardPassword (SDC_DASHBOARD_USER, SDC_DASHBOARD_PASSWORD, from a Secret), ' +
    'or httpHost 127.0.0.1, or, where a NetworkPolicy or an authenticating sidecar already guards the port, ' +
    'httpAllowUnauthenticated true (--http-allow-unauthenticated, SDC_HTTP_ALLOW_UNAUTHENTICATED)'
  );
}
