/**
 * The etcd client of a replica. etcd3's default per-host circuit breaker opens after three consecutive
 * "recoverable" errors for 5 s, and it counts `GRPCCancelledError` — which our own cancellation of a
 * finished election watch produces. After a failover, cancelling the watches of several targets at once
 * opened the breaker and blocked the new leader's fencing reads for 5 s. Here cancellations do not count,
 * and an open breaker retries after 1 s, well inside an election TTL.
 */
import { ConsecutiveBreaker, circuitBreaker, handleWhen } from 'cockatiel';
import { Etcd3, GRPCCancelledError, isRecoverableError } from 'etcd3';

/** Creates an etcd client for the given endpoints (`http://host:port`). */
export function createEtcdClient(endpoints: readonly string[]): Etcd3 {
  return new Etcd3({
    hosts: [...endpoints],
    dialTimeout: 3000,
    faultHandling: {
      host: () =>
        circuitBreaker(
          handleWhen((err) => isRecoverableError(err) && !(err instanceof GRPCCancelledError)),
          { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(3) },
        ),
    },
  });
}
