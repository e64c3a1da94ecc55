/**
 * A memory cgroup with a limit, for running a replica as Kubernetes runs it in its container: Node reads
 * the cgroup's memory limit at start (`process.constrainedMemory()`) and sizes V8's heap from it (a
 * 512 MiB limit gives a ~259 MiB heap limit and a 1 MiB semi-space, against ~4 GiB and 64 MiB on this
 * 24 GiB machine without one). Works where this process may create cgroups (root, cgroup v2 with the
 * memory controller enabled for children, or cgroup v1's memory hierarchy); elsewhere there is none.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/** A cgroup created by {@link createMemoryCgroup}. */
export interface MemoryCgroup {
  /** Directory whose `cgroup.procs` a process writes its pid to (`SpawnReplicaOptions.cgroupDir`). */
  readonly dir: string;
  /** `v2` (memory.max) or `v1` (memory.limit_in_bytes). */
  readonly version: 'v1' | 'v2';
  /** Removes the cgroup (it must be empty: its processes exited). Never throws. */
  remove(): void;
}

const V2_ROOT = '/sys/fs/cgroup';
const V1_ROOT = '/sys/fs/cgroup/memory';

/**
 * Creates a cgroup named `name` limited to `limitBytes` of memory, or returns undefined when this machine
 * does not let this process do so (the caller then measures without a limit and says so).
 */
export function createMemoryCgroup(name: string, limitBytes: number): MemoryCgroup | undefined {
  const attempt = (version: 'v1' | 'v2', root: string, limitFile: string): MemoryCgroup | undefined => {
    const dir = join(root, name);
    try {
      if (!existsSync(dir)) mkdirSync(dir);
      writeFileSync(join(dir, limitFile), String(limitBytes));
      return {
        dir,
        version,
        remove() {
          try {
            rmdirSync(dir);
          } catch {
            // still has a process, or already gone
          }
        },
      };
    } catch {
      return undefined;
    }
  };
  const v2Memory = () => {
    try {
      return readFileSync(join(V2_ROOT, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('memory');
    } catch {
      return false;
    }
  };
  if (v2Memory()) return attempt('v2', V2_ROOT, 'memory.max');
  if (existsSync(join(V1_ROOT, 'memory.limit_in_bytes')))
    return attempt('v1', V1_ROOT, 'memory.limit_in_bytes');
  return undefined;
}

/** The Deployment manifest whose memory limit the replica "as deployed" runs under. */
const DEPLOYMENT_MANIFEST = fileURLToPath(new URL('../infra/k8s/base/deployment.yaml', import.meta.url));

/**
 * `limits.memory` of the cleaner container in {@link DEPLOYMENT_MANIFEST}, bytes (Kubernetes quantity
 * with a binary or decimal suffix).
 * @throws Error when the manifest has no such limit or it is not a quantity this reads.
 */
export function deploymentMemoryLimitBytes(): number {
  for (const doc of parseAllDocuments(readFileSync(DEPLOYMENT_MANIFEST, 'utf8'))) {
    const d = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: { resources?: { limits?: { memory?: string } } }[] } } };
    };
    if (d?.kind !== 'Deployment') continue;
    const text = d.spec?.template?.spec?.containers?.[0]?.resources?.limits?.memory;
    const m = /^(\d+)(Ki|Mi|Gi|k|M|G)?$/.exec(text ?? '');
    if (!m) break;
    const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
    return Number(m[1]) * unit;
  }
  throw new Error(`bench: no limits.memory on the Deployment's container in ${DEPLOYMENT_MANIFEST}`);
}
