/**
 * How `explain` is told which pod: `context:namespace/pod`, `namespace/pod` (the kubeconfig's current
 * context), or the pod's UID (searched in every configured target). Pure.
 */
import { parseTarget, type TargetSpec } from '../config/schema.ts';
import { isCleanupJobId } from '../queue/job-identity.ts';

/** A parsed pod reference. */
export type PodRef = { readonly uid: string } | { readonly target: TargetSpec; readonly name: string };

const POD_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * Parses a pod reference.
 * @returns the reference, or a message saying what is wrong and what is expected.
 */
export function parsePodRef(text: string): PodRef | string {
  const t = text.trim();
  const asUid: unknown = t; // the type guard would narrow `t` itself to never below
  if (isCleanupJobId(asUid)) return { uid: asUid.toLowerCase() };
  const slash = t.lastIndexOf('/');
  if (slash < 0)
    return `"${t}": expected context:namespace/pod, namespace/pod or a pod UID (8-4-4-4-12 hex digits)`;
  const target = parseTarget(t.slice(0, slash));
  if (typeof target === 'string') return `${target}; expected context:namespace/pod`;
  const name = t.slice(slash + 1);
  if (!POD_NAME.test(name))
    return `"${name}" is not a pod name (RFC 1123 subdomain); expected context:namespace/pod`;
  return { target, name };
}
