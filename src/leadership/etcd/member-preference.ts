/**
 * Which etcd member a call goes to. etcd3 picks a member at random for every call and every stream (watch,
 * lease keepalive), trying the next one when its per-member policy refuses without calling. A member that is
 * down would otherwise keep being picked: a unary call there fails and is retried elsewhere (one wasted
 * attempt), but a stream is "created" there without error and only fails afterwards, and each failure of the
 * watch stream doubles etcd3's reconnect delay — one member down could hold a replica's view of the elections
 * for many seconds, and with it a handover.
 *
 * The rule: a member whose call failed with a connection or server error in the last `avoidForMs` is
 * **avoided** while some other member has not failed in that time; when every member has, calls go through
 * to all of them (nothing is refused for being down: the caller's own timeouts and retries decide). An
 * avoided member is tried again once its period has passed; a success does not clear a failure (a stream to a
 * dead member "succeeds" before it fails).
 */
import { type IDefaultPolicyContext, type IPolicy, noop } from 'cockatiel';
import { GRPCCancelledError, isRecoverableError } from 'etcd3';
import type { MonotonicClock } from '../../clock.ts';

/** A call was not sent to this member: it failed recently and another member has not. */
export class EtcdMemberAvoidedError extends Error {
  override name = 'EtcdMemberAvoidedError';
}

/** Options of {@link createMemberPreference}. */
export interface MemberPreferenceOptions {
  /** How long a member is avoided after a failed call, ms. */
  avoidForMs: number;
  /** The monotonic clock, ms (src/clock.ts). */
  monotonicNow: MonotonicClock;
}

/** Calls per member, since the client was created. */
export interface MemberCallCounts {
  /** Calls (unary calls and stream openings) sent to the member. */
  sent: number;
  /** Failures seen with a connection or server error (a stream's, reported after it opened, included). */
  failed: number;
  /** Calls not sent to it because it was avoided. */
  avoided: number;
}

/** The members of one client and their recent failures. */
export interface MemberPreference {
  /** The policy of one member (`host` as etcd3 passes it: the endpoint as configured). */
  policy(host: string): IPolicy<IDefaultPolicyContext>;
  /** Counts per member (keyed by the endpoint as configured). */
  counts(): ReadonlyMap<string, MemberCallCounts>;
}

/** Failures that say something about the member: connection and server errors, not our own cancellations. */
const memberFailure = (err: unknown): boolean =>
  err instanceof Error && isRecoverableError(err) && !(err instanceof GRPCCancelledError);

/** Creates the member preference of one etcd client. */
export function createMemberPreference(opts: MemberPreferenceOptions): MemberPreference {
  /** Member → when its last failure was seen, monotonic ms. */
  const failedAt = new Map<string, number>();
  const counts = new Map<string, MemberCallCounts>();
  const failedRecently = (host: string, now: number) => {
    const at = failedAt.get(host);
    return at !== undefined && now - at < opts.avoidForMs;
  };
  const avoid = (host: string) => {
    const now = opts.monotonicNow();
    if (!failedRecently(host, now)) return false;
    for (const other of counts.keys()) if (other !== host && !failedRecently(other, now)) return true;
    return false;
  };

  return {
    policy(host) {
      const mine: MemberCallCounts = { sent: 0, failed: 0, avoided: 0 };
      counts.set(host, mine);
      return {
        _altReturn: undefined as never,
        // Nobody listens (etcd3 does not): the events of cockatiel's no-op policy.
        onSuccess: noop.onSuccess,
        onFailure: noop.onFailure,
        async execute<T>(
          fn: (context: IDefaultPolicyContext) => PromiseLike<T> | T,
          signal?: AbortSignal,
        ): Promise<T> {
          if (avoid(host)) {
            mine.avoided += 1;
            // Not called: etcd3 tries the next member.
            throw new EtcdMemberAvoidedError(`etcd member ${host} failed recently; another member is used`);
          }
          const failed = (err: unknown) => {
            if (!memberFailure(err)) return;
            mine.failed += 1;
            failedAt.set(host, opts.monotonicNow());
          };
          let result: PromiseLike<T> | T;
          try {
            // A synchronous throw is etcd3 reporting a stream's failure (`markFailed`), not a new call.
            result = fn({ signal: signal ?? new AbortController().signal });
          } catch (err) {
            failed(err);
            throw err;
          }
          mine.sent += 1;
          try {
            return await result;
          } catch (err) {
            failed(err);
            throw err;
          }
        },
      };
    },
    counts: () => counts,
  };
}
