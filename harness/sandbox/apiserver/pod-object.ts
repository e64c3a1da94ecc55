/**
 * Pod object helpers shared by the store and the HTTP layer: timestamps in the apiserver's format,
 * the defaults kube-apiserver fills in on create, validation of the fields we rely on, and the JSON
 * encoding (items of a PodList carry no kind/apiVersion; single objects and watch events do).
 */
import { randomBytes } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { invalid } from './status.ts';

/** RFC 3339 with second precision, as metav1.Time marshals (`2026-11-28T09:12:03Z`). */
export function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** Phases after which a pod's containers never run again (core/v1 PodSucceeded, PodFailed). */
export function isTerminalPhase(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const NAME_SUFFIX_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

/** The 5-character random suffix the apiserver appends to `generateName` (names.SimpleNameGenerator). */
export function randomNameSuffix(): string {
  const bytes = randomBytes(5);
  let s = '';
  for (const b of bytes) s += NAME_SUFFIX_CHARS[b % NAME_SUFFIX_CHARS.length];
  return s;
}

/**
 * Checks what pod validation (pkg/apis/core/validation) would reject among the fields we use: the
 * name must be a DNS-1123 subdomain of at most 253 characters and `spec.containers` non-empty.
 * @throws KubeStatusError 422 Invalid.
 */
export function validatePod(pod: V1Pod): void {
  const name = pod.metadata?.name ?? '';
  if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) {
    throw invalid(
      name,
      'metadata.name',
      `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
    );
  }
  if (!pod.spec?.containers || pod.spec.containers.length === 0) {
    throw invalid(name, 'spec.containers', 'Required value');
  }
}

/**
 * Fills the defaults kube-apiserver's defaulting sets on a new pod spec (pkg/apis/core/v1/defaults.go),
 * so clients that read them (grace period!) see the same values. Mutates `pod`.
 */
export function applySpecDefaults(pod: V1Pod): void {
  pod.spec ??= { containers: [] };
  const spec = pod.spec;
  spec.restartPolicy ??= 'Always';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.schedulerName ??= 'default-scheduler';
  spec.securityContext ??= {};
  spec.enableServiceLinks ??= true;
  spec.priority ??= 0;
}

// Item JSON of stored (never mutated) pod objects, so an event, a list and a DELETE answer share one
// encoding. Only the store registers objects here, once they are final.
const itemJsonCache = new WeakMap<V1Pod, string>();

/** Remembers `json` as the item JSON of the stored, immutable object `pod`. */
export function rememberItemJson(pod: V1Pod, json: string): void {
  itemJsonCache.set(pod, json);
}

/** The remembered item JSON of a stored pod, or a fresh encoding. */
export function itemJson(pod: V1Pod): string {
  return itemJsonCache.get(pod) ?? encodeItem(pod);
}

/** JSON of a pod without TypeMeta, as list items are encoded. */
export function encodeItem(pod: V1Pod): string {
  const { apiVersion: _a, kind: _k, ...rest } = pod as V1Pod & { apiVersion?: string; kind?: string };
  return JSON.stringify(rest);
}

/** Adds TypeMeta in front of an item's JSON: `{"kind":"Pod","apiVersion":"v1",…}`. */
export function withTypeMeta(itemJson: string): string {
  return itemJson === '{}'
    ? '{"kind":"Pod","apiVersion":"v1"}'
    : `{"kind":"Pod","apiVersion":"v1",${itemJson.slice(1)}`;
}
