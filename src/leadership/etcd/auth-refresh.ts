/**
 * Logging in again on every path of the etcd3 client once etcd forgets its auth token. etcd's simple tokens
 * live in its memory only: a restarted member re-creates only the logins still in its log after its last
 * database commit, and answers any other token (or one unused for `--auth-token-ttl`) with "invalid auth
 * token". etcd3 caches one token for all calls and streams, and drops it only when a
 * **unary** call is refused (its connection pool's `exec`). Streams carry the token they were opened with:
 *
 * - **watch**: etcd checks the stream's token at each watch it creates on the stream and refuses the watch
 *   (`created` and `canceled` at once, reason "invalid auth token" or "permission denied"). etcd3 then hands
 *   the error to the watcher, keeps the stream — so every later watch on it is refused too — and leaves its
 *   queue of watches to create stuck on the refused one, so the next watch created waits forever. Here such a
 *   refusal drops the token and re-opens the watch stream (a new login), the watch kept and resumed from its
 *   revision, as after a network failure. A refusal on a stream opened right after a new login is real (the
 *   role lacks the keys): it goes to the watcher, and the queue goes on with the next watch.
 * - **lease keepalive**: etcd3 re-opens a failed keepalive stream after 100 ms with the cached token; a
 *   keepalive refused for its token drops the token, so the re-opened stream logs in again. (etcd 3.4
 *   renews a lease without looking at the token: there the keepalive goes on through a restart as it is.)
 * - **unary calls** (campaign, fence reads, membership puts): etcd3 drops the token and retries — kept.
 *
 * This reaches into etcd3 1.1.2's internals (its watch manager and connection pool); the version is pinned
 * (README, dependency notes) and test/failure/etcd-secured.test.ts restarts an etcd with auth to prove it.
 */
import { type Etcd3, EtcdInvalidAuthTokenError } from 'etcd3';
import type { Logger } from '../../log.ts';

/** Cancel reasons of a refused watch creation that can mean a token etcd no longer knows. */
const TOKEN_REFUSAL = /invalid auth token|permission denied|auth token is not provided/i;

/** A watcher of etcd3's watch manager (internal). */
interface WatcherInternals {
  id: string | null;
}

/** The parts of etcd3's watch manager used here (internal, etcd3 1.1.2). */
interface WatchManagerInternals {
  /** 2: connected (a stream open). */
  state: number;
  queue?: { queue: WatcherInternals[]; readQueue(): void };
  handleCancelResponse(watcher: WatcherInternals, res: { cancel_reason?: string }): void;
  handleCreatedResponse(res: { canceled?: boolean }): void;
  handleError(err: Error): void;
}

/** The parts of etcd3's connection pool used here (internal; `authenticator` is replaced on a secret reload). */
interface PoolInternals {
  authenticator: { invalidateMetadata(): void };
}

const CONNECTED = 2;

/** What {@link installAuthRefresh} counted, for tests and diagnostics. */
export interface AuthRefreshCounts {
  /** Watch streams re-opened because etcd refused their token. */
  readonly watchStreamsReopened: number;
  /** Cached tokens dropped because a keepalive stream was refused. */
  readonly keepaliveTokensDropped: number;
}

/**
 * Makes `client`'s watch and lease keepalive streams log in again after etcd forgot the token (see the module
 * comment). Call once, right after creating the client.
 * @param log where each new login of a stream is logged (info: a recovery, not a failure)
 * @returns the counts so far.
 */
export function installAuthRefresh(client: Etcd3, log?: Logger): () => AuthRefreshCounts {
  const internals = client as unknown as { pool: PoolInternals; watchManager: WatchManagerInternals };
  const manager = internals.watchManager;
  const dropToken = () => internals.pool.authenticator.invalidateMetadata();
  let watchStreamsReopened = 0;
  let keepaliveTokensDropped = 0;
  /** True from a re-open for a refused token until a watch is created on the new stream. */
  let reopenedForToken = false;

  const created = manager.handleCreatedResponse.bind(manager);
  manager.handleCreatedResponse = (res) => {
    if (!res.canceled) reopenedForToken = false;
    created(res);
  };

  const cancelled = manager.handleCancelResponse.bind(manager);
  manager.handleCancelResponse = (watcher, res) => {
    const refusedCreation = watcher.id === null;
    if (
      refusedCreation &&
      !reopenedForToken &&
      manager.state === CONNECTED &&
      TOKEN_REFUSAL.test(res.cancel_reason ?? '')
    ) {
      // Keep the watcher: the new stream creates it again from its last revision.
      reopenedForToken = true;
      watchStreamsReopened += 1;
      dropToken();
      log?.info(
        { reason: res.cancel_reason },
        'etcd refused the watch stream’s auth token (etcd restarted or the token expired): logging in again',
      );
      manager.handleError(new EtcdInvalidAuthTokenError(`watch refused: ${res.cancel_reason}`));
      return;
    }
    cancelled(watcher, res);
    // etcd3 leaves a refused creation at the head of its queue: the next watch would never be sent.
    const queue = manager.queue;
    if (refusedCreation && queue && queue.queue[0] === watcher) {
      queue.queue.shift();
      queue.readQueue();
    }
  };

  const lease = client.lease.bind(client);
  client.lease = (...args: Parameters<Etcd3['lease']>) => {
    const l = lease(...args);
    l.on('keepaliveFailed', (err) => {
      if (err instanceof EtcdInvalidAuthTokenError) {
        keepaliveTokensDropped += 1;
        dropToken();
        log?.info('etcd refused the lease keepalive’s auth token: logging in again');
      }
    });
    return l;
  };

  return () => ({ watchStreamsReopened, keepaliveTokensDropped });
}
