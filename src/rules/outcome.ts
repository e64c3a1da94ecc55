/**
 * What a cleanup job ends with: the handler (workers/cleanup-driver-pod.ts) returns it, the queue's worker
 * adapter maps it onto BullMQ, logs and metrics name it. Declared here, below all three, so that none of them
 * imports another for the type.
 */

/** What a cleanup job ended with. The first seven are final; `not-yet`, `fenced`, `aborted` put the job back. */
export type Outcome =
  | { readonly outcome: 'accepted'; readonly latenessMs: number }
  | { readonly outcome: 'already-absent' }
  | { readonly outcome: 'replaced' }
  /** `ours`: this replica's own DELETE of the UID was accepted before (no request was made). */
  | { readonly outcome: 'already-deleting'; readonly ours?: true }
  | { readonly outcome: 'skipped'; readonly reason: string }
  | { readonly outcome: 'would-delete'; readonly latenessMs: number }
  | {
      readonly outcome: 'failed';
      readonly step: 'get' | 'delete';
      readonly code: number | undefined;
      readonly reason: string;
      readonly message: string;
      readonly retryAfterMs: number | undefined;
    }
  /**
   * Not due yet: back to delayed for `dueInMs`. `deadlineMs`: the deadline the handler computed from the
   * re-checked pod and this replica's retention, when it differs from the stored one (stored as the job goes
   * back, epoch ms).
   */
  | { readonly outcome: 'not-yet'; readonly dueInMs: number; readonly deadlineMs?: number }
  | { readonly outcome: 'fenced'; readonly reason: string }
  /**
   * Leadership lost or the replica stopping. `deleteSent`: the DELETE had left and its answer was given up
   * (src/kube/pod-api.ts `DeleteAnswerAbandonedError`): the API server may have applied it, and the job's next
   * run finds the pod being deleted or gone.
   */
  | { readonly outcome: 'aborted'; readonly deleteSent?: true };

/** Names of the final no-op outcomes (logged at debug). */
export const NOOP_OUTCOMES = [
  'already-absent',
  'replaced',
  'already-deleting',
  'skipped',
  'would-delete',
] as const;
