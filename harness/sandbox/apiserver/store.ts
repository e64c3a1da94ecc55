/**
 * The pod store: every pod of every namespace, one global resourceVersion counter, and the retained
 * window of watch events. Its mutation rules follow kube-apiserver's generic registry
 * (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go) and the pod strategy
 * (pkg/registry/core/pod/strategy.go):
 * - every write bumps the one global resourceVersion, and an unchanged write is a no-op (no event);
 * - DELETE of a terminal or unscheduled pod sets deletionTimestamp with grace 0 (MODIFIED) and removes
 *   it at once (DELETED); of a running pod sets deletionTimestamp = now + grace (MODIFIED) and the
 *   kubelet's part — removal once the grace period has passed — is played by {@link PodStore.sweep};
 * - finalizers keep a pod (with deletionTimestamp) until an update empties them;
 * - executor pods whose ownerReference names a removed pod are deleted, as the garbage collector would.
 *
 * Stored pods are never mutated in place: each write stores a new object, so events and list
 * snapshots can share them. Objects handed to in-process callers are clones.
 */
import { randomUUID } from 'node:crypto';
import type { V1DeleteOptions, V1Pod } from '@kubernetes/client-node';
import { EventWindow } from './event-window.ts';
import {
  applySpecDefaults,
  encodeItem,
  isTerminalPhase,
  randomNameSuffix,
  rememberItemJson,
  rfc3339,
  validatePod,
} from './pod-object.ts';
import { alreadyExists, badRequest, conflict, notFound } from './status.ts';

/** One stored pod: its key (`namespace/name`), the object (shared: do not mutate) and its item JSON. */
export interface StoreEntry {
  readonly key: string;
  readonly pod: V1Pod;
  readonly json: string;
}

/** The type of a stored change, as it appears in a watch event. */
export type StoreEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change of one pod at one resourceVersion. `pod` is the new state (for DELETED: the last). */
export interface StoreEvent {
  readonly type: StoreEventType;
  readonly rv: number;
  readonly pod: V1Pod;
  /** State before the change (undefined for ADDED): watches use it for selector transitions. */
  readonly prev: V1Pod | undefined;
  /** JSON of `pod` without TypeMeta, computed once and shared by every watch. */
  readonly itemJson: string;
}

/** How a create treats the incoming object. */
export type CreateMode =
  /** As kube-apiserver: new uid, creationTimestamp, status reset to Pending, validation. */
  | 'api'
  /** In-process: keeps a given uid/status/creationTimestamp, defaults what is missing. */
  | 'inprocess'
  /** Fixtures: keeps everything given, including deletionTimestamp and a missing status. */
  | 'verbatim';

/** Result of a DELETE: the pod as returned to the client and the HTTP code kube would use. */
export interface DeleteResult {
  /** From {@link PodStore.delete}: the stored object itself (do not mutate); in-process API: a clone. */
  pod: V1Pod;
  /** 200, or 202 when not removed at once and `orphanDependents: false` (handlers/delete.go). */
  code: 200 | 202;
  /** True when the pod left the store during this call. */
  removed: boolean;
}

/** Options of the store. */
export interface PodStoreOptions {
  /** Epoch ms; drives deletionTimestamp and grace periods. */
  now: () => number;
  /** Number of events retained for watches that resume from a resourceVersion (default 50,000). */
  watchWindow?: number;
  /** First resourceVersion handed out is this + 1 (default 1000). */
  initialResourceVersion?: number;
}

interface Entry {
  pod: V1Pod;
  json: string | undefined;
}

function keyOf(ns: string, name: string): string {
  return `${ns}/${name}`;
}

/** The store key of a pod (`namespace/name`), ordered as etcd orders `/registry/pods/<namespace>/<name>`. */
export function podKey(pod: V1Pod): string {
  return keyOf(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '');
}

function clonePod(pod: V1Pod): V1Pod {
  return { apiVersion: 'v1', kind: 'Pod', ...structuredClone(pod) };
}

function stripTypeMeta(pod: V1Pod): V1Pod {
  const { apiVersion: _a, kind: _k, ...rest } = pod;
  return rest;
}

/** The in-memory pod registry behind the sandbox API server. */
export class PodStore {
  readonly #now: () => number;
  readonly #pods = new Map<string, Entry>();
  #sortedKeys: string[] | undefined;
  #rv: number;
  readonly #window: EventWindow<StoreEvent>;
  readonly #listeners = new Set<(ev: StoreEvent) => void>();
  /** Pods in graceful deletion: key → deadline (epoch ms). */
  readonly #graceDeadlines = new Map<string, number>();
  /** Owner uid → keys of pods with an ownerReference to it (for garbage collection). */
  readonly #dependents = new Map<string, Set<string>>();

  constructor(opts: PodStoreOptions) {
    this.#now = opts.now;
    this.#rv = opts.initialResourceVersion ?? 1000;
    this.#window = new EventWindow(opts.watchWindow ?? 50_000, this.#rv);
  }

  /** The latest resourceVersion handed out. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /**
   * Takes one resourceVersion for a write outside the pods (etcd's revision is global: leases, events, the
   * compactor's own key): the resourceVersion moves on with no pod event. Returns it.
   */
  takeRevision(): number {
    return ++this.#rv;
  }

  /** Watches and continue tokens from a resourceVersion below this get 410 Expired. */
  get compactedResourceVersion(): number {
    return this.#window.compactedRv;
  }

  /** Number of pods stored. */
  get size(): number {
    return this.#pods.size;
  }

  /** Number of pods waiting for their grace period to end. */
  get pendingGracefulDeletions(): number {
    return this.#graceDeadlines.size;
  }

  /** Registers a listener called synchronously, in resourceVersion order, for every event. */
  subscribe(listener: (ev: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Retained events with rv > `rv`, oldest first.
   * @throws KubeStatusError 410 Expired when events after `rv` were dropped from the window.
   */
  eventsSince(rv: number): StoreEvent[] {
    return this.#window.since(rv);
  }

  /**
   * An etcd compaction at `rv` (default: the latest resourceVersion, dropping every retained event): a
   * watch, or a list page's continue token, from an older resourceVersion now gets 410 Expired.
   */
  compact(rv: number = this.#rv): void {
    this.#window.compact(Math.min(rv, this.#rv));
  }

  /** The stored object (not a clone: callers must not mutate it) and its cached item JSON. */
  getEntry(ns: string, name: string): { pod: V1Pod; json: string } | undefined {
    const e = this.#pods.get(keyOf(ns, name));
    if (!e) return undefined;
    e.json ??= encodeItem(e.pod);
    return { pod: e.pod, json: e.json };
  }

  /** A clone of the pod with TypeMeta, or undefined. */
  get(ns: string, name: string): V1Pod | undefined {
    const e = this.#pods.get(keyOf(ns, name));
    return e ? clonePod(e.pod) : undefined;
  }

  /**
   * Stored entries in etcd key order (namespace, then name), optionally of one namespace, from the key
   * `fromKey` on (inclusive, as an etcd range read; a `continue` token's key ends in `\0` to start after
   * the last key read). Objects are shared: do not mutate.
   */
  *entries(ns?: string, fromKey?: string): Generator<StoreEntry> {
    this.#sortedKeys ??= [...this.#pods.keys()].sort();
    const keys = this.#sortedKeys;
    let i = 0;
    const from = fromKey ?? (ns !== undefined ? `${ns}/` : undefined);
    if (from !== undefined) {
      let lo = 0;
      let hi = keys.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((keys[mid] as string) < from) lo = mid + 1;
        else hi = mid;
      }
      i = lo;
    }
    for (; i < keys.length; i++) {
      const key = keys[i] as string;
      if (ns !== undefined && !key.startsWith(`${ns}/`)) break;
      const e = this.#pods.get(key);
      if (!e) continue;
      e.json ??= encodeItem(e.pod);
      yield { key, pod: e.pod, json: e.json };
    }
  }

  /** Clones of all pods (of one namespace, or all), in key order. */
  list(ns?: string): V1Pod[] {
    return [...this.entries(ns)].map((e) => clonePod(e.pod));
  }

  /**
   * Creates a pod. See {@link CreateMode} for what is kept from the input.
   * @throws KubeStatusError 409 AlreadyExists, 422 Invalid (mode 'api'), 400 without name/namespace.
   */
  create(input: V1Pod, mode: CreateMode = 'inprocess'): V1Pod {
    const pod = stripTypeMeta(structuredClone(input));
    const meta = { ...(pod.metadata ?? {}) };
    pod.metadata = meta;
    if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${randomNameSuffix()}`;
    if (!meta.name) throw badRequest('name or generateName is required');
    if (!meta.namespace) throw badRequest('the namespace of the object is required');
    const key = keyOf(meta.namespace, meta.name);
    if (mode === 'api') validatePod(pod);
    if (this.#pods.has(key)) throw alreadyExists(meta.name);
    const now = this.#now();
    if (mode === 'api') {
      meta.uid = randomUUID();
      meta.creationTimestamp = rfc3339(now) as unknown as Date;
      delete meta.deletionTimestamp;
      delete meta.deletionGracePeriodSeconds;
      pod.status = { phase: 'Pending', qosClass: 'BestEffort' };
    } else {
      meta.uid ??= randomUUID();
      meta.creationTimestamp ??= rfc3339(now) as unknown as Date;
      if (mode === 'inprocess') {
        pod.status = { phase: 'Pending', ...(pod.status ?? {}) };
      }
    }
    if (mode !== 'verbatim') applySpecDefaults(pod);
    meta.generation ??= 1;
    meta.resourceVersion = String(++this.#rv);
    this.#pods.set(key, { pod, json: undefined });
    this.#sortedKeys = undefined;
    this.#indexOwners(key, pod);
    if (meta.deletionTimestamp) this.#trackGrace(key, pod);
    this.#emit('ADDED', pod, undefined);
    return clonePod(pod);
  }

  /**
   * Replaces a pod (PUT) or its status (PUT …/status), with kube's rules: a given
   * metadata.resourceVersion must be current (409), uid/name/namespace/creationTimestamp/
   * deletionTimestamp are kept from the stored object; the main resource ignores status changes and
   * the status subresource ignores everything but status (pod and pod-status strategies).
   * `scope: 'all'` (in-process) replaces spec, metadata and status at once.
   * @throws KubeStatusError 404, 409 Conflict.
   */
  replace(input: V1Pod, scope: 'main' | 'status' | 'all'): V1Pod {
    const ns = input.metadata?.namespace ?? '';
    const name = input.metadata?.name ?? '';
    const key = keyOf(ns, name);
    const cur = this.#pods.get(key);
    if (!cur) throw notFound(name);
    const given = input.metadata?.resourceVersion;
    if (given && given !== cur.pod.metadata?.resourceVersion) {
      throw conflict(
        name,
        'the object has been modified; please apply your changes to the latest version and try again',
      );
    }
    if (input.metadata?.uid && input.metadata.uid !== cur.pod.metadata?.uid) {
      throw conflict(
        name,
        `Precondition failed: UID in precondition: ${input.metadata.uid}, UID in object meta: ${cur.pod.metadata?.uid}`,
      );
    }
    const next = stripTypeMeta(structuredClone(input));
    const old = cur.pod;
    const oldMeta = old.metadata ?? {};
    if (scope === 'status') {
      next.metadata = { ...oldMeta };
      next.spec = old.spec;
    } else {
      next.metadata = {
        ...(next.metadata ?? {}),
        uid: oldMeta.uid,
        name: oldMeta.name,
        namespace: oldMeta.namespace,
        creationTimestamp: oldMeta.creationTimestamp,
        generation: oldMeta.generation,
      };
      for (const f of ['deletionTimestamp', 'deletionGracePeriodSeconds'] as const) {
        if (oldMeta[f] === undefined) delete next.metadata[f];
        else (next.metadata as Record<string, unknown>)[f] = oldMeta[f];
      }
      if (scope === 'main') next.status = old.status;
    }
    return clonePod(this.#commitUpdate(key, cur, next));
  }

  /**
   * Applies `mutate` to a copy of the stored pod and stores the result through {@link replace}'s
   * rules (PATCH). The patch may carry metadata.resourceVersion as an optimistic-lock precondition.
   * @throws KubeStatusError 404, 409, and whatever `mutate` throws.
   */
  patch(ns: string, name: string, mutate: (cur: V1Pod) => V1Pod, scope: 'main' | 'status' | 'all'): V1Pod {
    const cur = this.#pods.get(keyOf(ns, name));
    if (!cur) throw notFound(name);
    const next = mutate(structuredClone(cur.pod));
    next.metadata = { ...(next.metadata ?? {}), namespace: ns, name };
    // A patch that does not mention resourceVersion carries the current one: no lock.
    next.metadata.resourceVersion ??= cur.pod.metadata?.resourceVersion;
    return this.replace(next, scope);
  }

  /**
   * DELETE with DeleteOptions, following rest.BeforeDelete and the pod strategy's
   * CheckGracefulDelete. See the module comment for the outcomes.
   * @throws KubeStatusError 404 NotFound; 409 Conflict when preconditions.uid/resourceVersion differ
   *   (worded as rest.BeforeDelete words it: `Operation cannot be fulfilled on Pod "x": the UID in
   *   the precondition (…) does not match the UID in record (…)…`).
   */
  delete(ns: string, name: string, opts: V1DeleteOptions = {}): DeleteResult {
    const key = keyOf(ns, name);
    const cur = this.#pods.get(key);
    if (!cur) throw notFound(name);
    const meta = cur.pod.metadata ?? {};
    const pre = opts.preconditions;
    if (pre?.uid && pre.uid !== meta.uid) {
      throw conflict(
        name,
        `the UID in the precondition (${pre.uid}) does not match the UID in record (${meta.uid}). The object might have been deleted and then recreated`,
        'Pod',
      );
    }
    if (pre?.resourceVersion && pre.resourceVersion !== meta.resourceVersion) {
      throw conflict(
        name,
        `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${meta.resourceVersion}). The object might have been modified`,
        'Pod',
      );
    }
    let requested = opts.gracePeriodSeconds;
    if (requested !== undefined && requested < 0) requested = 1;
    const hasFinalizers = (meta.finalizers?.length ?? 0) > 0;
    const codeIfKept: 200 | 202 = opts.orphanDependents === false ? 202 : 200;
    const now = this.#now();

    if (meta.deletionTimestamp) {
      const existingGrace = meta.deletionGracePeriodSeconds;
      if (existingGrace === undefined || existingGrace === 0) {
        // Already at grace 0: held only by finalizers, or a half-done delete to finish now.
        if (hasFinalizers) return { pod: cur.pod, code: codeIfKept, removed: false };
        return { pod: this.#remove(key, cur), code: 200, removed: true };
      }
      if (requested === undefined || requested >= existingGrace) {
        // Graceful deletion pending: kube returns the object unchanged (errAlreadyDeleting).
        return { pod: cur.pod, code: codeIfKept, removed: false };
      }
      // Only a shorter grace period may be given: move the deadline earlier.
      const oldDeadline = Date.parse(String(meta.deletionTimestamp)) - existingGrace * 1000;
      const next = this.#withDeletion(cur.pod, oldDeadline + requested * 1000, requested);
      return this.#afterGracefulUpdate(key, cur, next, requested, hasFinalizers, codeIfKept, now);
    }

    let period = requested ?? cur.pod.spec?.terminationGracePeriodSeconds ?? 0;
    // Not scheduled or already terminated: nothing to stop, delete at once (CheckGracefulDelete).
    if (!cur.pod.spec?.nodeName || isTerminalPhase(cur.pod)) period = 0;
    const next = this.#withDeletion(cur.pod, now + period * 1000, period);
    return this.#afterGracefulUpdate(key, cur, next, period, hasFinalizers, codeIfKept, now);
  }

  /**
   * Plays the kubelet: pods whose grace period has passed (by the injected clock) are removed, or,
   * when finalizers hold them, get deletionGracePeriodSeconds 0 so that emptying the finalizers
   * removes them. Returns the number of pods changed.
   */
  sweep(): number {
    if (this.#graceDeadlines.size === 0) return 0;
    const now = this.#now();
    let changed = 0;
    for (const [key, deadline] of this.#graceDeadlines) {
      if (deadline > now) continue;
      this.#graceDeadlines.delete(key);
      const cur = this.#pods.get(key);
      if (!cur?.pod.metadata?.deletionTimestamp) continue;
      changed++;
      if ((cur.pod.metadata.finalizers?.length ?? 0) > 0) {
        const next = structuredClone(cur.pod);
        (next.metadata as NonNullable<V1Pod['metadata']>).deletionGracePeriodSeconds = 0;
        this.#commitUpdate(key, cur, next);
      } else {
        this.#remove(key, cur);
      }
    }
    return changed;
  }

  #withDeletion(pod: V1Pod, deadlineMs: number, graceSeconds: number): V1Pod {
    // Stored objects are immutable, so a copy of the top level and metadata is enough.
    return {
      ...pod,
      metadata: {
        ...pod.metadata,
        deletionTimestamp: rfc3339(deadlineMs) as unknown as Date,
        deletionGracePeriodSeconds: graceSeconds,
      },
    };
  }

  #afterGracefulUpdate(
    key: string,
    cur: Entry,
    next: V1Pod,
    grace: number,
    hasFinalizers: boolean,
    codeIfKept: 200 | 202,
    now: number,
  ): DeleteResult {
    const stored = this.#commitUpdate(key, cur, next, grace > 0 ? now + grace * 1000 : undefined);
    const after = this.#pods.get(key);
    if (!after) return { pod: stored, code: 200, removed: true };
    if (hasFinalizers || grace > 0) return { pod: after.pod, code: codeIfKept, removed: false };
    return { pod: this.#remove(key, after), code: 200, removed: true };
  }

  /** Stores `next` as a new version (or nothing if unchanged); removes it when nothing holds it. */
  #commitUpdate(key: string, cur: Entry, next: V1Pod, deadlineMs?: number): V1Pod {
    const m = next.metadata ?? {};
    next.metadata = m;
    if (!m.deletionTimestamp || cur.pod.metadata?.deletionTimestamp) {
      // GuaranteedUpdate skips identical objects: no new resourceVersion, no event. (A change that
      // starts deletion always differs: skip the comparison on that hot path.)
      m.resourceVersion = cur.pod.metadata?.resourceVersion;
      cur.json ??= encodeItem(cur.pod);
      if (encodeItem(next) === cur.json) return cur.pod;
    }
    m.resourceVersion = String(++this.#rv);
    const prev = cur.pod;
    const entry: Entry = { pod: next, json: undefined };
    this.#pods.set(key, entry);
    this.#unindexOwners(key, prev);
    this.#indexOwners(key, next);
    if (deadlineMs !== undefined) this.#graceDeadlines.set(key, deadlineMs);
    this.#emit('MODIFIED', next, prev);
    // ShouldDeleteDuringUpdate (generic registry): deletion requested with grace 0 and no
    // finalizers left → the object goes now. Pods still in their grace period wait for the sweep.
    if (m.deletionTimestamp && m.deletionGracePeriodSeconds === 0 && (m.finalizers?.length ?? 0) === 0) {
      return this.#remove(key, entry);
    }
    return next;
  }

  #trackGrace(key: string, pod: V1Pod): void {
    const m = pod.metadata;
    if (!m?.deletionTimestamp || !m.deletionGracePeriodSeconds) return;
    this.#graceDeadlines.set(key, Date.parse(String(m.deletionTimestamp)));
  }

  #remove(key: string, cur: Entry): V1Pod {
    const final: V1Pod = {
      ...cur.pod,
      metadata: { ...cur.pod.metadata, resourceVersion: String(++this.#rv) },
    };
    this.#pods.delete(key);
    this.#sortedKeys = undefined;
    this.#graceDeadlines.delete(key);
    this.#unindexOwners(key, cur.pod);
    this.#emit('DELETED', final, cur.pod);
    const uid = final.metadata?.uid;
    const deps = uid ? this.#dependents.get(uid) : undefined;
    if (deps && deps.size > 0) {
      // The garbage collector deletes dependents asynchronously, with their own grace periods.
      const keys = [...deps];
      setImmediate(() => this.#collectGarbage(uid as string, keys));
    }
    return final;
  }

  #collectGarbage(ownerUid: string, keys: string[]): void {
    for (const key of keys) {
      const e = this.#pods.get(key);
      const m = e?.pod.metadata;
      if (!m?.name || !m.namespace || m.deletionTimestamp) continue;
      if (!m.ownerReferences?.some((o) => o.uid === ownerUid)) continue;
      this.delete(m.namespace, m.name, { preconditions: { uid: m.uid } });
    }
  }

  #indexOwners(key: string, pod: V1Pod): void {
    for (const o of pod.metadata?.ownerReferences ?? []) {
      let set = this.#dependents.get(o.uid);
      if (!set) {
        set = new Set();
        this.#dependents.set(o.uid, set);
      }
      set.add(key);
    }
  }

  #unindexOwners(key: string, pod: V1Pod): void {
    for (const o of pod.metadata?.ownerReferences ?? []) {
      const set = this.#dependents.get(o.uid);
      set?.delete(key);
      if (set?.size === 0) this.#dependents.delete(o.uid);
    }
  }

  #emit(type: StoreEventType, pod: V1Pod, prev: V1Pod | undefined): void {
    const ev: StoreEvent = { type, rv: this.#rv, pod, prev, itemJson: encodeItem(pod) };
    rememberItemJson(pod, ev.itemJson);
    if (type !== 'DELETED') {
      const e = this.#pods.get(podKey(pod));
      if (e && e.pod === pod) e.json = ev.itemJson;
    }
    this.#window.push(ev);
    for (const l of this.#listeners) l(ev);
  }
}
