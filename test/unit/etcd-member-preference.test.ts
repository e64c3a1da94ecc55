/**
 * Which etcd member a call goes to (src/leadership/etcd/member-preference.ts), with the policies etcd3 would
 * call and an injected monotonic clock: a member that failed is avoided while another has not failed, for
 * `avoidForMs`; a success does not clear it; when every member failed, calls go through; our own
 * cancellations and non-recoverable errors do not count; a synchronous throw (etcd3 reporting a stream's
 * failure) counts as a failure, not as a call.
 */
import { GRPCCancelledError, GRPCNotFoundError, GRPCUnavailableError } from 'etcd3';
import { describe, expect, it } from 'vitest';
import {
  createMemberPreference,
  EtcdMemberAvoidedError,
} from '../../src/leadership/etcd/member-preference.ts';

function members(avoidForMs = 5000) {
  let now = 0;
  const pref = createMemberPreference({ avoidForMs, monotonicNow: () => now });
  const a = pref.policy('a');
  const b = pref.policy('b');
  return {
    pref,
    a,
    b,
    advance: (ms: number) => {
      now += ms;
    },
  };
}
const fail = (err: Error) => () => Promise.reject(err);
const ok = () => Promise.resolve('ok');

describe('etcd member preference', () => {
  it('a failed member is avoided for avoidForMs while another has not failed, then tried again', async () => {
    const { pref, a, advance } = members();
    await expect(a.execute(fail(new GRPCUnavailableError('refused')))).rejects.toThrow('refused');
    await expect(a.execute(ok)).rejects.toBeInstanceOf(EtcdMemberAvoidedError);
    advance(4999);
    await expect(a.execute(ok)).rejects.toBeInstanceOf(EtcdMemberAvoidedError);
    advance(1);
    await expect(a.execute(ok)).resolves.toBe('ok');
    expect(pref.counts().get('a')).toEqual({ sent: 2, failed: 1, avoided: 2 });
  });

  it('a stream that opens on a failed member does not clear its failure', async () => {
    const { a, advance } = members();
    await expect(a.execute(fail(new GRPCUnavailableError('refused')))).rejects.toThrow();
    advance(5000);
    await expect(a.execute(() => 'stream')).resolves.toBe('stream');
    // etcd3 reports the stream's failure by throwing synchronously from the policy's function.
    await expect(
      a.execute(() => {
        throw new GRPCUnavailableError('stream failed');
      }),
    ).rejects.toThrow('stream failed');
    await expect(a.execute(ok)).rejects.toBeInstanceOf(EtcdMemberAvoidedError);
  });

  it('every member failed recently → calls go through to all of them', async () => {
    const { a, b } = members();
    await expect(a.execute(fail(new GRPCUnavailableError('x')))).rejects.toThrow();
    await expect(b.execute(fail(new GRPCUnavailableError('y')))).rejects.toThrow();
    await expect(a.execute(ok)).resolves.toBe('ok');
    await expect(b.execute(ok)).resolves.toBe('ok');
  });

  it('our own cancellations and answers such as NotFound say nothing about the member', async () => {
    const { pref, a } = members();
    await expect(a.execute(fail(new GRPCCancelledError('cancelled')))).rejects.toThrow();
    await expect(a.execute(fail(new GRPCNotFoundError('no such key')))).rejects.toThrow();
    await expect(a.execute(ok)).resolves.toBe('ok');
    expect(pref.counts().get('a')).toEqual({ sent: 3, failed: 0, avoided: 0 });
  });
});
