/**
 * A leadership backend refused the configured credentials or access (a certificate, a user, a key prefix):
 * a configuration error, exit 2 (src/commands/run.ts). A backend that does not answer is no such error: the
 * replica waits for it as for any outage.
 */
export class LeadershipAccessError extends Error {
  override name = 'LeadershipAccessError';
}
